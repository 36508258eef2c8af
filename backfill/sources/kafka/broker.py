"""The brokers, as the driver and Spark's Kafka batch source see them.

The driver asks for a topic's partitions and their earliest/latest offsets through the Kafka client that
Spark's Kafka source ships (a JVM `KafkaConsumer` over Py4J: no second client library); the records of
planned offset ranges are read by Spark's batch source (`spark.read.format("kafka")`, no streaming query),
split into at least `minPartitions` offset ranges so a hot partition uses every executor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelake.errors import InputError, TidelakeError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from backfill.sources.kafka.settings import KafkaSourceConfig

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PartitionOffsets:
    """What the brokers hold of one partition: offsets `earliest` (retention) up to `latest` (exclusive)."""

    earliest: int
    latest: int


def _client_properties(spark: SparkSession, config: KafkaSourceConfig) -> object:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    props = jvm.java.util.Properties()
    timeout_ms = str(config.timeout_seconds * 1000)
    settings = {
        **config.options,
        "bootstrap.servers": config.bootstrap_servers,
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "enable.auto.commit": "false",
        "request.timeout.ms": timeout_ms,
        "default.api.timeout.ms": timeout_ms,
    }
    for name, value in settings.items():
        props.setProperty(name, value)
    return props


def list_offsets(spark: SparkSession, config: KafkaSourceConfig) -> dict[TopicPartition, PartitionOffsets]:
    """Every partition of the configured topic (or of the topics matching the pattern) with its offsets.

    An unreachable broker, a missing topic or a refused request is an InputError naming the brokers."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    where = f"Kafka at {config.bootstrap_servers}"
    leaderless: list[str] = []  # partitions whose leader broker is down: named when the offsets time out
    try:
        consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(_client_properties(spark, config))
    except Exception as exc:  # a bad option value: the client refuses its config
        raise InputError(f"{where}: the consumer settings are refused: {_first_line(exc)}") from None
    try:
        timeout = jvm.java.time.Duration.ofSeconds(config.timeout_seconds)
        topics = consumer.listTopics(timeout)
        wanted = matching_topics(list(topics.keySet()), config)
        if not wanted:
            what = config.topic if config.topic is not None else f"matching /{config.topic_pattern}/"
            raise InputError(f"{where}: no topic {what}")
        parts = jvm.java.util.ArrayList()
        for topic in wanted:
            for info in topics.get(topic):
                parts.add(jvm.org.apache.kafka.common.TopicPartition(topic, info.partition()))
                leaderless.extend(_without_leader(topic, info))
        earliest = consumer.beginningOffsets(parts, timeout)
        latest = consumer.endOffsets(parts, timeout)
        return {
            (tp.topic(), tp.partition()): PartitionOffsets(int(earliest.get(tp)), int(latest.get(tp)))
            for tp in parts
        }
    except InputError:
        raise
    except Exception as exc:  # Py4J carries the client's exception: timeouts, refused authentication
        unled = f"; {', '.join(leaderless)}" if leaderless else ""
        raise InputError(f"{where}: cannot read topic metadata: {_first_line(exc)}{unled}") from None
    finally:
        consumer.close()


def _without_leader(topic: str, info: Any) -> list[str]:
    """`["partition t[p] has no leader (replica broker ids 1, 2 unavailable)"]` for a partition (a Kafka
    PartitionInfo) whose leader broker is down (the metadata then has no leader for it), else []."""
    leader = info.leader()
    if leader is not None and not leader.isEmpty():
        return []
    replicas = ", ".join(str(node.id()) for node in info.replicas())
    return [
        f"partition {topic}[{info.partition()}] has no leader (replica broker ids {replicas} unavailable)"
    ]


def matching_topics(topics: list[str], config: KafkaSourceConfig) -> list[str]:
    if config.topic is not None:
        return [config.topic] if config.topic in topics else []
    assert config.topic_pattern is not None
    pattern = re.compile(config.topic_pattern)
    return sorted(t for t in topics if pattern.fullmatch(t) and not t.startswith("__"))


# Kafka client failures in a Spark read's JVM trace: a broker gone, reset or too slow (`timeout_seconds`)
_READ_FAILURES = (
    "org.apache.kafka.common.errors.", "Cannot fetch record for offset", "Failed to get records for",
    "org.apache.spark.sql.kafka010.",
)  # fmt: skip


@contextmanager
def read_failures(config: KafkaSourceConfig) -> Iterator[None]:
    """A Kafka client's failure while Spark reads the records (the broker went away, stopped answering)
    as an InputError naming the brokers: exit 2 with one clear line, not a JVM trace."""
    try:
        yield
    except TidelakeError:
        raise
    except Exception as exc:  # Py4J carries the JVM exception as text
        if not any(marker in str(exc) for marker in _READ_FAILURES):
            raise
        raise InputError(
            f"Kafka at {config.bootstrap_servers}: reading the records failed (are the brokers up and "
            f"reachable within timeout_seconds = {config.timeout_seconds}?): {_first_line(exc)}"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    for line in text.splitlines():
        if "Exception" in line and ":" in line:
            return line.strip(" :")[:300]
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


def read_records(
    spark: SparkSession,
    config: KafkaSourceConfig,
    ranges: Mapping[TopicPartition, tuple[int, int]],
) -> DataFrame:
    """The records of the [start, end) offset ranges (empty ranges left out): key, value, topic,
    partition, offset. Spark fails the read if an offset is gone (`failOnDataLoss`)."""
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for (topic, partition), (start, end) in sorted(ranges.items()):
        if end > start:
            assign.setdefault(topic, []).append(partition)
            starting.setdefault(topic, {})[str(partition)] = start
            ending.setdefault(topic, {})[str(partition)] = end
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", config.bootstrap_servers)
    timeout_ms = str(config.timeout_seconds * 1000)  # else Spark's consumer waits 120 s for a gone broker
    for name in ("kafka.request.timeout.ms", "kafka.default.api.timeout.ms", "kafkaConsumer.pollTimeoutMs"):
        reader = reader.option(name, timeout_ms)
    for name, value in config.options.items():
        reader = reader.option(f"kafka.{name}", value)
    return (
        reader.option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("failOnDataLoss", "true")
        .option("minPartitions", str(max(1, spark.sparkContext.defaultParallelism)))
        .load()
        .select("key", "value", "topic", "partition", "offset")
    )
