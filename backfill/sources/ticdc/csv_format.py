"""TiCDC's CSV protocol (tiflow ``pkg/sink/codec/csv/csv_message.go``), one file at a time.

A line: ``op, table, schema[, commit-ts][, is-update][, handle-key], columns...`` in the table's column
order, ended by the terminator (the sink's default ``\\r\\n``). Strings (op, names, text, binary as
base64 or hex, dates, decimals, ENUM/SET names) are quoted with the quote character doubled inside; numbers
and NULL (the null string, ``\\N``) are bare — so a quoted ``"\\N"`` is the text, never NULL. With no quote
character, strings are written bare with ``\\r``, ``\\n``, ``\\\\`` and the delimiter backslash-escaped.
With ``output-field-header`` every file starts with a ``ticdc-meta$operation,...`` line.

Ops: ``I`` and ``U`` put the row, ``D`` deletes it; ``output-old-value`` writes an update as a ``D`` of the
old row and an ``I`` of the new one (is-update ``true``), at one commit ts. Without ``include-commit-ts``
the rows cannot be placed in time: the options refuse it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backfill.sources.ticdc.change_rows import DELETE, PUT, ParsedRows
from tidelake.errors import InputError

HEADER_START = "ticdc-meta$operation"
_OPS = {"I": PUT, "U": PUT, "D": DELETE}
_UNESCAPE = re.compile(r"\\(.)", re.S)
_ESCAPED = {"n": "\n", "r": "\r"}


@dataclass(frozen=True)
class CsvOptions:
    """The sink's ``[sink.csv]`` settings, as the files were written."""

    delimiter: str = ","
    quote: str = '"'
    null: str = "\\N"
    terminator: str = "\r\n"
    binary_encoding: str = "base64"
    header: bool = False
    include_commit_ts: bool = True
    output_old_value: bool = False
    output_handle_key: bool = False

    def __post_init__(self) -> None:
        if not self.include_commit_ts:
            raise ValueError(
                "csv include_commit_ts = false: rows without their commit ts cannot be applied exactly; "
                "set include-commit-ts = true in the changefeed's [sink.csv] and read what it writes"
            )
        if not 1 <= len(self.delimiter) <= 3 or any(c in "\r\n" for c in self.delimiter):
            raise ValueError(f"csv delimiter {self.delimiter!r} must be 1 to 3 characters, no line breaks")
        if len(self.quote) > 1 or (self.quote and self.quote in self.delimiter):
            raise ValueError(
                f"csv quote {self.quote!r} must be one character (or empty) not in the delimiter"
            )
        if not self.terminator:
            raise ValueError("csv terminator must not be empty (TiCDC's default is \\r\\n)")
        if self.binary_encoding not in ("base64", "hex"):
            raise ValueError(f"csv binary_encoding must be base64 or hex, got {self.binary_encoding!r}")

    @property
    def meta_columns(self) -> int:
        """Fields before the data columns."""
        return 4 + int(self.output_old_value) + int(self.output_handle_key)


class CsvTokenizer:
    """Splits a file's text into lines of fields, keeping whether each field was quoted."""

    def __init__(self, options: CsvOptions) -> None:
        self.options = options
        d = re.escape(options.delimiter)
        # The usual terminators also end a line written with the other one (\n vs \r\n).
        t = r"\r?\n" if options.terminator in ("\n", "\r\n") else re.escape(options.terminator)
        if options.quote:
            q = re.escape(options.quote)
            if len(options.delimiter) == 1 and options.terminator in ("\n", "\r\n"):
                bare = rf"[^{d}{q}\r\n]*"
            else:
                bare = rf"(?:(?!{d}|{t}|{q}).)*"
            field = rf"{q}((?:[^{q}]|{q}{q})*){q}|({bare})"
        else:
            field = rf"()((?:\\.|(?!{d}|{t})[^\\])*)"
        self._field = re.compile(rf"(?:{field})({d}|{t}|\Z)", re.S)
        self._doubled = options.quote * 2

    def lines(self, text: str, where: str) -> list[tuple[int, list[str | None]]]:
        """(line number, fields) per line; a field is None for the null string. Bad syntax raises."""
        out: list[tuple[int, list[str | None]]] = []
        pos, end, line = 0, len(text), 1
        match = self._field.match
        quote, null, doubled = self.options.quote, self.options.null, self._doubled
        delimiter = self.options.delimiter
        while pos < end:
            start_line = line
            fields: list[str | None] = []
            while True:
                found = match(text, pos)
                if found is None or (found.end() == pos and pos < end):
                    raise InputError(f"{where}:{start_line}: malformed CSV near {text[pos : pos + 40]!r}")
                quoted, bare, sep = found.group(1), found.group(2), found.group(3)
                if quote and quoted is not None:
                    value: str | None = quoted.replace(doubled, quote) if doubled in quoted else quoted
                    line += quoted.count("\n")
                elif bare == null:
                    value = None
                elif not quote and "\\" in bare:
                    value = _UNESCAPE.sub(lambda m: _ESCAPED.get(m.group(1), m.group(1)), bare)
                else:
                    value = bare
                fields.append(value)
                pos = found.end()
                if sep != delimiter:
                    if not sep:
                        raise InputError(f"{where}:{start_line}: the file ends inside a line (cut short?)")
                    line += sep.count("\n") or 1
                    break
                if pos >= end:
                    raise InputError(
                        f"{where}:{start_line}: the line ends in a delimiter, without a terminator"
                    )
            out.append((start_line, fields))
        return out


