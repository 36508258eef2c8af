"""One storage-sink data file to typed row changes (pure; run on the executors by `source`)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from backfill.codec import ColumnKind, DecodeStats, TableSchema
from backfill.sources.ticdc.canal_json import enum_set_elements, parse_canal_json
from backfill.sources.ticdc.change_rows import to_arrow
from backfill.sources.ticdc.csv_format import CsvOptions, parse_csv
from backfill.sources.ticdc.open_schema import with_elems
from backfill.sources.ticdc.text_values import TextDialect


@dataclass(frozen=True)
class FileFormat:
    """How the sink wrote its files: the protocol and its options."""

    protocol: str  # csv | canal-json
    terminator: str
    csv: CsvOptions | None = None
    time_zone: str = "UTC"

    @property
    def dialect(self) -> TextDialect:
        if self.protocol == "csv":
            assert self.csv is not None
            return TextDialect(self.csv.binary_encoding, False, self.time_zone)
        return TextDialect("latin1", True, self.time_zone)


def complete_part(content: bytes, terminator: str) -> bytes:
    """The bytes up to the last terminator: a file still being appended to ends in a partial line."""
    end = b"\n" if terminator in ("\n", "\r\n") else terminator.encode("utf-8")
    if content.endswith(end):
        return content
    cut = content.rfind(end)
    return content[: cut + len(end)] if cut >= 0 else b""


def decode_file(
    content: bytes,
    where: str,
    fmt: FileFormat,
    schema: TableSchema,
    *,
    ordinal: int,
    newest: bool,
    window: tuple[int, int],
    stats: DecodeStats | None = None,
) -> pa.Table:
    """The file's changes with ``window[0] < commit ts <= window[1]``, typed by ``schema``."""
    if newest:
        content = complete_part(content, fmt.terminator)
    names: list[str] = [c.name for c in schema.columns]
    keys = [k for k in schema.pk_columns if k in schema.by_name]
    if fmt.protocol == "csv":
        assert fmt.csv is not None
        rows = parse_csv(content, fmt.csv, names, where, keyless=schema.pk_kind == "rowid" and not keys)
    else:
        schema = _with_elements(schema, content, fmt.terminator)
        rows = parse_canal_json(content, fmt.terminator, names, keys, where)
    rows = rows.within(*window)
    return to_arrow(schema, rows, fmt.dialect, where=where, file_ordinal=ordinal, stats=stats)


def _with_elements(schema: TableSchema, content: bytes, terminator: str) -> TableSchema:
    """``schema`` with the ENUM/SET element names canal-json's ``mysqlType`` gives, where the schema file
    had none (tiflow's schema files do not carry them): numbers then map to names."""
    missing = [c.name for c in schema.columns if c.kind in (ColumnKind.ENUM, ColumnKind.SET) and not c.elems]
    if not missing:
        return schema
    elements = {k: v for k, v in enum_set_elements(content, terminator).items() if k in missing}
    if not elements:
        return schema
    return TableSchema.from_table_info(
        with_elems(schema.table_info, elements), schema_name=schema.schema_name
    )


__all__ = ["FileFormat", "complete_part", "decode_file"]
