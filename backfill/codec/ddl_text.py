"""TiDB TableInfo JSON from DDL text: CREATE TABLE, and what ALTER/RENAME/TRUNCATE/DROP TABLE do to it.

TiCDC sends every DDL's statement (open protocol ``q``, canal-json ``sql``, a storage sink schema file's
``Query``), and an upstream server prints a table's as ``SHOW CREATE TABLE``. sqlglot's MySQL dialect
parses them; the result is the same TableInfo dict a kv-scan capture holds (built with
:mod:`backfill.codec.tableinfo`, so one type map), read by ``TableSchema.from_table_info``.

What the text gives exactly: types with their lengths, DECIMAL(p,s), ENUM/SET elements, BIT(n), fsp,
UNSIGNED, charset and collation (column, else table, else utf8mb4_bin), NOT NULL, defaults, stored
generated columns, the primary key. Whether a primary key is clustered: TiDB's ``CLUSTERED`` or
``NONCLUSTERED`` (bare or in its ``/*T![clustered_index] ... */`` comment, as ``SHOW CREATE TABLE``
prints it); without either TiDB's default (``tidb_enable_clustered_index = ON``) makes it clustered.
MySQL/MariaDB have no other kind. A ``_tidb_rowid`` column (a MySQL copy of a TiDB table keyed by its
hidden handle) stands for TiDB's handle: the table has no clustered key.

What sqlglot does not read is taken from its tokens only (no SQL is parsed by hand here): the clustered
keywords, a ``PARTITION BY`` clause (the partitioning does not change the columns; left out),
``RENAME TABLE`` (each side parsed by sqlglot as a table name) and partition maintenance
(``ALTER TABLE ... ADD|DROP|TRUNCATE|EXCHANGE|REORGANIZE ... PARTITION``). Executable comments other than
the clustered one (``AUTO_RANDOM``, ``SHARD_ROW_ID_BITS``, ``PLACEMENT POLICY``, MySQL's ``/*!50100``)
stay comments: none changes a column. Anything else sqlglot cannot parse is a :class:`DdlTextError`
naming the statement. Column ids: 1..n in CREATE TABLE order, an added column gets ``max_col_id + 1``,
MODIFY/CHANGE/RENAME COLUMN keep the id (as TiDB does without a reorg).

Defaults: literals are kept as TiDB keeps them (text); an expression default (``CURRENT_TIMESTAMP``,
``(expr)``) has no origin default, so rows that predate an ``ADD COLUMN`` with one read NULL (or the
type's zero value when NOT NULL). TIMESTAMP literals are taken as UTC.
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from backfill.codec import schema as S
from backfill.codec import tableinfo
from tidelake.conventions import ROWID

_DIALECT = "mysql"
_CLUSTERED_COMMENT = re.compile(r"^\s*T!\[clustered_index\]\s*(NON)?CLUSTERED\s*$", re.IGNORECASE)
_PARTITION_VERBS = {"ADD", "DROP", "TRUNCATE", "EXCHANGE", "REORGANIZE", "COALESCE", "REBUILD", "OPTIMIZE",
                    "ANALYZE", "CHECK", "REPAIR", "DISCARD", "IMPORT", "REMOVE"}  # fmt: skip

# sqlglot's type -> (MySQL base name as tableinfo.field_type reads it, unsigned)
_TYPES: dict[str, tuple[str, bool]] = {
    "TINYINT": ("tinyint", False), "UTINYINT": ("tinyint", True),
    "SMALLINT": ("smallint", False), "USMALLINT": ("smallint", True),
    "MEDIUMINT": ("mediumint", False), "UMEDIUMINT": ("mediumint", True),
    "INT": ("int", False), "UINT": ("int", True),
    "BIGINT": ("bigint", False), "UBIGINT": ("bigint", True),
    "BOOLEAN": ("tinyint", False), "SERIAL": ("bigint", True),
    "FLOAT": ("float", False), "DOUBLE": ("double", False), "UDOUBLE": ("double", True),
    "DECIMAL": ("decimal", False), "UDECIMAL": ("decimal", True),
    "CHAR": ("char", False), "NCHAR": ("char", False),
    "VARCHAR": ("varchar", False), "NVARCHAR": ("varchar", False),
    "BINARY": ("binary", False), "VARBINARY": ("varbinary", False),
    "TINYTEXT": ("tinytext", False), "TEXT": ("text", False), "MEDIUMTEXT": ("mediumtext", False),
    "LONGTEXT": ("longtext", False), "TINYBLOB": ("tinyblob", False), "BLOB": ("blob", False),
    "MEDIUMBLOB": ("mediumblob", False), "LONGBLOB": ("longblob", False),
    "ENUM": ("enum", False), "SET": ("set", False), "JSON": ("json", False), "BIT": ("bit", False),
    "DATE": ("date", False), "DATETIME": ("datetime", False), "TIMESTAMP": ("timestamp", False),
    "TIMESTAMPTZ": ("timestamp", False), "TIME": ("time", False), "YEAR": ("year", False),
}  # fmt: skip
_INTEGERS = {"tinyint", "smallint", "mediumint", "int", "bigint"}
_TEXT_AS_BINARY = {"char": "binary", "varchar": "varbinary", "tinytext": "tinyblob", "text": "blob",
                   "mediumtext": "mediumblob", "longtext": "longblob"}  # fmt: skip
_NO_ARGUMENTS = {"tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob",
                 "json", "date", "year", "enum", "set"}  # fmt: skip


class DdlTextError(ValueError):
    """A DDL statement that cannot be read, or that does not fit the table it is applied to."""


@dataclass(frozen=True)
class DdlEffect:
    """What one statement does to one table.

    ``kind``: ``create``, ``alter`` (columns or defaults changed), ``rename``, ``truncate``, ``drop``,
    ``partition`` (partition maintenance; ``verb`` says which) or ``none`` (indexes, comments, options).
    ``table_info``: the table after it (None after a drop); ``schema``/``table``: its name after it.
    """

    kind: str
    table_info: dict[str, Any] | None
    schema: str | None = None
    table: str | None = None
    verb: str = ""


# ------------------------------------------------------------------------------------------ statements


@dataclass(frozen=True)
class _Prepared:
    text: str  # the statement as sqlglot should see it
    tokens: list[Token]
    clustered: bool | None  # CLUSTERED / NONCLUSTERED / not said


def _prepare(sql: str) -> _Prepared:
    """The statement without what sqlglot does not read (clustered keywords, PARTITION BY clause)."""
    try:
        tokens = sqlglot.tokenize(sql, read=_DIALECT)
    except TokenError as exc:
        raise DdlTextError(f"cannot read DDL {sql!r}: {exc}") from None
    clustered: bool | None = None
    cuts: list[tuple[int, int]] = []
    depth = 0
    is_create = len(tokens) > 1 and tokens[0].token_type == TokenType.CREATE
    for i, token in enumerate(tokens):
        for comment in token.comments:
            found = _CLUSTERED_COMMENT.match(comment)
            if found:
                clustered = found.group(1) is None
        word = token.text.upper()
        after_key = i > 0 and (tokens[i - 1].token_type in (TokenType.R_PAREN, TokenType.PRIMARY_KEY)
                               or tokens[i - 1].text.upper() == "KEY")  # fmt: skip
        if token.token_type == TokenType.VAR and word in ("CLUSTERED", "NONCLUSTERED") and after_key:
            clustered = word == "CLUSTERED"
            cuts.append((token.start, token.end + 1))
        elif token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif token.token_type == TokenType.PARTITION_BY and depth == 0 and is_create:
            cuts.append((token.start, len(sql)))
            break
    text = sql
    for start, end in reversed(cuts):
        text = text[:start] + " " + text[end:]
    return _Prepared(text, tokens, clustered)


def _parse(prepared: _Prepared, sql: str) -> exp.Expr:
    try:
        statements = [s for s in sqlglot.parse(prepared.text, read=_DIALECT) if s is not None]
    except (ParseError, TokenError) as exc:
        raise DdlTextError(f"cannot read DDL {sql!r}: {_first_line(exc)}") from None
    if len(statements) != 1:
        raise DdlTextError(f"cannot read DDL {sql!r}: {len(statements)} statements, not one")
    return statements[0]


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _name(table: exp.Table, default_schema: str | None) -> tuple[str | None, str]:
    return (table.db or default_schema), table.name


def create_table_info(
    sql: str, *, table_id: int, default_schema: str | None = None
) -> tuple[str | None, str, dict[str, Any]]:
    """(schema, table, TableInfo) of a CREATE TABLE statement; the schema from the statement, else
    ``default_schema``."""
    prepared = _prepare(sql)
    statement = _parse(prepared, sql)
    if not isinstance(statement, exp.Create) or str(statement.args.get("kind", "")).upper() != "TABLE":
        raise DdlTextError(f"not a CREATE TABLE statement: {sql!r}")
    target = statement.this
    if not isinstance(target, exp.Schema) or not isinstance(target.this, exp.Table):
        raise DdlTextError(f"CREATE TABLE without a column list (LIKE, AS SELECT) cannot be read: {sql!r}")
    schema, table = _name(target.this, default_schema)
    charset, collate = _table_charset(statement.args.get("properties"))
    columns: list[dict[str, Any]] = []
    pk: list[tuple[str, int]] = []
    for item in target.expressions:
        if isinstance(item, exp.ColumnDef):
            info, inline_pk = _column(item, len(columns) + 1, charset, collate, sql)
            columns.append(info)
            if inline_pk:
                pk.append((info["name"]["O"], -1))
        elif isinstance(item, exp.PrimaryKey):
            pk = [_key_part(part, sql) for part in item.expressions]
    return schema, table, _table(table_id, table, columns, pk, prepared.clustered, charset, collate, sql)


def _table(
    table_id: int,
    name: str,
    columns: list[dict[str, Any]],
    pk: Sequence[tuple[str, int]],
    clustered: bool | None,
    charset: str,
    collate: str,
    sql: str,
) -> dict[str, Any]:
    by_name = {c["name"]["L"]: c for c in columns}
    if any(n.lower() not in by_name for n, _ in pk):
        raise DdlTextError(f"the primary key names a column the table lacks: {sql!r}")
    handle = [by_name[n.lower()]["name"]["O"] for n, _ in pk]
    if ROWID in by_name:  # a MySQL copy of a TiDB table keyed by the hidden handle
        columns = [c for c in columns if c["name"]["L"] != ROWID]
        handle, clustered = [h for h in handle if h.lower() != ROWID], False
    for n in handle:
        by_name[n.lower()]["type"]["Flag"] |= S.FLAG_NOT_NULL | S.FLAG_PRI_KEY
    key: str | list[str] | None = None
    if handle and clustered is not False:
        single = by_name[handle[0].lower()]
        is_int = single["type"]["Tp"] in (S.TP_TINY, S.TP_SHORT, S.TP_INT24, S.TP_LONG, S.TP_LONGLONG)
        key = "int" if len(handle) == 1 and is_int else handle
    info = tableinfo.table_info(table_id, name, columns, pk=key)
    if isinstance(key, list):
        for part, (_, length) in zip(info["index_info"][0]["idx_cols"], pk, strict=False):
            part["length"] = length
    info["charset"], info["collate"] = charset, collate
    return info


def _key_part(part: exp.Expression, sql: str) -> tuple[str, int]:
    if isinstance(part, exp.ColumnPrefix):
        return part.this.name, int(part.expression.name)
    if isinstance(part, exp.Ordered):
        part = part.this
    if isinstance(part, exp.Identifier | exp.Column):
        return part.name, -1
    raise DdlTextError(f"primary key part {part.sql(_DIALECT)!r} is not a column: {sql!r}")


def _table_charset(properties: exp.Expression | None) -> tuple[str, str]:
    charset, collate = "", ""
    for prop in properties.expressions if properties is not None else ():
        if isinstance(prop, exp.CharacterSetProperty):
            charset = prop.this.name.lower()
        elif isinstance(prop, exp.CollateProperty):
            collate = prop.this.name.lower()
    return _charset_and_collation(charset, collate)


def _charset_and_collation(charset: str, collate: str) -> tuple[str, str]:
    """TiDB's defaults: utf8mb4 with utf8mb4_bin; a collation names its charset."""
    if collate and not charset:
        charset = "binary" if collate == "binary" else collate.split("_", 1)[0]
    charset = charset or "utf8mb4"
    if not collate:
        collate = "binary" if charset == "binary" else f"{charset}_bin"
    return charset, collate


