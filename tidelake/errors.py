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
