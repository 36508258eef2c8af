"""One error type for everything a user can fix: bad config, bad input, unreachable upstream.

Every CLI maps `TidelakeError` to exit status 2 and prints its message; anything else is a bug and keeps
its traceback.
"""


class TidelakeError(Exception):
    """A problem with the user's config or input. The message names the file, key, region or line."""

    exit_code = 2


class ConfigError(TidelakeError):
    """The config file is missing, malformed, or holds an unknown key or a bad value."""


class InputError(TidelakeError):
    """Source data that breaks the input contract: corrupt files, impossible event streams, gaps."""


class UpstreamError(TidelakeError):
    """The upstream cannot be reached or read: bad address, wrong password, TLS, GC'd snapshot."""


class UpstreamUnavailable(UpstreamError):
    """The connection to the upstream was refused, reset, lost or timed out: worth another try (reconcile
    reads the table again from new connections, `retries` times, then it is an UpstreamError)."""


class ConcurrentRunError(TidelakeError):
    """Another writer (a second run of the same job) committed to a table this run was committing to.

    Delta refused this run's commit, so nothing of it is half-applied; what it would have written is the
    other run's identical, tagged commit, or the next run's work. Exit status 3.
    """

    exit_code = 3