# --------------------------------------------------------------------------------------------- columns


@dataclass
class _ColumnClauses:
    """What a column definition's clauses say besides its type."""

    charset: str = ""
    collate: str = ""  # "binary_collation" for `BINARY`: the charset's _bin collation
    not_null: bool = False
    primary: bool = False
    zerofill: bool = False  # ZEROFILL implies UNSIGNED
    default: Any = None
    default_bit: bytes | None = None
    generated: str = ""
    stored: bool = False
    json_check: bool = False  # CHECK (json_valid(`c`)): MariaDB's JSON


def _read_not_null(clauses: _ColumnClauses, c: exp.Expression) -> None:
    clauses.not_null = not c.args.get("allow_null")


def _read_primary(clauses: _ColumnClauses, c: exp.Expression) -> None:
    clauses.primary = True


def _read_charset(clauses: _ColumnClauses, c: exp.Expression) -> None:
    clauses.charset = c.this.name.lower()


def _read_collate(clauses: _ColumnClauses, c: exp.Expression) -> None:
    clauses.collate = c.this.name.lower()


def _read_binary(clauses: _ColumnClauses, c: exp.Expression) -> None:
    clauses.collate = "binary_collation"


def _read_zerofill(clauses: _ColumnClauses, c: exp.Expression) -> None:
    clauses.zerofill = True


