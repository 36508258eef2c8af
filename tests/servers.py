"""Real servers for the test suite: a throwaway MariaDB and a Spark standalone master + worker.

Each starts from the installed packages on 127.0.0.1, in a temporary folder, and is stopped by whoever
started it. Nothing here is mocked.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"server exited with {process.returncode}; log {log}:\n{log.read_text()[-3000:]}"
            )
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s; log {log}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class MariaDBServer:
    """`mariadbd` on a free port with its own data folder; root has no password, `tidelake` has one."""

    base: Path
    port: int = field(default_factory=free_port)
    password: str = "tidelake-test-pw"
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/"

    def start(self) -> MariaDBServer:
        server = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        install = shutil.which("mariadb-install-db")
        if not os.path.exists(server) or install is None:
            raise RuntimeError(
                "MariaDB is not installed: run `apt-get install mariadb-server` (.ci/run does)"
            )
        data = self.base / "data"
        log = self.base / "server.log"
        subprocess.run(
            [install, "--no-defaults", f"--datadir={data}", "--user=root",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            check=True, capture_output=True,
        )  # fmt: skip
        self.process = subprocess.Popen(
            [server, "--no-defaults", f"--datadir={data}", "--user=root", f"--port={self.port}",
             "--bind-address=127.0.0.1", f"--socket={self.base / 'mysqld.sock'}", "--skip-log-bin",
             "--innodb-buffer-pool-size=256M", "--max-connections=200", "--character-set-server=utf8mb4",
             "--collation-server=utf8mb4_bin", "--default-time-zone=+00:00"],
            stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for_port(self.port, 60, self.process, log)
        self._create_user()
        return self

    def _create_user(self) -> None:
        import pymysql

        for _ in range(50):
            try:
                conn = pymysql.connect(host="127.0.0.1", port=self.port, user="root")
                break
            except pymysql.err.OperationalError:
                time.sleep(0.2)
        with conn, conn.cursor() as cur:
            cur.execute("CREATE USER IF NOT EXISTS 'tidelake'@'%%' IDENTIFIED BY %s", (self.password,))
            cur.execute("GRANT ALL ON *.* TO 'tidelake'@'%'")

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)


@dataclass
class SparkStandalone:
    """A Spark standalone master and one worker, started from the pyspark install with `spark-class`."""

    base: Path
    worker_cores: int = 1
    worker_memory: str = "1g"
    master_port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @staticmethod
    def spark_home() -> Path:
        import pyspark

        return Path(pyspark.__file__).parent

    def _launch(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(self.spark_home())}
        log = self.base / f"{name}.log"
        cmd = [str(self.spark_home() / "bin" / "spark-class"), *args]
        process = subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def start(self) -> SparkStandalone:
        master = self._launch(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.master_port), "--webui-port", str(free_port()),
        )  # fmt: skip
        wait_for_port(self.master_port, 90, master, self.base / "master.log")
        self._launch(
            "worker", "org.apache.spark.deploy.worker.Worker", self.master_url,
            "--host", "127.0.0.1", "--cores", str(self.worker_cores), "--memory", self.worker_memory,
            "--webui-port", str(free_port()), "--work-dir", str(self.base / "work"),
        )  # fmt: skip
        self._wait_for_worker()
        return self

    def _wait_for_worker(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        log = self.base / "master.log"
        while time.monotonic() < deadline:
            if "Registering worker" in log.read_text(errors="replace"):
                return
            for p in self.processes:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {p.returncode}; logs in {self.base}")
            time.sleep(0.3)
        raise RuntimeError(f"no worker registered with {self.master_url} in {timeout}s; logs in {self.base}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop(process)


def kafka_home() -> Path:
    """Folder of the Kafka broker jars that `dev/setup.sh --test` caches (override with TIDELAKE_KAFKA)."""
    from tidelake.jars import cache_folder

    return Path(os.environ.get("TIDELAKE_KAFKA", cache_folder("kafka")))


CLUSTER_ID = "dGlkZWxha2UtdGVzdHMtMQ"  # any 16 bytes, base64 without padding


@dataclass
class KafkaBroker:
    """One Apache Kafka broker in KRaft mode (broker and controller in one JVM) on 127.0.0.1, its log
    folder formatted in `base` (a folder formatted before keeps its topics: the benchmarks reuse theirs);
    topics are created by the tests, never automatically. `advertised_port`: the port clients are told
    to reach it at (a fault proxy's, tests/toxiproxy.py), when not its own."""

    base: Path
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    advertised_port: int | None = None
    process: subprocess.Popen[bytes] | None = None
    node_id: int = 1
    voters: str | None = None  # controller.quorum.voters of a cluster (`KafkaCluster`); else itself only
    replication: int = 1  # of Kafka's own topics (offsets, transactions)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> KafkaBroker:
        self.launch()
        self.wait()
        return self

    def launch(self) -> None:
        """Start the JVM (a cluster's first broker opens its listener only once a quorum is up: `wait`)."""
        home = kafka_home()
        if not any(home.glob("kafka_2.13-*.jar")):
            raise RuntimeError(f"no Kafka broker in {home}: run `dev/setup.sh --test` (it caches one)")
        props = self.base / "server.properties"
        props.write_text(
            "\n".join([
                "process.roles=broker,controller",
                f"node.id={self.node_id}",
                f"controller.quorum.voters={self.voters or f'{self.node_id}@127.0.0.1:{self.controller_port}'}",
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.advertised_port or self.port}",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name=PLAINTEXT",
                f"log.dirs={self.base / 'logs'}",
                "num.partitions=1",
                "auto.create.topics.enable=false",
                f"offsets.topic.replication.factor={self.replication}",
                f"transaction.state.log.replication.factor={self.replication}",
                "transaction.state.log.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "log.retention.check.interval.ms=1000",
                "log.segment.delete.delay.ms=0",
                "",
            ])
        )  # fmt: skip
        java = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-cp", f"{home}/*"]
        subprocess.run(
            [*java, "kafka.tools.StorageTool", "format", "--ignore-formatted", "-t", CLUSTER_ID, "-c", str(props)],
            check=True, capture_output=True,
        )  # fmt: skip
        log = self.base / "broker.log"
        self.process = subprocess.Popen(
            [*java, f"-Dkafka.logs.dir={self.base}", "kafka.Kafka", str(props)],
            stdout=log.open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip

    def wait(self, timeout: float = 120) -> None:
        assert self.process is not None
        wait_for_port(self.port, timeout, self.process, self.base / "broker.log")

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)


@dataclass
class KafkaCluster:
    """`size` KRaft brokers, each also a controller of one quorum, on 127.0.0.1: a partition's leader can
    be stopped while the others serve (Kafka's own topics replicated to all of them)."""

    base: Path
    size: int = 3
    brokers: list[KafkaBroker] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> KafkaCluster:
        controllers = [free_port() for _ in range(self.size)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(controllers))
        for i, port in enumerate(controllers):
            folder = self.base / f"broker-{i + 1}"
            folder.mkdir(parents=True, exist_ok=True)
            self.brokers.append(
                KafkaBroker(folder, controller_port=port, node_id=i + 1, voters=voters, replication=self.size)
            )
        for broker in self.brokers:
            broker.launch()
        for broker in self.brokers:
            broker.wait()
        return self

    def broker(self, node_id: int) -> KafkaBroker:
        return self.brokers[node_id - 1]

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()


def derby_jars() -> Path:
    """Folder of Derby's network server and client jars that `dev/setup.sh --test` caches."""
    from tidelake.jars import cache_folder

    return Path(os.environ.get("TIDELAKE_DERBY", cache_folder("derby")))


@dataclass
class DerbyNetworkServer:
    """Apache Derby's network server on 127.0.0.1 (its databases in `base`): a metastore database that is
    reached over TCP (`jdbc:derby://host:port/name`), so a fault proxy can stand between it and a run."""

    base: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> DerbyNetworkServer:
        folder = derby_jars()
        if not any(folder.glob("derbynet-*.jar")):
            raise RuntimeError(
                f"no Derby network server in {folder}: run `dev/setup.sh --test` (it caches one)"
            )
        log = self.base / "derby.log"
        self.process = subprocess.Popen(
            ["java", "-Xmx256m", f"-Dderby.system.home={self.base}", "-cp", f"{folder}/*",
             "org.apache.derby.drda.NetworkServerControl", "start", "-h", "127.0.0.1", "-p", str(self.port),
             "-noSecurityManager"],
            stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for_port(self.port, 60, self.process, log)
        return self

    def client_jar(self) -> Path:
        return next(derby_jars().glob("derbyclient-*.jar"))

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
