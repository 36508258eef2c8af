"""A Dumpling export as the first version of a job's tables (pure: text in, schemas and typed rows out).

Dumpling's CSV (`--filetype csv`, pingcap/tidb `dumpling/export/sql_type.go`, `writer_util.go`): one
record per row in the table's column order, fields between `--csv-separator` (`,`), strings, dates and
binary enclosed in `--csv-delimiter` (`"`), numbers bare, NULL as the bare `--csv-null-value` (`\\N`), a
header of the column names unless `--no-header`, lines ending in `\\r\\n`. Inside an enclosed field a
backslash escapes the next byte (`\\0` NUL, `\\n` LF, `\\r` CR, `\\t` TAB, `\\Z` 0x1A, anything else
itself), or with `--csv-backslash-escape=false` the delimiter is doubled. Binary values are written as
their raw bytes; every other text is UTF-8. TIMESTAMP values are UTC (Dumpling sets `time_zone = '+00:00'`).

Dumpling's SQL (`--filetype sql`, pingcap/tidb `pkg/dumpformat/sqlfile`): after its `/*!40101 SET NAMES
binary*/;` line, statements `INSERT INTO `t` VALUES` + one `(...)` tuple a line, joined by `,\\n`, ended by
`;\\n`, a new statement every `--statement-size` bytes (a column list after the table when the table has
generated columns). Values: numbers bare, NULL, strings, dates and JSON in `'` with backslash escapes (`\\0`
`\\n` `\\r` `\\\\` `\\'` `\\"` `\\Z`; with `--escape-backslash=false` only `''`), BLOB, BINARY, VARBINARY and BIT
as `x'<hex>'`. Other tools' `_binary '...'`, `X'..'`, `0x..` and `b'..'` literals are read too. Each
value becomes the bytes the CSV file would hold, so both files are typed alike.
"""

from __future__ import annotations

import re
from typing import Any

import cramjam
import pyarrow as pa
import pyarrow.csv as pacsv

from backfill.codec import ColumnKind, DecodeStats, TableSchema
from backfill.codec.ddl_text import DdlTextError, create_table_info
from backfill.codec.errors import CodecError
from backfill.sources.ticdc.change_rows import ParsedRows, to_arrow
from backfill.sources.ticdc.open_schema import fake_table_id
from backfill.sources.ticdc.text_values import TextDialect
from tidelake.config import InitialLoadConfig
from tidelake.errors import InputError

_ESCAPES = {
    ord("0"): b"\x00", ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("Z"): b"\x1a", ord("b"): b"\x08"
}  # fmt: skip
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
    fast = _arrow_csv(content, schema, dialect)
    if fast is not None:
        return fast
    names = [c.name for c in schema.columns]
    kinds = [c.kind for c in schema.columns]
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
        _add_row(rows, fields, names, kinds, where, line)
    return rows