def _read_default(clauses: _ColumnClauses, c: exp.Expression) -> None:
    clauses.default, clauses.default_bit = _default(c.this)


def _read_generated(clauses: _ColumnClauses, c: exp.Expression) -> None:
    clauses.generated, clauses.stored = c.this.sql(_DIALECT), bool(c.args.get("persisted"))


def _read_check(clauses: _ColumnClauses, c: exp.Expression) -> None:
    check = c.this
    clauses.json_check = isinstance(check, exp.Anonymous) and check.name.lower() == "json_valid"


# the column constraints that matter, in the order they are tried; the others (COMMENT, AUTO_INCREMENT...) do not
_CLAUSE_READERS: tuple[tuple[type[exp.Expression], Callable[[_ColumnClauses, exp.Expression], None]], ...] = (
    (exp.NotNullColumnConstraint, _read_not_null),
    (exp.PrimaryKeyColumnConstraint, _read_primary),
    (exp.CharacterSetColumnConstraint, _read_charset),
    (exp.CollateColumnConstraint, _read_collate),
    (exp.BinaryColumnConstraint, _read_binary),
    (exp.ZeroFillColumnConstraint, _read_zerofill),
    (exp.DefaultColumnConstraint, _read_default),
    (exp.ComputedColumnConstraint, _read_generated),
    (exp.CheckColumnConstraint, _read_check),
)


