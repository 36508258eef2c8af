"""Where a Kafka run starts and what it may apply: offsets recorded in the Delta commits, per-partition
watermarks, the global resolved ts. Pure logic; the source feeds it what the brokers and tables say.

Each table's commit records, under `kafka` (`RunRecord`): the offsets the run read from, the offsets the
next run must read from (per partition the first message holding a change above the run's resolved ts,
so rows read but not yet complete are read again), the partitions' watermarks (the last resolved event
seen), the run's tables and checkpoint. A table whose last commit is not at its run's resolved ts (a run
killed between tables) or a table of a run that has no Delta table yet sends the next run back to that
run's start offsets: nothing is lost, and the tables' floors drop what is already in them. A run lists
only the tables that exist at its resolved ts (a dropped table is never waited for).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from backfill.sources.kafka.broker import PartitionOffsets, TopicPartition
from tidelake.errors import InputError

KEY = "kafka"


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(doc: Any) -> dict[TopicPartition, int]:
    if not isinstance(doc, Mapping):
        return {}
    return {(topic, int(p)): int(o) for topic, parts in doc.items() for p, o in dict(parts).items()}


@dataclass(frozen=True)
class RunRecord:
    """What one run records in every table it commits (the `kafka` entry of the commit metadata)."""

    from_offsets: Mapping[TopicPartition, int]
    next_offsets: Mapping[TopicPartition, int]
    watermarks: Mapping[TopicPartition, int]
    tables: tuple[str, ...]  # db.table of every table of the run
    run_checkpoint_ts: int
    run_resolved_ts: int
    schemas: Mapping[str, Any] = field(default_factory=dict)  # db.table -> inferred TableInfo
    # where the run's read ended: every message from there on comes after the resolved events that gave
    # `watermarks`, so a change in it at or below them is a re-send (empty in records of older versions)
    read_ends: Mapping[TopicPartition, int] = field(default_factory=dict)
    # per partition: the re-sent changes the job skipped so far, up to `read_ends` (each counted once)
    resent_skipped: Mapping[TopicPartition, int] = field(default_factory=dict)
    # db.table of the tables whose rows have no `_tidb_rowid` (loaded from a snapshot): merged by their
    # primary key or whole rows in every run, whatever row ids the messages carry
    without_rowid: tuple[str, ...] = ()

    def to_metadata(self) -> dict[str, Any]:
        return {
            KEY: {
                "from_offsets": offsets_to_json(self.from_offsets),
                "next_offsets": offsets_to_json(self.next_offsets),
                "watermarks": offsets_to_json(self.watermarks),
                "tables": list(self.tables),
                "run_checkpoint_ts": self.run_checkpoint_ts,
                "run_resolved_ts": self.run_resolved_ts,
                "schemas": dict(self.schemas),
                "read_ends": offsets_to_json(self.read_ends),
                "resent_skipped": offsets_to_json(self.resent_skipped),
                "without_rowid": list(self.without_rowid),
            }
        }

    @staticmethod
    def from_metadata(metadata: Mapping[str, Any] | None) -> RunRecord | None:
        doc = (metadata or {}).get(KEY)
        if not isinstance(doc, Mapping):
            return None
        return RunRecord(
            offsets_from_json(doc.get("from_offsets")),
            offsets_from_json(doc.get("next_offsets")),
            offsets_from_json(doc.get("watermarks")),
            tuple(doc.get("tables") or ()),
            int(doc.get("run_checkpoint_ts") or 0),
            int(doc.get("run_resolved_ts") or 0),
            dict(doc.get("schemas") or {}),
            offsets_from_json(doc.get("read_ends")),
            offsets_from_json(doc.get("resent_skipped")),
            tuple(doc.get("without_rowid") or ()),
        )


@dataclass(frozen=True)
class TableRecord:
    """One existing Delta table of the job: its name, recorded version (checkpoint), last run's record."""

    label: str
    version: int | None
    record: RunRecord | None
    # the TableInfo its snapshot commit records, when that is its last commit (`[source.initial]`): the
    # table's schema at the snapshot's TSO (`version`), which no message of the topic carries
    snapshot_info: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Start:
    """Where this run reads from, and the watermarks already known below those offsets."""

    offsets: dict[TopicPartition, int]
    watermarks: dict[TopicPartition, int]
    checkpoint_ts: int  # the lowest table checkpoint: a table new to the job starts here
    # per partition (offset, ts): from that offset on, a change at or below ts is a re-send (`RunRecord`)
    sent: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    # per partition: re-sent changes skipped before the offset of `sent` (`RunRecord.resent_skipped`)
    skipped: dict[TopicPartition, int] = field(default_factory=dict)


_Candidate = tuple[Mapping[TopicPartition, int], Mapping[TopicPartition, int]]  # (offsets, watermarks)


