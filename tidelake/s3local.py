"""A real S3 API server on 127.0.0.1 (S3Proxy with its filesystem backend) for the tests and the demo.

S3Proxy's jars come from Maven Central through `dev/setup.sh` (`.cache/s3proxy`); it runs in its own JVM,
never on spark.jars. With the filesystem backend a bucket is a folder under the server's data folder, so
`make_bucket` makes the folder; every object goes through the S3 API.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

from tidelake.config import ObjectStoreConfig
from tidelake.configload import Secret
from tidelake.errors import ConfigError
from tidelake.jars import cache_folder


def s3proxy_jars() -> Path:
    """Folder of S3Proxy and its dependencies: $TIDELAKE_S3PROXY, else the checkout's `.cache/s3proxy`."""
    given = os.environ.get("TIDELAKE_S3PROXY")
    return Path(given) if given else cache_folder("s3proxy")


class LocalS3Server:
    """S3Proxy on a free 127.0.0.1 port with a fresh identity; `stop()` ends it (a context manager too)."""

    def __init__(self, folder: Path, *, identity: str = "tidelake-local") -> None:
        self.folder = folder
        self.identity = identity
        self.credential = secrets.token_hex(16)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def object_store(self) -> ObjectStoreConfig:
        """The `[object_store]` settings that reach this server."""
        return ObjectStoreConfig(
            endpoint=self.endpoint,
            path_style_access=True,
            access_key=Secret(self.identity),
            secret_key=Secret(self.credential),
        )

    def make_bucket(self, name: str) -> str:
        """Create bucket `name` (a folder of the filesystem backend); returns `s3a://name`."""
        (self.folder / "data" / name).mkdir(parents=True, exist_ok=True)
        return f"s3a://{name}"

    def start(self, timeout: float = 60.0) -> LocalS3Server:
        jars = s3proxy_jars()
        if not any(jars.glob("s3proxy-*.jar")):
            raise ConfigError(
                f"no S3Proxy in {jars}: a checkout's dev/setup.sh fetches it once; "
                "or set TIDELAKE_S3PROXY to a folder of its jars"
            )
        (self.folder / "data").mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        properties = self.folder / "s3proxy.properties"
        properties.write_text(
            f"s3proxy.endpoint={self.endpoint}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={self.identity}\n"
            f"s3proxy.credential={self.credential}\n"
            "jclouds.provider=filesystem\n"
            f"jclouds.filesystem.basedir={self.folder / 'data'}\n"
        )
        log = self.folder / "s3proxy.log"
        command = ["java", "-Xmx256m", "-DLOG_LEVEL=warn", "-cp", f"{jars}/*", "org.gaul.s3proxy.Main"]
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [*command, "--properties", str(properties)], stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"S3Proxy exited with {self.process.returncode}; log {log}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"S3Proxy does not listen on {self.endpoint} after {timeout}s; log {log}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> LocalS3Server:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