def _column_clauses(definition: exp.ColumnDef) -> _ColumnClauses:
    clauses = _ColumnClauses()
    for constraint in definition.constraints:
        for kind, read in _CLAUSE_READERS:
            if isinstance(constraint.kind, kind):
                read(clauses, constraint.kind)
                break
    return clauses


def _column(
    definition: exp.ColumnDef, col_id: int, table_charset: str, table_collate: str, sql: str
) -> tuple[dict[str, Any], bool]:
    """ColumnInfo JSON of one column definition, and whether it says PRIMARY KEY."""
    name = definition.this.name
    kind = definition.args.get("kind")
    if not isinstance(kind, exp.DataType):
        raise DdlTextError(f"column {name!r} has no type: {sql!r}")
    dtype = kind.this.name
    if dtype not in _TYPES:
        raise DdlTextError(f"column {name!r}: type {kind.sql(_DIALECT)} is not supported: {sql!r}")
    clauses = _column_clauses(definition)
    base, args = _base_type(kind, clauses.json_check)
    textual = base in _TEXT_AS_BINARY or base in ("enum", "set")
    charset, collate = _column_charset(
        textual, clauses.charset, clauses.collate, table_charset, table_collate
    )
    if charset == "binary" and base in _TEXT_AS_BINARY:
        base = _TEXT_AS_BINARY[base]
    bit = clauses.default_bit
    try:
        info = tableinfo.column_info(
            col_id,
            name,
            _sql_type(base, args, clauses.zerofill or _TYPES[dtype][1]),
            offset=col_id - 1,
            not_null=clauses.not_null or dtype == "SERIAL",
            primary_key=clauses.primary,
            default=clauses.default,
            origin_default=clauses.default,
            origin_default_bit=base64.b64encode(bit).decode() if bit is not None else None,
            generated_expr=clauses.generated,
            generated_stored=clauses.stored,
            collate=collate or "utf8mb4_bin",
        )
    except ValueError as exc:
        raise DdlTextError(f"column {name!r}: {exc}: {sql!r}") from None
    _finish_field_type(info["type"], kind, base, dtype, textual, (charset, collate))
    info["default_bit"] = info["origin_default_bit"]
    return info, clauses.primary


