"""`[object_store]`: the S3A settings it gives, its checks, and S3 failures told without secrets."""

from __future__ import annotations

import pytest

from tidelake.config import ObjectStoreConfig, load_config
from tidelake.configload import Secret
from tidelake.errors import ConfigError
from tidelake.objectstore import SIMPLE_PROVIDER, TEMPORARY_PROVIDER, describe_failure, hadoop_settings

pytestmark = pytest.mark.unit

LOCAL = ObjectStoreConfig(
    endpoint="http://127.0.0.1:9000",
    path_style_access=True,
    access_key=Secret("AKID"),
    secret_key=Secret("s3cr3t"),
)


def test_nothing_set_leaves_s3a_defaults_and_the_provider_chain() -> None:
    assert hadoop_settings(ObjectStoreConfig()) == {}
    assert hadoop_settings(ObjectStoreConfig(region="eu-west-1")) == {"fs.s3a.endpoint.region": "eu-west-1"}


def test_endpoint_and_keys_become_s3a_settings() -> None:
    settings = hadoop_settings(LOCAL)
    assert settings == {
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.access.key": "AKID",
        "fs.s3a.secret.key": "s3cr3t",
        "fs.s3a.aws.credentials.provider": SIMPLE_PROVIDER,
    }
    temporary = ObjectStoreConfig(
        endpoint="https://s3.eu-west-1.amazonaws.com/", region="eu-west-1",
        access_key=Secret("A"), secret_key=Secret("B"), session_token=Secret("T"),
    )  # fmt: skip
    settings = hadoop_settings(temporary)
    assert settings["fs.s3a.connection.ssl.enabled"] == "true"
    assert settings["fs.s3a.endpoint"] == "https://s3.eu-west-1.amazonaws.com"
    assert settings["fs.s3a.session.token"] == "T"
    assert settings["fs.s3a.aws.credentials.provider"] == TEMPORARY_PROVIDER


def test_timeouts_and_retries_become_s3a_settings_and_are_checked(tmp_path) -> None:
    conf = tmp_path / "c.toml"
    base = '[source]\npath = "s3a://b/scans"\n[target]\nwarehouse = "s3a://w/wh"\n[object_store]\n'
    conf.write_text(
        base + "connect_timeout = 5\nread_timeout = 60\nretries = 4\nretry_wait = 1.5\n"
        "throttle_retries = 9\nthrottle_wait = 0.25\n"
    )
    assert hadoop_settings(load_config(conf).object_store) == {
        "fs.s3a.connection.establish.timeout": "5s",
        "fs.s3a.connection.timeout": "60s",
        "fs.s3a.retry.limit": "4",
        "fs.s3a.retry.interval": "1500ms",
        "fs.s3a.retry.throttle.limit": "9",
        "fs.s3a.retry.throttle.interval": "250ms",
    }
    conf.write_text(base + "read_timeout = 0\n")
    with pytest.raises(ConfigError, match="read_timeout must be more than 0"):
        load_config(conf)
    conf.write_text(base + "retries = -1\n")
    with pytest.raises(ConfigError, match="retries must be 0..50"):
        load_config(conf)
    conf.write_text(base + "throttle_wait = 0\n")
    with pytest.raises(ConfigError, match="throttle_wait must be more than 0"):
        load_config(conf)


def test_config_checks_and_secrets_from_the_environment(tmp_path) -> None:
    conf = tmp_path / "c.toml"
    base = '[source]\npath = "s3a://b/scans"\n[target]\nwarehouse = "s3a://w/wh"\n'
    conf.write_text(base + '[object_store]\nendpoint = "http://h:1"\naccess_key = "A"\nsecret_key = "${S}"\n')
    loaded = load_config(conf, environ={"S": "from-env"}).object_store
    assert loaded.secret_key.reveal() == "from-env" and "from-env" not in repr(loaded)
    conf.write_text(base + '[object_store]\naccess_key = "A"\n')
    with pytest.raises(ConfigError, match="access_key and secret_key go together"):
        load_config(conf)
    conf.write_text(base + '[object_store]\nendpoint = "127.0.0.1:9000"\n')
    with pytest.raises(ConfigError, match="endpoint"):
        load_config(conf)
    conf.write_text(base + '[object_store]\nbucket = "x"\n')
    with pytest.raises(ConfigError, match="valid keys: access_key, connect_timeout, endpoint"):
        load_config(conf)


@pytest.mark.parametrize(
    ("jvm_text", "says"),
    [
        ("java.nio.file.AccessDeniedException: s3a://data/scans: getFileStatus on s3a://data/scans: "
         "software.amazon.awssdk.services.s3.model.S3Exception: Forbidden (Service: S3, Status Code: 403",
         "refused the credentials"),
        ("org.apache.hadoop.fs.s3a.UnknownStoreException: `s3a://data/scans': getFileStatus on "
         "s3a://data/scans: NoSuchBucket: The specified bucket does not exist", "does not exist"),
        ("org.apache.hadoop.net.ConnectTimeoutException: s3a://data/scans: Unable to execute HTTP request: "
         "Connection refused", "cannot be reached"),
        # the texts S3A gave behind tests/httpfaults.py answering every request with S3's error
        ("org.apache.hadoop.fs.s3a.AWSServiceThrottledException: getFileStatus on s3a://data/wh: software."
         "amazon.awssdk.services.s3.model.S3Exception: null (Service: S3, Status Code: 503, Request ID: X)",
         "is throttling requests (503 SlowDown)"),
        ("org.apache.hadoop.fs.s3a.AWSStatus500Exception: getFileStatus on s3a://data/wh: software.amazon."
         "awssdk.services.s3.model.S3Exception: null (Service: S3, Status Code: 500, Request ID: X)",
         "fails requests (500 InternalError)"),
    ],
)  # fmt: skip
def test_s3_failures_name_endpoint_and_bucket_never_the_secret(jvm_text: str, says: str) -> None:
    described = describe_failure(jvm_text + " key s3cr3t", LOCAL)
    assert described is not None and says in described
    assert "bucket 'data'" in described and "http://127.0.0.1:9000" in described
    assert "s3cr3t" not in described


def test_other_failures_are_left_alone() -> None:
    assert describe_failure("java.lang.OutOfMemoryError: Java heap space", LOCAL) is None
    assert describe_failure("AnalysisException: [PATH_NOT_FOUND] file:/tmp/x", LOCAL) is None
