"""The tables of a Kafka run without a schema folder: schema versions from the DDL text of the topic.

Each tracked table starts from a known TableInfo valid from some ts (`KnownTable`: the one the table's last
commit recorded, the upstream's `SHOW CREATE TABLE`, or one inferred from its first row event), or from a
CREATE TABLE in the topic. Every later DDL event of it (deduplicated: the open protocol sends a DDL to every
partition) is applied to it from its text (`codec.ddl_text`) and becomes a `SchemaVersion` at the DDL's ts:
a barrier, as with the schema folder. Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backfill.codec import SchemaVersion, TableSchema
from backfill.codec.ddl_text import (
    DdlTextError,
    apply_ddl,
    create_table_info,
    renamed_tables,
    statement_table,
)
from backfill.codec.history import CREATE_TABLE, DROP_SCHEMA, DROP_TABLE, RENAME_TABLE, TRUNCATE_TABLE
from backfill.sources.ticdc.open_schema import fake_table_id
from backfill.tables import TrackedTable, table_matches
from tidelake.errors import InputError

# Partition DDLs that take rows away: which rows, the DDL text alone cannot say.
ROW_REMOVING = frozenset({"DROP PARTITION", "TRUNCATE PARTITION", "EXCHANGE PARTITION"})


@dataclass(frozen=True)
class KnownTable:
    """A table's TableInfo, valid for changes committed after `since` (DDLs at or below it are in it)."""

    schema: str
    table: str
    table_info: Mapping[str, Any]
    since: int


@dataclass(frozen=True)
class DdlEvent:
    ts: int
    schema: str
    table: str
    query: str
    where: str  # topic, partition, offset of its first message
    drops_database: bool = False  # DROP DATABASE `schema`: its tables go as with DROP TABLE


@dataclass
class _Build:
    schema: str
    info: dict[str, Any]
    since: int
    start_ts: int
    versions: list[SchemaVersion] = field(default_factory=list)


def created_tables(ddls: Sequence[DdlEvent]) -> set[tuple[str, str]]:
    """(schema, table) of every CREATE TABLE among the events, lower case."""
    out = set()
    for ddl in ddls:
        created = _created(ddl)
        if created is not None:
            out.add((created[0].lower(), created[1].lower()))
    return out


def rename_targets(ddls: Sequence[DdlEvent]) -> set[tuple[str, str]]:
    """(schema, table) every RENAME among the events renames a table to, lower case."""
    out: set[tuple[str, str]] = set()
    for ddl in ddls:
        try:
            pairs = renamed_tables(ddl.query, ddl.schema)
        except DdlTextError as exc:
            raise InputError(f"{ddl.where}: DDL of {ddl.schema}.{ddl.table}: {exc}") from None
        out.update((new[0].lower(), new[1].lower()) for _, new in pairs)
    return out


def _created(ddl: DdlEvent) -> tuple[str, str] | None:
    try:
        found = statement_table(ddl.query, ddl.schema)
    except DdlTextError as exc:
        raise InputError(f"{ddl.where}: DDL of {ddl.schema}.{ddl.table}: {exc}") from None
    return (found[0] or ddl.schema, found[1]) if found is not None else None