def _arrow_csv(content: bytes, schema: TableSchema, dialect: InitialLoadConfig) -> ParsedRows | None:
    """The rows of a CSV file as Dumpling writes it by default, parsed by Arrow's CSV reader (C++; the
    line-by-line parser is ~50x slower): None when the options or the file are not that case - anything
    Arrow cannot read as exactly one record a line, no cut last line, UTF-8 text - and the line-by-line
    parser then reads it, or names the file and line of what is wrong.

    Dumpling's escapes are made Arrow's first: `\\0`, `\\n`, `\\r`, `\\t`, `\\Z`, `\\b` become their bytes,
    every other `\\X` stays for Arrow's escape character (`\\\\`, `\\"`, the separator), and the bare null
    value `\\N` is escaped once more so that Arrow, which unescapes before it compares, sees `\\N`. In
    backslash-escape mode Dumpling writes no raw line break inside a field, so records are lines."""
    separator, quote = dialect.csv_separator.encode(), dialect.csv_delimiter.encode()
    null = dialect.csv_null_value
    if not dialect.csv_backslash_escape or len(separator) != 1 or len(quote) != 1:
        return None
    if "\\" in null and null != "\\N":
        return None
    try:  # a cut file is cut in its last line: that one is read line by line too
        last = _records(content[content.rfind(_LF, 0, len(content) - 1) + 1 :], dialect, "")
    except InputError:
        return None
    if len(last) != 1 or len(last[0][1]) != len(schema.columns):
        return None
    records = content.count(_LF) - (1 if dialect.header else 0)
    if records <= 0:
        return None
    body = content[content.index(_LF) + 1 :] if dialect.header else content
    if b"\\" in body:
        body = _ARROW_ESCAPE.sub(lambda m: _TO_ARROW.get(m.group(1)[0], m.group(0)), body)
    names = [f"c{i}" for i in range(len(schema.columns))]
    try:
        table = pacsv.read_csv(
            pa.py_buffer(body),
            read_options=pacsv.ReadOptions(column_names=names, block_size=max(1 << 20, len(body) + 1)),
            parse_options=pacsv.ParseOptions(
                delimiter=separator.decode("latin-1"), quote_char=quote.decode("latin-1"), escape_char="\\",
                double_quote=False, newlines_in_values=True,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.binary() for n in names}, null_values=[null],
                strings_can_be_null=True, quoted_strings_can_be_null=False,
            ),
        )  # fmt: skip
    except pa.ArrowInvalid:
        return None
    if table.num_rows != records:
        return None
    if dialect.header and _records(content[: content.index(_LF) + 1], dialect, "")[0][1] != [
        c.name.encode() for c in schema.columns
    ]:
        return None  # the line-by-line parser names the header
    values: list[Any] = []
    for column, data in zip(schema.columns, table.columns, strict=True):
        if column.kind is ColumnKind.BINARY:
            values.append([None if v is None else v.decode("latin-1") for v in data.to_pylist()])
        elif column.kind is ColumnKind.BIT:
            values.append([None if v is None else str(int.from_bytes(v, "big")) for v in data.to_pylist()])
        else:
            try:
                values.append(data.cast(pa.string()))
            except pa.ArrowInvalid:
                return None  # not UTF-8: the line-by-line parser names the line
    first = 2 if dialect.header else 1
    return ParsedRows(
        pa.repeat(pa.scalar("PUT"), records), [], pa.array(range(first, first + records), pa.int64()), values
    )


_ARROW_ESCAPE = re.compile(rb"\\(.)", re.S)
_TO_ARROW = {**_ESCAPES, ord("N"): b"\\\\N"}


def _add_row(
    rows: ParsedRows,
    fields: list[bytes | None],
    names: list[str],
    kinds: list[ColumnKind],
    where: str,
    line: int,
) -> None:
    """One record's fields (bytes as the CSV file holds them, None for NULL) as texts: binary columns
    one Latin-1 character per byte, BIT (its bytes, big-endian) as its number, every other column UTF-8
    (CSV and SQL files alike)."""
    if len(fields) != len(names):
        raise InputError(f"{where}:{line}: {len(fields)} fields, the table has {len(names)} columns")
    rows.ops.append("PUT")
    for i, value in enumerate(fields):
        if value is None:
            rows.values[i].append(None)
        elif kinds[i] is ColumnKind.BINARY:
            rows.values[i].append(value.decode("latin-1"))
        elif kinds[i] is ColumnKind.BIT:
            rows.values[i].append(str(int.from_bytes(value, "big")))
        else:
            try:
                rows.values[i].append(value.decode("utf-8"))
            except UnicodeDecodeError:
                raise InputError(f"{where}:{line}: column {names[i]!r} is not UTF-8 text") from None
    rows.lines.append(line)


