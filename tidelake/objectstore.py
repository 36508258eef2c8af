"""`s3a://` sources and warehouses: the `[object_store]` settings on a session, and S3 failures as clear errors.

The settings go on the session's Hadoop configuration at run time (never into SparkConf, so they cannot
show on the Spark UI's environment page); Spark ships that configuration to the executors with each job.
An S3 failure (wrong credentials, a missing bucket, an endpoint that does not answer or keeps answering
503 SlowDown / 500 InternalError past S3A's retries) reaches the driver
as a JVM stack trace from wherever it happened; `object_store_errors` turns it into a `ConfigError` that
names the endpoint and the bucket and never the secret, so the CLI exits 2.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tidelake.errors import ConfigError, TidelakeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidelake.config import ObjectStoreConfig

DEFAULT_REGION = "us-east-1"  # what S3-compatible servers expect when the config names an endpoint only
SIMPLE_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
TEMPORARY_PROVIDER = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"

_BUCKET = re.compile(r"s3a?://([A-Za-z0-9.\-_]+)")
# (what went wrong, markers in the JVM exception text), first match wins
_FAILURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("does not exist", ("UnknownStoreException", "NoSuchBucket", "The specified bucket does not exist")),
    (
        "refused the credentials (access denied)",
        ("AccessDeniedException", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403 Forbidden",
         "Status Code: 403", "AccessDenied"),
    ),
    (
        "cannot be reached",
        ("Unable to execute HTTP request", "Connection refused", "UnknownHostException",
         "ConnectTimeoutException", "SdkClientException: Unable to load"),
    ),
    ("is throttling requests (503 SlowDown)", ("AWSServiceThrottledException", "Status Code: 503", "SlowDown")),
    ("fails requests (500 InternalError)", ("AWSStatus500Exception", "Status Code: 500", "InternalError")),
)  # fmt: skip


def hadoop_settings(config: ObjectStoreConfig) -> dict[str, str]:
    """The Hadoop S3A settings for `config` (empty when the config sets nothing: S3A's defaults hold)."""
    settings: dict[str, str] = {}
    if config.endpoint:
        settings["fs.s3a.endpoint"] = config.endpoint.rstrip("/")
        settings["fs.s3a.connection.ssl.enabled"] = str(config.endpoint.startswith("https://")).lower()
        settings["fs.s3a.endpoint.region"] = config.region or DEFAULT_REGION
    elif config.region:
        settings["fs.s3a.endpoint.region"] = config.region
    if config.path_style_access:
        settings["fs.s3a.path.style.access"] = "true"
    if config.access_key:
        settings["fs.s3a.access.key"] = config.access_key.reveal()
        settings["fs.s3a.secret.key"] = config.secret_key.reveal()
        if config.session_token:
            settings["fs.s3a.session.token"] = config.session_token.reveal()
        settings["fs.s3a.aws.credentials.provider"] = (
            TEMPORARY_PROVIDER if config.session_token else SIMPLE_PROVIDER
        )
    timeouts = {
        "fs.s3a.connection.establish.timeout": config.connect_timeout,
        "fs.s3a.connection.timeout": config.read_timeout,
    }
    settings.update({key: f"{seconds}s" for key, seconds in timeouts.items() if seconds is not None})
    if config.retries is not None:
        settings["fs.s3a.retry.limit"] = str(config.retries)
    if config.retry_wait is not None:
        settings["fs.s3a.retry.interval"] = f"{round(config.retry_wait * 1000)}ms"
    if config.throttle_retries is not None:
        settings["fs.s3a.retry.throttle.limit"] = str(config.throttle_retries)
    if config.throttle_wait is not None:
        settings["fs.s3a.retry.throttle.interval"] = f"{round(config.throttle_wait * 1000)}ms"
    return settings


def configure(spark: SparkSession, config: ObjectStoreConfig) -> None:
    """Put `config` on the session's Hadoop configuration (a session spark-submit made keeps the rest)."""
    hadoop = spark._jsc.hadoopConfiguration()
    for key, value in hadoop_settings(config).items():
        hadoop.set(key, value)


@contextmanager
def configured(spark: SparkSession, config: ObjectStoreConfig) -> Iterator[None]:
    """`configure` for the block only: the settings it changed are put back after it (the demo's local
    S3 server must not stay the session's endpoint once it has stopped)."""
    hadoop = spark._jsc.hadoopConfiguration()
    before = {key: hadoop.get(key) for key in hadoop_settings(config)}
    configure(spark, config)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                hadoop.unset(key)
            else:
                hadoop.set(key, value)


def describe_failure(message: str, config: ObjectStoreConfig) -> str | None:
    """A one-line explanation of an S3 failure in a JVM exception text, or None if it is not one."""
    if "s3a://" not in message and "S3A" not in message and "amazonaws" not in message:
        return None
    problem = next((what for what, markers in _FAILURES if any(m in message for m in markers)), None)
    if problem is None:
        return None
    found = _BUCKET.search(message)
    bucket = f"bucket {found.group(1)!r}" if found else "the bucket"
    endpoint = f"endpoint {config.endpoint}" if config.endpoint else "the default AWS endpoint"
    if problem == "cannot be reached":
        text = f"object store {endpoint} cannot be reached (for {bucket}): check [object_store] endpoint"
    elif problem.startswith(("is throttling", "fails requests")):
        settings = "throttle_retries/throttle_wait" if "throttling" in problem else "retries/retry_wait"
        text = (
            f"object store {endpoint} {problem} for {bucket} past its retries: run again later, or allow more "
            f"with [object_store] {settings}"
        )
    elif problem == "does not exist":
        text = f"{bucket} does not exist at {endpoint}: create it or fix the s3a:// path"
    else:
        text = f"{endpoint} {problem} for {bucket}: check [object_store] access_key/secret_key"
    return _without_secrets(text, config)


@contextmanager
def object_store_errors(config: ObjectStoreConfig) -> Iterator[None]:
    """Turn S3 failures raised inside the block into a ConfigError naming the endpoint and bucket."""
    try:
        yield
    except TidelakeError as exc:
        raise type(exc)(_without_secrets(str(exc), config)) from None
    except Exception as exc:  # Py4J errors carry the JVM exception as text
        described = describe_failure(str(exc), config)
        if described is None:
            raise
        raise ConfigError(described) from None


def _without_secrets(text: str, config: ObjectStoreConfig) -> str:
    for secret in (config.access_key, config.secret_key, config.session_token):
        if secret:
            text = text.replace(secret.reveal(), "***")
    return text