def parse_csv(
    data: bytes | str, options: CsvOptions, column_names: list[str], where: str, *, keyless: bool = False
) -> ParsedRows:
    """The changes in one CSV file of a table with ``column_names`` (its schema file's order).

    Files in the usual dialect (one-character delimiter, a quote character, ``\n`` or ``\r\n``) go
    through Arrow's CSV reader; anything else, and any file Arrow finds irregular, through the tokenizer
    above, which names the line of a problem. ``keyless``: the table has no key, so a ``U`` row (an update
    without its old row) cannot be applied: an error that names the sink option to set."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    skip = 0
    if options.header and raw:
        end = raw.find(b"\n")
        first = raw[: end + 1 if end >= 0 else len(raw)]
        _check_header(_text(first, where), options, column_names, where)
        raw, skip = raw[len(first) :], 1
    if _arrow_dialect(options):
        fast = _parse_with_arrow(raw, options, len(column_names), skip, keyless)
        if fast is not None:
            return fast
    return _parse_lines(_text(raw, where, skip), options, len(column_names), where, skip, keyless)


def _text(raw: bytes, where: str, skip: int = 0) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1 + skip
        raise InputError(f"{where}:{line}: not UTF-8 text (byte {exc.start})") from None


def _check_header(text: str, options: CsvOptions, column_names: list[str], where: str) -> None:
    lines = CsvTokenizer(options).lines(text, where)
    first = lines[0][1] if lines else []
    if not first or first[0] != HEADER_START:
        raise InputError(f"{where}:1: expected the {HEADER_START} header line (output-field-header)")
    names = [n for n in first[options.meta_columns - int(options.output_handle_key) :] if n is not None]
    if names != column_names:
        raise InputError(f"{where}:1: header columns {names} differ from the schema file's {column_names}")


def _arrow_dialect(options: CsvOptions) -> bool:
    return len(options.delimiter) == 1 and len(options.quote) == 1 and options.terminator in ("\n", "\r\n")


def _parse_with_arrow(
    raw: bytes, options: CsvOptions, width: int, skip: int, keyless: bool
) -> ParsedRows | None:
    """Arrow's CSV reader over a whole file; None when the file is not regular (the tokenizer then says
    where): a bad field count, op or commit ts, invalid UTF-8, or line breaks inside values."""
    import io

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    meta = options.meta_columns
    names = [f"c{i}" for i in range(meta + width)]
    try:
        table = pcsv.read_csv(
            io.BytesIO(raw),
            read_options=pcsv.ReadOptions(column_names=names, block_size=max(1 << 20, len(raw) + 1)),
            parse_options=pcsv.ParseOptions(delimiter=options.delimiter, quote_char=options.quote, double_quote=True),
            convert_options=pcsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, null_values=[options.null],
                strings_can_be_null=True, quoted_strings_can_be_null=False,
            ),
        )  # fmt: skip
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    n = table.num_rows
    if raw.count(b"\n") != n or (raw and not raw.endswith(b"\n")):
        return None  # line breaks inside values (or a cut-short last line): lines need the tokenizer
    op = table.column(0).combine_chunks()
    if n and not pc.all(pc.is_in(op, pa.array(list(_OPS)))).as_py():
        return None
    if keyless and pc.any(pc.equal(op, "U")).as_py():
        return None
    try:
        ts = pc.cast(table.column(3).combine_chunks(), pa.uint64()).cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if ts.null_count:
        return None
    ops = pc.if_else(pc.equal(op, "D"), pa.scalar(DELETE), pa.scalar(PUT))
    lines = pa.array(range(1 + skip, n + 1 + skip), pa.int64())
    values = [table.column(meta + i).combine_chunks() for i in range(width)]
    return ParsedRows(ops, ts, lines, values)


def _parse_lines(
    text: str, options: CsvOptions, width: int, where: str, skip: int, keyless: bool = False
) -> ParsedRows:
    rows = ParsedRows.for_columns(width)
    meta = options.meta_columns
    for number, fields in CsvTokenizer(options).lines(text, where):
        line = number + skip
        if len(fields) != meta + width:
            raise InputError(
                f"{where}:{line}: {len(fields)} fields, expected {meta + width} "
                f"({meta} TiCDC fields and the schema's {width} columns)"
            )
        op = _OPS.get(fields[0] or "")
        if op is None:
            raise InputError(f"{where}:{line}: operation {fields[0]!r} is not I, U or D")
        if keyless and fields[0] == "U":
            raise InputError(
                f"{where}:{line}: an update (U) of a table without a primary key cannot be applied without "
                "its old row; set output-old-value = true in the changefeed's [sink.csv]"
            )
        ts = fields[3]
        if ts is None or not ts.isdigit():
            raise InputError(
                f"{where}:{line}: the 4th field {ts!r} is not a commit ts; the changefeed must write "
                "include-commit-ts = true ([sink.csv])"
            )
        rows.ops.append(op)
        rows.commit_ts.append(int(ts))
        rows.lines.append(line)
        for index in range(width):
            rows.values[index].append(fields[meta + index])
    return rows


__all__ = ["HEADER_START", "CsvOptions", "CsvTokenizer", "parse_csv"]