def text_histories(
    known: Sequence[KnownTable], ddls: Sequence[DdlEvent], resolved_ts: int, patterns: Sequence[str]
) -> list[TrackedTable]:
    """Every tracked table's versions up to `resolved_ts`: the known ones, and those the DDLs create."""
    builds: list[_Build] = []
    live: dict[tuple[str, str], _Build] = {}
    for k in known:
        schema = TableSchema.from_table_info(k.table_info, schema_name=k.schema)
        build = _Build(k.schema, dict(k.table_info), k.since, 0, [SchemaVersion(0, schema)])
        builds.append(build)
        live[(k.schema.lower(), k.table.lower())] = build
    seen = set()
    for ddl in sorted(ddls, key=lambda d: d.ts):
        if ddl.ts > resolved_ts or (ddl.ts, ddl.schema, ddl.table, ddl.query) in seen:
            continue
        seen.add((ddl.ts, ddl.schema, ddl.table, ddl.query))
        if ddl.drops_database:
            for key in [k for k in live if k[0] == ddl.schema.lower() and ddl.ts > live[k].since]:
                live.pop(key).versions.append(SchemaVersion(ddl.ts, None, None, DROP_SCHEMA, ddl.query))
            continue
        created = _created(ddl)
        if created is not None:
            key = (created[0].lower(), created[1].lower())
            if not table_matches(patterns, *created) or (key in live and ddl.ts <= live[key].since):
                continue
            try:
                db, _, info = create_table_info(
                    ddl.query, table_id=fake_table_id(*created), default_schema=ddl.schema
                )
            except DdlTextError as exc:
                raise InputError(f"{ddl.where}: DDL of {ddl.schema}.{ddl.table}: {exc}") from None
            schema = TableSchema.from_table_info(info, schema_name=created[0])
            version = SchemaVersion(ddl.ts, schema, None, CREATE_TABLE, ddl.query)
            build = _Build(created[0], info, ddl.ts, ddl.ts, [SchemaVersion(0, None), version])
            builds.append(build)
            live[key] = build
            continue
        _apply(live, ddl)
    return [TrackedTable(tuple(b.versions), b.start_ts) for b in builds]


def _apply(live: dict[tuple[str, str], _Build], ddl: DdlEvent) -> None:
    """One DDL event on the table it concerns: the event's table, or the table a RENAME renames (TiCDC
    names the new one in the event)."""
    try:
        pairs = renamed_tables(ddl.query, ddl.schema)
    except DdlTextError as exc:
        raise InputError(f"{ddl.where}: DDL of {ddl.schema}.{ddl.table}: {exc}") from None
    targets = [(ddl.schema, ddl.table)]
    if pairs:
        event = (ddl.schema.lower(), ddl.table.lower())
        matching = [old for old, new in pairs if (new[0].lower(), new[1].lower()) == event]
        targets = matching or [old for old, _ in pairs]
    for db, name in targets:
        key = (db.lower(), name.lower())
        build = live.get(key)
        if build is None or ddl.ts <= build.since:
            continue  # a table the job does not track, or a DDL its known schema holds already
        try:
            effect = apply_ddl(build.info, ddl.query, schema=build.schema)
        except DdlTextError as exc:
            raise InputError(f"{ddl.where}: DDL of {db}.{name} at ts {ddl.ts}: {exc}") from None
        if effect.kind == "partition" and effect.verb in ROW_REMOVING:
            raise InputError(
                f"{ddl.where}: DDL of {db}.{name} at ts {ddl.ts} ({ddl.query!r}) removes the rows of "
                "partitions, which its text cannot identify; configure [source.kafka] schema, or apply it to "
                "the Delta table by hand and restart from a checkpoint after it"
            )
        if effect.kind in ("none", "partition"):
            continue
        if effect.kind == "drop" or effect.table_info is None:
            build.versions.append(SchemaVersion(ddl.ts, None, None, DROP_TABLE, ddl.query))
            del live[key]
            continue
        info = effect.table_info
        job_type = None
        if effect.kind == "truncate":
            info = dict(info, id=fake_table_id(build.schema, f"{name}#{ddl.ts}"))
            job_type = TRUNCATE_TABLE
        elif effect.kind == "rename":
            del live[key]
            build.schema = effect.schema or build.schema
            live[(build.schema.lower(), str(effect.table).lower())] = build
            job_type = RENAME_TABLE
        build.info = info
        schema = TableSchema.from_table_info(info, schema_name=build.schema)
        build.versions.append(SchemaVersion(ddl.ts, schema, None, job_type, ddl.query))


def schemas_at(tables: Sequence[TrackedTable], ts: int) -> dict[str, Any]:
    """`db.table` -> TableInfo in force at `ts`, for the commit metadata (the next run starts from it)."""
    out: dict[str, Any] = {}
    for table in tables:
        schema = table.schema_at(ts)
        if schema is not None:
            out[f"{schema.schema_name}.{schema.name}"] = dict(schema.table_info)
    return out


__all__ = ["DdlEvent", "KnownTable", "created_tables", "rename_targets", "schemas_at", "text_histories"]
