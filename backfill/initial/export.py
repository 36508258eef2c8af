"""A Dumpling export as the first version of a job's tables (pure: text in, schemas and typed rows out).

Dumpling's CSV (`--filetype csv`, pingcap/tidb `dumpling/export/sql_type.go`, `writer_util.go`): one
record per row in the table's column order, fields between `--csv-separator` (`,`), strings, dates and
binary enclosed in `--csv-delimiter` (`"`), numbers bare, NULL as the bare `--csv-null-value` (`\\N`), a
header of the column names unless `--no-header`, lines ending in `\\r\\n`. Inside an enclosed field a
backslash escapes the next byte (`\\0` NUL, `\\n` LF, `\\r` CR, `\\t` TAB, `\\Z` 0x1A, anything else
itself), or with `--csv-backslash-escape=false` the delimiter is doubled. Binary values are written as
their raw bytes; every other text is UTF-8. TIMESTAMP values are UTC (Dumpling sets `time_zone = '+00:00'`).
"""

from __future__ import annotations

import re

import cramjam
import pyarrow as pa

from backfill.codec import ColumnKind, DecodeStats, TableSchema
from backfill.codec.ddl_text import DdlTextError, create_table_info
from backfill.codec.errors import CodecError
from backfill.sources.ticdc.change_rows import ParsedRows, to_arrow
from backfill.sources.ticdc.open_schema import fake_table_id
from backfill.sources.ticdc.text_values import TextDialect
from tidelake.config import InitialLoadConfig
from tidelake.errors import InputError

_ESCAPES = {ord("0"): b"\x00", ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("Z"): b"\x1a"}
_DECOMPRESS = {
    "gz": cramjam.gzip.decompress,
    "zst": cramjam.zstd.decompress,
    "snappy": cramjam.snappy.decompress,
}
DIALECT = TextDialect("latin1", False, "UTC")  # raw bytes (read as one Latin-1 character each), UTC


def table_schema(sql: str, db: str, table: str, where: str) -> TableSchema:
    """The table's schema from its `<db>.<table>-schema.sql` (the DDL-text parser; the table id is the
    one the TiCDC sources give a table known by name, so their later changes find it)."""
    body = "\n".join(line for line in sql.splitlines() if not line.startswith("/*!") or "CREATE" in line)
    try:
        named_db, named, info = create_table_info(body, table_id=fake_table_id(db, table), default_schema=db)
        schema = TableSchema.from_table_info(info, schema_name=named_db or db)
    except (DdlTextError, CodecError) as exc:
        raise InputError(f"{where}: the CREATE TABLE cannot be read: {exc}") from None
    if (named_db or db, named) != (db, table):
        raise InputError(f"{where}: the file creates {named_db or db}.{named}, its name says {db}.{table}")
    return schema


def decompressed(content: bytes, codec: str | None, where: str) -> bytes:
    """A data file's bytes, its compression (from its name) undone."""
    if codec is None:
        return content
    if codec not in _DECOMPRESS:
        raise InputError(f"{where}: unknown compression {codec!r}; known: {', '.join(sorted(_DECOMPRESS))}")
    try:
        return bytes(_DECOMPRESS[codec](content))
    except cramjam.DecompressionError as exc:
        raise InputError(f"{where}: {codec} data does not decompress: {exc}") from None


def parse_csv(content: bytes, schema: TableSchema, dialect: InitialLoadConfig, where: str) -> ParsedRows:
    """The rows of one CSV data file (written with `dialect`'s CSV options), texts per column (None for
    NULL); a cut line, a record with the wrong number of fields or an unknown header raise InputError
    naming `where`:line."""
    names = [c.name for c in schema.columns]
    binary = [c.kind in (ColumnKind.BINARY,) for c in schema.columns]
    rows = ParsedRows.for_columns(len(names))
    for line, fields in _records(content, dialect, where):
        if line == 1 and dialect.header:
            header = [f.decode("utf-8", "replace") if f is not None else "" for f in fields]
            if header != names:
                raise InputError(
                    f"{where}:1: header {header} is not the table's columns {names} (an export "
                    "taken with --no-header: header = false in [source.initial])"
                )
            continue
        if len(fields) != len(names):
            raise InputError(f"{where}:{line}: {len(fields)} fields, the table has {len(names)} columns")
        rows.ops.append("PUT")
        rows.lines.append(line)
        for i, value in enumerate(fields):
            if value is None:
                rows.values[i].append(None)
            elif binary[i]:
                rows.values[i].append(value.decode("latin-1"))
            else:
                try:
                    rows.values[i].append(value.decode("utf-8"))
                except UnicodeDecodeError:
                    raise InputError(f"{where}:{line}: column {names[i]!r} is not UTF-8 text") from None
    return rows


def typed_rows(rows: ParsedRows, schema: TableSchema, tso: int, where: str, stats: DecodeStats) -> pa.Table:
    """The rows typed as the Delta table's columns (the one type map), `_tidb_commit_ts` the TSO."""
    rows.commit_ts = [tso] * len(rows.ops)
    table = to_arrow(schema, rows, DIALECT, where=where, stats=stats)
    return table.drop_columns(["_tidb_op", "_tidb_line"])


def _records(content: bytes, dialect: InitialLoadConfig, where: str) -> list[tuple[int, list[bytes | None]]]:
    """(line number, fields) of every record; a bare null value is None."""
    sep = re.escape(dialect.csv_separator.encode())
    quote = dialect.csv_delimiter.encode()
    q = re.escape(quote)
    inner = (
        (rb"(?:[^\\" + q + rb"]|\\.)*")
        if dialect.csv_backslash_escape
        else (rb"(?:[^" + q + rb"]|" + q + q + rb")*")
    )
    enclosed = re.compile(q + rb"(" + inner + rb")" + q, re.S) if quote else None
    bare = re.compile(rb"[^\r\n]*?(?=" + sep + rb"|\r?\n|$)")
    after = re.compile(sep + rb"|\r?\n")
    null = dialect.csv_null_value.encode()
    records: list[tuple[int, list[bytes | None]]] = []
    pos, line, n = 0, 1, len(content)
    while pos < n:
        start_line = line
        fields: list[bytes | None] = []
        while True:
            if enclosed is not None and content.startswith(quote, pos):
                match = enclosed.match(content, pos)
                if match is None:
                    raise InputError(
                        f"{where}:{line}: a quoted field is not closed (a cut or malformed line)"
                    )
                line += match.group(1).count(b"\n")
                fields.append(_unescape(match.group(1), dialect))
            else:
                match = bare.match(content, pos)
                assert match is not None  # matches the empty string at least
                fields.append(None if match.group(0) == null else match.group(0))
            pos = match.end()
            ended = after.match(content, pos)
            if ended is None:
                if pos >= n:
                    raise InputError(f"{where}:{line}: the last line has no line end (a cut file)")
                raise InputError(f"{where}:{line}: unexpected text after a quoted field")
            pos = ended.end()
            if ended.group(0).endswith(b"\n"):
                line += 1
                break
        records.append((start_line, fields))
    return records


def _unescape(raw: bytes, dialect: InitialLoadConfig) -> bytes:
    if not dialect.csv_backslash_escape:
        doubled = dialect.csv_delimiter.encode()
        return raw.replace(doubled * 2, doubled)
    if b"\\" not in raw:
        return raw
    return re.sub(rb"\\(.)", lambda m: _ESCAPES.get(m.group(1)[0], m.group(1)), raw, flags=re.S)