def _run_unfinished(record: RunRecord, by_label: Mapping[str, TableRecord]) -> bool:
    """Whether a table of that run has no Delta table or missed its commit at the run's resolved ts."""
    return any(
        (other := by_label.get(label)) is None or (other.version or 0) < record.run_resolved_ts
        for label in record.tables
    )


def _candidates(tables: list[TableRecord]) -> tuple[list[_Candidate], list[int]]:
    """Per table the offsets (and watermarks) it still needs, plus its run's start when that run is read
    again; and the checkpoints the run starts from."""
    by_label = {t.label: t for t in tables}
    candidates: list[_Candidate] = []
    checkpoints = [t.version for t in tables if t.record is not None and t.version is not None]
    for t in tables:
        r = t.record
        if r is None:
            continue
        complete = t.version is not None and t.version >= r.run_resolved_ts
        candidates.append((r.next_offsets if complete else r.from_offsets, r.watermarks))
        if not complete or _run_unfinished(r, by_label):  # a table of that run missed its commit: read again
            candidates.append((r.from_offsets, r.watermarks))
            checkpoints.append(r.run_checkpoint_ts)
    return candidates, checkpoints


def _resent_from(
    tables: list[TableRecord], partitions: Mapping[TopicPartition, PartitionOffsets]
) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, int]]:
    """Per partition the furthest recorded read end with its watermark (from there, a change at or
    below it is a re-send), and the re-sent changes skipped before it (`Start.sent`, `Start.skipped`)."""
    sent: dict[TopicPartition, tuple[int, int]] = {}
    skipped: dict[TopicPartition, int] = {}
    for t in tables:
        r = t.record
        if r is None:
            continue
        for tp, end in r.read_ends.items():
            mark = r.watermarks.get(tp)
            if tp in partitions and mark and end > sent.get(tp, (-1, 0))[0]:
                sent[tp] = (end, mark)
                skipped[tp] = r.resent_skipped.get(tp, 0)
    return sent, skipped


def run_start(tables: Iterable[TableRecord], partitions: Mapping[TopicPartition, PartitionOffsets]) -> Start:
    """The offsets to read from: per partition the lowest any table still needs (a partition no record
    names, added since, starts at 0; a job's first run starts at the earliest offsets kept)."""
    tables = list(tables)
    candidates, checkpoints = _candidates(tables)
    if not candidates:
        return Start({tp: p.earliest for tp, p in partitions.items()}, {}, 0)
    offsets = {tp: min(c.get(tp, 0) for c, _ in candidates) for tp in partitions}
    watermarks = {tp: min(w.get(tp, 0) for _, w in candidates) for tp in partitions}
    sent, skipped = _resent_from(tables, partitions)
    watermarks = {tp: w for tp, w in watermarks.items() if w}
    return Start(
        offsets, watermarks, min(checkpoints, default=0), sent, {tp: n for tp, n in skipped.items() if n}
    )


def check_offsets(
    start: Mapping[TopicPartition, int], partitions: Mapping[TopicPartition, PartitionOffsets]
) -> None:
    """Data loss never passes silently: offsets the run needs that the brokers no longer keep (retention)
    or a partition shorter than what was read already (a re-created topic) are an InputError."""
    for (topic, partition), offset in sorted(start.items()):
        kept = partitions[(topic, partition)]
        if offset < kept.earliest:
            raise InputError(
                f"Kafka topic {topic!r} partition {partition}: offsets {offset}..{kept.earliest - 1} are "
                f"needed but already deleted (retention keeps {kept.earliest}..{kept.latest - 1}); those "
                "changes are lost: rebuild the tables from a snapshot"
            )
        if offset > kept.latest:
            raise InputError(
                f"Kafka topic {topic!r} partition {partition}: the job read up to offset {offset} but the "
                f"partition ends at {kept.latest} (was the topic re-created?)"
            )


@dataclass(frozen=True)
class Completeness:
    resolved_ts: int  # min over partitions of their watermark (0: some partition has none)
    holding: TopicPartition | None  # the partition with the lowest watermark


def completeness(
    partitions: Iterable[TopicPartition],
    known: Mapping[TopicPartition, int],
    seen: Mapping[TopicPartition, int],
) -> tuple[dict[TopicPartition, int], Completeness]:
    """Per-partition watermarks (the highest of what earlier runs recorded and the resolved events read
    now) and the global resolved ts: their minimum over every partition of the topic."""
    watermarks = {tp: max(known.get(tp, 0), seen.get(tp, 0)) for tp in partitions}
    if not watermarks:
        return watermarks, Completeness(0, None)
    holding = min(sorted(watermarks), key=lambda tp: watermarks[tp])
    return watermarks, Completeness(watermarks[holding], holding)


def next_offsets(
    ends: Mapping[TopicPartition, int], first_above: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Per partition where the next run reads from: the first message holding a change above the resolved
    ts, else the end of what this run read."""
    return {tp: min(end, first_above.get(tp, end)) for tp, end in ends.items()}