_INSERT = re.compile(
    rb"INSERT\s+INTO\s+(?:`(?:[^`]|``)+`|\w+)(?:\.(?:`(?:[^`]|``)+`|\w+))?\s*(?:\(([^)]*)\))?\s*VALUES\s*\(",
    re.I,
)
_LF = b"\n"
_BETWEEN = re.compile(rb"(?:\s+|/\*.*?\*/;?|--[^\n]*(?:\n|$))*", re.S)  # blanks, comments, `/*!..*/;`
_AFTER_TUPLE = re.compile(rb"\s*([,;])\s*(\()?")
_STRING = {  # a quoted string's body, by --escape-backslash
    True: rb"'((?:[^'\\]|\\.|'')*)'",
    False: rb"'((?:[^']|'')*)'",
}
_VALUE = {
    escape: re.compile(
        rb"\s*(?:(NULL)|(?:_[A-Za-z0-9]+\s*)?" + _STRING[escape] + rb"|[xX]'([0-9A-Fa-f]*)'|0x([0-9A-Fa-f]+)"
        rb"|[bB]'([01]*)'|([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?))\s*([,)])",
        re.S | re.I,
    )
    for escape in (True, False)
}


def parse_sql(content: bytes, schema: TableSchema, dialect: InitialLoadConfig, where: str) -> ParsedRows:
    """The rows of one `--filetype sql` data file (its INSERT statements), each value the bytes the CSV
    file would hold; a cut statement or an unreadable value raise InputError naming `where`:line."""
    names = [c.name for c in schema.columns]
    kinds = [c.kind for c in schema.columns]
    value = _VALUE[dialect.csv_backslash_escape]
    rows = ParsedRows.for_columns(len(names))
    pos, line, counted, n = 0, 1, 0, len(content)

    def here(at: int) -> str:
        return f"{where}:{line + content.count(_LF, counted, at)}"

    while True:
        pos = _BETWEEN.match(content, pos).end()  # type: ignore[union-attr]  # matches "" at least
        if pos >= n:
            return rows
        statement = _INSERT.match(content, pos)
        if statement is None:
            raise InputError(f"{here(pos)}: not an INSERT statement: {content[pos : pos + 40]!r}")
        if statement.group(1) is not None:
            listed = [
                c.strip().strip(b"`").decode("utf-8", "replace") for c in statement.group(1).split(b",")
            ]
            if listed != names:
                raise InputError(f"{here(pos)}: the statement's columns {listed} are not the table's {names}")
        pos = statement.end()
        while True:  # one tuple, its opening parenthesis read
            line, counted = line + content.count(_LF, counted, pos), pos
            fields: list[bytes | None] = []
            while True:
                match = value.match(content, pos)
                if match is None:
                    if content.find(_LF, pos) < 0:
                        raise InputError(f"{here(pos)}: the statement is not finished (a cut file)")
                    raise InputError(
                        f"{here(pos)}: unexpected text in a VALUES tuple: {content[pos : pos + 40]!r}"
                    )
                fields.append(_sql_value(match, dialect.csv_backslash_escape))
                pos = match.end()
                if match.group(7) == b")":
                    break
            _add_row(rows, fields, names, kinds, where, line)
            after = _AFTER_TUPLE.match(content, pos)
            if after is None or (after.group(1) == b"," and after.group(2) is None):
                raise InputError(f"{here(pos)}: the statement is not finished (a cut file)")
            pos = after.end()
            if after.group(1) == b";":
                if after.group(2) is not None:
                    raise InputError(f"{here(pos)}: a tuple after the end of the statement")
                break


def _sql_value(match: re.Match[bytes], backslash_escape: bool) -> bytes | None:
    """A SQL literal as the bytes the CSV file holds (None for NULL)."""
    null, string, x_hex, zero_x, bits, number, _ = match.groups()
    if null is not None:
        return None
    if string is not None:
        if backslash_escape:
            if b"\\" not in string and b"''" not in string:
                return bytes(string)
            return re.sub(
                rb"\\(.)|''", lambda m: _ESCAPES.get(m.group(1)[0], m.group(1)) if m.group(1) else b"'", string,
                flags=re.S,
            )  # fmt: skip
        return string.replace(b"''", b"'")
    if x_hex is not None or zero_x is not None:
        return bytes.fromhex((x_hex if x_hex is not None else zero_x).decode())
    if bits is not None:
        return int(bits, 2).to_bytes((len(bits) + 7) // 8, "big") if bits else b""
    return bytes(number)


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
