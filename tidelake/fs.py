"""Small file-system calls over Hadoop's FileSystem, so every path may be file://, s3a://, hdfs:// or local.

Only listings and small metadata files (manifests, JSON lines) go through here; bulk data is read by Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelake.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class FileStatus:
    path: str
    name: str
    is_dir: bool
    size: int


def jvm_class(spark: SparkSession, name: str) -> Any:
    """The JVM class `name` (fully qualified), with no round trip: py4j's `jvm.a.b.C` asks the JVM about
    `a`, `a.b`, ... in turn, and each package name is a failed class lookup under every import, through
    every jar on the class path (a few ms a call, several calls per table of a run). py4j is untyped."""
    from py4j.java_gateway import JavaClass

    gateway = spark.sparkContext._gateway
    if spark._jvm is None or gateway is None:
        raise RuntimeError("the SparkSession is stopped: it has no JVM")
    return JavaClass(name, gateway._gateway_client)


def _path(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    path = jvm_class(spark, "org.apache.hadoop.fs.Path")(uri)
    return path.getFileSystem(spark._jsc.hadoopConfiguration()), path


def qualify(spark: SparkSession, uri: str) -> str:
    """The fully qualified URI of a path (a relative local path becomes file:/abs/path)."""
    fs, path = _path(spark, uri)
    return str(fs.makeQualified(path).toString())


def exists(spark: SparkSession, uri: str) -> bool:
    fs, path = _path(spark, uri)
    return bool(fs.exists(path))


def list_dir(spark: SparkSession, uri: str) -> list[FileStatus]:
    """Entries of a folder, sorted by name; an absent folder lists as empty."""
    fs, path = _path(spark, uri)
    if not fs.exists(path):
        return []
    entries = [
        FileStatus(
            str(s.getPath().toString()), str(s.getPath().getName()), bool(s.isDirectory()), int(s.getLen())
        )
        for s in fs.listStatus(path)
    ]
    return sorted(entries, key=lambda e: e.name)


def read_text(spark: SparkSession, uri: str) -> str:
    fs, path = _path(spark, uri)
    stream = fs.open(path)
    try:
        data = jvm_class(spark, "org.apache.commons.io.IOUtils").toByteArray(stream)
    finally:
        stream.close()
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{uri}: not UTF-8 text: {exc}") from None


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def delete(spark: SparkSession, uri: str) -> bool:
    """Remove a file or folder tree; False if it was not there."""
    fs, path = _path(spark, uri)
    return bool(fs.delete(path, True)) if fs.exists(path) else False


def upload(spark: SparkSession, local_dir: str, uri: str) -> None:
    """Copy a local folder tree to `uri` (any Hadoop file system) through that file system's own API.

    Hadoop's generic stream copy, not S3A's copyFromLocalFile (which fails to relativize some local paths).
    """
    conf = spark._jsc.hadoopConfiguration()
    source = jvm_class(spark, "org.apache.hadoop.fs.Path")(qualify(spark, local_dir))
    target_fs, target = _path(spark, uri)
    jvm_class(spark, "org.apache.hadoop.fs.FileUtil").copy(
        source.getFileSystem(conf), source, target_fs, target, False, True, conf
    )


def list_files(spark: SparkSession, uri: str) -> list[FileStatus]:
    """Every file under a folder, recursively (one listing call per folder on object stores); an absent
    folder lists as empty."""
    fs, path = _path(spark, uri)
    if not fs.exists(path):
        return []
    found = []
    files = fs.listFiles(path, True)
    while files.hasNext():
        s = files.next()
        found.append(
            FileStatus(str(s.getPath().toString()), str(s.getPath().getName()), False, int(s.getLen()))
        )
    return found