def _base_type(kind: exp.DataType, json_check: bool) -> tuple[str, list[str]]:
    """(MySQL base type name, its arguments as written) of a column type sqlglot read."""
    dtype = kind.this.name
    base = _TYPES[dtype][0]
    args = [p.this.name if isinstance(p, exp.DataTypeParam) else p.name for p in kind.expressions]
    if dtype == "BOOLEAN":
        args = ["1"]
    if base == "float" and len(args) == 1 and int(args[0]) > 24:
        base, args = "double", []  # FLOAT(p) with p > 24 is a DOUBLE
    if base == "longtext" and json_check:
        base = "json"  # MariaDB's JSON: LONGTEXT CHECK (json_valid(`c`))
    return base, args


def _column_charset(
    textual: bool, charset: str, collate: str, table_charset: str, table_collate: str
) -> tuple[str, str]:
    """A column's charset and collation: its own, else the table's (textual types only)."""
    if collate == "binary_collation":
        charset = charset or table_charset
        collate = "binary" if charset == "binary" else f"{charset}_bin"
    if textual:
        charset, collate = _charset_and_collation(
            charset or ("" if collate else table_charset), collate or ("" if charset else table_collate)
        )
    return charset, collate


def _sql_type(base: str, args: list[str], unsigned: bool) -> str:
    """The type as tableinfo.field_type reads it: ``decimal(10,2) unsigned``, ``char(1)``..."""
    if base in _NO_ARGUMENTS:
        args = []
    if base in ("bit", "char", "binary") and not args:
        args = ["1"]
    sql_type = f"{base}({','.join(args)})" if args else base
    return sql_type + " unsigned" if unsigned else sql_type


def _finish_field_type(
    ft: dict[str, Any], kind: exp.DataType, base: str, dtype: str, textual: bool, charset: tuple[str, str]
) -> None:
    """What tableinfo.field_type cannot know from the type text: ENUM/SET elements, charset, SERIAL."""
    if base in ("enum", "set"):
        elems = [e.name for e in kind.expressions]
        ft["Elems"] = elems
        ft["Flen"] = max((len(e) for e in elems), default=1) if base == "enum" else len(",".join(elems))
    if textual and ft["Charset"] != "binary":
        ft["Charset"], ft["Collate"] = charset
    if dtype == "SERIAL":
        ft["Flag"] |= S.FLAG_NOT_NULL


def _default(value: exp.Expression) -> tuple[Any, bytes | None]:
    """(origin default text, BIT default bytes) of a DEFAULT clause; expressions have none."""
    if isinstance(value, exp.Null):
        return None, None
    if isinstance(value, exp.Boolean):
        return ("1" if value.this else "0"), None
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal) and not value.this.is_string:
        return "-" + value.this.name, None
    if isinstance(value, exp.Literal):
        return value.name, None
    if isinstance(value, exp.BitString):
        number = int(value.name or "0", 2)
        return None, number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")
    if isinstance(value, exp.HexString):
        raw = bytes.fromhex(value.name if len(value.name) % 2 == 0 else "0" + value.name)
        return raw.decode("utf-8", "replace"), None
    return None, None  # CURRENT_TIMESTAMP, (expr): evaluated per row, no origin default


# ----------------------------------------------------------------------------------------------- alter


def apply_ddl(table_info: Mapping[str, Any], sql: str, *, schema: str) -> DdlEffect:
    """What ``sql`` does to the table ``table_info`` (named ``schema``.its name). A statement about
    several tables (RENAME TABLE a TO b, c TO d) acts on this one's pair."""
    name = str(table_info["name"]["O"])
    prepared = _prepare(sql)
    partition_verb = _partition_maintenance(prepared.tokens)
    if partition_verb:
        return DdlEffect("partition", dict(table_info), schema, name, partition_verb)
    if prepared.tokens and prepared.tokens[0].token_type == TokenType.RENAME:
        return _rename(table_info, sql, prepared, schema)
    statement = _parse(prepared, sql)
    if isinstance(statement, exp.Drop) and str(statement.args.get("kind", "")).upper() == "TABLE":
        return DdlEffect("drop", None, schema, name)
    if isinstance(statement, exp.TruncateTable):
        return DdlEffect("truncate", copy.deepcopy(dict(table_info)), schema, name)
    if (
        isinstance(statement, exp.Create | exp.Drop)
        and str(statement.args.get("kind", "")).upper() == "INDEX"
    ):
        return DdlEffect("none", dict(table_info), schema, name)
    if isinstance(statement, exp.Alter) and str(statement.args.get("kind", "")).upper() == "TABLE":
        return _alter(table_info, statement, sql, schema)
    raise DdlTextError(f"cannot apply DDL {sql!r} to table {schema}.{name}: not a table DDL tidelake reads")


def _partition_maintenance(tokens: Sequence[Token]) -> str:
    """``ADD PARTITION``, ``REMOVE PARTITIONING``, ``PARTITION BY``... of an ALTER TABLE ('' if none)."""
    if len(tokens) < 3 or tokens[0].token_type != TokenType.ALTER:
        return ""
    for i, token in enumerate(tokens[2:], start=2):
        word = token.text.upper()
        following = tokens[i + 1].text.upper() if i + 1 < len(tokens) else ""
        if token.token_type == TokenType.PARTITION_BY:
            return "PARTITION BY"
        if word in _PARTITION_VERBS and following in ("PARTITION", "PARTITIONING"):
            return f"{word} {following}"
    return ""


def renamed_tables(sql: str, default_schema: str) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """((schema, table) before, after) of each pair of a RENAME TABLE statement, or of an ALTER TABLE ...
    RENAME; empty for any other statement."""
    prepared = _prepare(sql)
    if prepared.tokens and prepared.tokens[0].token_type == TokenType.RENAME:
        return _rename_pairs(sql, prepared, default_schema)
    if not prepared.tokens or prepared.tokens[0].token_type != TokenType.ALTER:
        return []
    if _partition_maintenance(prepared.tokens):
        return []
    statement = _parse(prepared, sql)
    if not isinstance(statement, exp.Alter) or not isinstance(statement.this, exp.Table):
        return []
    old = _name(statement.this, default_schema)
    for action in statement.args.get("actions") or ():
        if isinstance(action, exp.AlterRename):
            return [
                ((old[0] or default_schema, old[1]), (action.this.db or default_schema, action.this.name))
            ]
    return []


def _rename_pairs(
    sql: str, prepared: _Prepared, schema: str
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """RENAME TABLE a TO b[, c TO d]: sqlglot reads it as a bare command, so its table names are cut from
    the token stream at TO and commas and each parsed by sqlglot."""
    rest = sql[prepared.tokens[0].end + 1 :]  # sqlglot's tokenizer keeps a command's rest as one string
    try:
        tokens = sqlglot.tokenize(rest, read=_DIALECT)
    except TokenError as exc:
        raise DdlTextError(f"cannot read DDL {sql!r}: {exc}") from None
    if not tokens or (tokens[0].token_type != TokenType.TABLE and tokens[0].text.upper() != "TABLES"):
        raise DdlTextError(f"cannot read DDL {sql!r}: RENAME of something other than tables")
    parts: list[list[Token]] = [[]]
    for token in tokens[1:]:
        if token.text.upper() == "TO" or token.token_type == TokenType.COMMA:
            parts.append([])
        else:
            parts[-1].append(token)
    if len(parts) % 2 or not all(parts):
        raise DdlTextError(f"cannot read DDL {sql!r}: not RENAME TABLE a TO b[, c TO d]")
    names = []
    for part in parts:
        text = rest[part[0].start : part[-1].end + 1]
        try:
            table = sqlglot.parse_one(text, read=_DIALECT, into=exp.Table)
        except (ParseError, TokenError) as exc:
            raise DdlTextError(f"cannot read DDL {sql!r}: {_first_line(exc)}") from None
        db, name = _name(table, schema)
        names.append((db or schema, name))
    return list(zip(names[::2], names[1::2], strict=True))


def _rename(table_info: Mapping[str, Any], sql: str, prepared: _Prepared, schema: str) -> DdlEffect:
    name = str(table_info["name"]["O"])
    for old, new in _rename_pairs(sql, prepared, schema):
        if old[0].lower() == schema.lower() and old[1].lower() == name.lower():
            return _renamed(table_info, *new)
    raise DdlTextError(f"DDL {sql!r} does not rename table {schema}.{name}")


def _renamed(table_info: Mapping[str, Any], schema: str, table: str) -> DdlEffect:
    info = copy.deepcopy(dict(table_info))
    info["name"] = {"O": table, "L": table.lower()}
    return DdlEffect("rename", info, schema, table)


@dataclass
class _Alteration:
    """One ALTER TABLE statement's work on a copy of the table: its columns, and what changed."""

    info: dict[str, Any]
    cols: list[dict[str, Any]]
    sql: str
    schema: str
    changed: bool = False
    new_name: tuple[str, str] | None = None

    @property
    def charset(self) -> tuple[str, str]:
        """The table's charset and collation, which new columns take by default."""
        return str(self.info.get("charset") or "utf8mb4"), str(self.info.get("collate") or "utf8mb4_bin")

    def find(self, column: str) -> int:
        for i, c in enumerate(self.cols):
            if c["name"]["L"] == column.lower():
                return i
        raise DdlTextError(
            f"DDL {self.sql!r}: table {self.schema}.{self.info['name']['O']} has no column {column!r}"
        )

    def place(self, column: dict[str, Any], position: exp.Expression | None, at: int) -> None:
        """Insert ``column`` at ``at``, or where its FIRST / AFTER clause says."""
        if isinstance(position, exp.ColumnPosition):
            first = str(position.args.get("position", "")).upper() == "FIRST"
            at = 0 if first else self.find(position.this.name) + 1
        self.cols.insert(at, column)


def _add_column(alter: _Alteration, action: exp.Expression) -> None:
    top = max([int(alter.info.get("max_col_id") or 0), *(int(c["id"]) for c in alter.cols)])
    column, primary = _column(cast(exp.ColumnDef, action), top + 1, *alter.charset, alter.sql)
    if primary:
        raise DdlTextError(f"DDL {alter.sql!r}: ADD COLUMN ... PRIMARY KEY is not supported")
    alter.info["max_col_id"] = column["id"]
    alter.place(column, action.args.get("position"), len(alter.cols))
    alter.changed = True


def _drop(alter: _Alteration, action: exp.Expression) -> None:
    """DROP COLUMN; any other DROP (index, foreign key, check) changes no column."""
    if str(action.args.get("kind", "")).upper() == "COLUMN":
        for target in action.args.get("tables") or ():
            alter.cols.pop(alter.find(target.name))
        alter.changed = True


def _modify_column(alter: _Alteration, action: exp.Expression) -> None:
    """MODIFY / CHANGE COLUMN: a new definition under the same id, still in the primary key if it was."""
    definition = action.this
    old = action.args.get("rename_from")
    at = alter.find(old.name if old is not None else definition.this.name)
    previous = alter.cols.pop(at)
    column, _ = _column(definition, int(previous["id"]), *alter.charset, alter.sql)
    if previous["type"]["Flag"] & S.FLAG_PRI_KEY:
        column["type"]["Flag"] |= S.FLAG_PRI_KEY | S.FLAG_NOT_NULL
    alter.place(column, definition.args.get("position"), at)
    alter.changed = True


def _rename_column(alter: _Alteration, action: exp.Expression) -> None:
    column = alter.cols[alter.find(action.this.name)]
    to = action.args["to"].name
    column["name"] = {"O": to, "L": to.lower()}
    alter.changed = True


def _alter_column(alter: _Alteration, action: exp.Expression) -> None:
    """ALTER COLUMN ... SET DEFAULT / DROP DEFAULT (the current default only: no column change)."""
    if not (action.args.get("drop") or "default" in action.args):
        _not_understood(alter, action)
    column = alter.cols[alter.find(action.this.name)]
    column["default"] = None if action.args.get("drop") else _default(action.args["default"])[0]


def _rename_table(alter: _Alteration, action: exp.Expression) -> None:
    alter.new_name = (action.this.db or alter.schema, action.this.name)


def _add_constraint(alter: _Alteration, action: exp.Expression) -> None:
    for constraint in action.expressions:
        if isinstance(constraint, exp.PrimaryKey):
            for part in constraint.expressions:  # TiDB adds primary keys NONCLUSTERED only
                column = alter.cols[alter.find(_key_part(part, alter.sql)[0])]
                column["type"]["Flag"] |= S.FLAG_PRI_KEY | S.FLAG_NOT_NULL
            alter.changed = True


def _drop_primary_key(alter: _Alteration, action: exp.Expression) -> None:
    if alter.info.get("pk_is_handle") or alter.info.get("is_common_handle"):
        raise DdlTextError(f"DDL {alter.sql!r}: a clustered primary key cannot be dropped")
    for column in alter.cols:
        column["type"]["Flag"] &= ~S.FLAG_PRI_KEY
    alter.changed = True


def _no_column_change(alter: _Alteration, action: exp.Expression) -> None:
    """Indexes: nothing to do."""


def _not_understood(alter: _Alteration, action: exp.Expression) -> NoReturn:
    raise DdlTextError(f"cannot apply DDL {alter.sql!r}: {action.sql(_DIALECT)!r} is not understood")


# what each ALTER TABLE spec sqlglot reads does to the table; any other spec is not understood
_ALTER_SPECS: tuple[tuple[type[exp.Expression], Callable[[_Alteration, exp.Expression], None]], ...] = (
    (exp.ColumnDef, _add_column),
    (exp.Drop, _drop),
    (exp.ModifyColumn, _modify_column),
    (exp.RenameColumn, _rename_column),
    (exp.AlterColumn, _alter_column),
    (exp.AlterRename, _rename_table),
    (exp.AddConstraint, _add_constraint),
    (exp.DropPrimaryKey, _drop_primary_key),
    (exp.AlterIndex, _no_column_change),
    (exp.RenameIndex, _no_column_change),
)


def _alter(table_info: Mapping[str, Any], statement: exp.Alter, sql: str, schema: str) -> DdlEffect:
    info = copy.deepcopy(dict(table_info))
    alter = _Alteration(info, list(info["cols"]), sql, schema)
    for action in statement.args.get("actions") or ():
        apply = next((apply for spec, apply in _ALTER_SPECS if isinstance(action, spec)), _not_understood)
        apply(alter, action)
    info["cols"] = [dict(c, offset=i) for i, c in enumerate(alter.cols)]
    _renumber_primary_index(info, sql)
    if alter.new_name is not None:
        return _renamed(info, *alter.new_name)
    return DdlEffect("alter" if alter.changed else "none", info, schema, str(info["name"]["O"]))


def _renumber_primary_index(info: dict[str, Any], sql: str) -> None:
    """The primary index names its columns by offset: recompute them after columns moved."""
    offsets = {c["name"]["L"]: i for i, c in enumerate(info["cols"])}
    for index in info.get("index_info") or ():
        for part in index.get("idx_cols") or ():
            name = part["name"]["L"]
            if name not in offsets:
                raise DdlTextError(f"DDL {sql!r} drops column {part['name']['O']!r} of the primary key")
            part["offset"] = offsets[name]
    if info.get("pk_is_handle") and not any(c["type"]["Flag"] & S.FLAG_PRI_KEY for c in info["cols"]):
        raise DdlTextError(f"DDL {sql!r} drops the primary key column")


def statement_table(sql: str, default_schema: str | None = None) -> tuple[str | None, str] | None:
    """The (schema, table) a CREATE TABLE statement creates; None for any other statement."""
    prepared = _prepare(sql)
    if not prepared.tokens or prepared.tokens[0].token_type != TokenType.CREATE:
        return None
    statement = _parse(prepared, sql)
    if isinstance(statement, exp.Create) and isinstance(statement.this, exp.Schema):
        table = statement.this.this
        if isinstance(table, exp.Table):
            return _name(table, default_schema)
    return None


__all__ = ["DdlEffect", "DdlTextError", "apply_ddl", "create_table_info", "renamed_tables", "statement_table"]
