"""ENUM and SET element names for storage-sink schema files that lack them (tiflow writes no
``ColumnElems``): from the DDL text the files carry (``Query``: a CREATE TABLE gives them, later DDLs
evolve it, `codec.ddl_text`) or from the upstream's SHOW CREATE TABLE for a table that predates the
changefeed. Pure: the caller fetches the upstream's TableInfo.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from backfill.codec.ddl_text import DdlTextError, apply_ddl, create_table_info, statement_table
from backfill.sources.ticdc.open_schema import with_elems
from backfill.sources.ticdc.schema_file import TableDefinition, schema_file_name
from tidelake.errors import InputError

_ENUM_SET = ("ENUM", "SET")


def lacks_elements(definition: TableDefinition) -> bool:
    """Has an ENUM or SET column whose element names the file does not give."""
    return any(c.type.upper() in _ENUM_SET and not c.elems for c in definition.columns)


def text_table_infos(
    definitions: Sequence[TableDefinition], first: Mapping[str, Any] | None, where: str
) -> list[dict[str, Any] | None]:
    """Per definition, the TableInfo its DDL text gives (None where nothing is known): `first` (the
    upstream's, in force at the first definition) or the first one's CREATE TABLE, then each later
    definition's query applied to it (one without a query changes nothing)."""
    out: list[dict[str, Any] | None] = []
    current: dict[str, Any] | None = dict(first) if first is not None else None
    for i, definition in enumerate(definitions):
        query = definition.query.strip()
        try:
            if query and statement_table(query, definition.schema) is not None:
                _, _, current = create_table_info(query, table_id=0, default_schema=definition.schema)
            elif query and current is not None and i > 0:
                previous = definitions[i - 1].schema if i > 0 else definition.schema
                current = apply_ddl(current, query, schema=previous).table_info
        except DdlTextError as exc:
            raise InputError(f"{where}: schema version {definition.table_version} "
                             f"({schema_file_name(definition)}): {exc}") from None  # fmt: skip
        out.append(current)
    return out


def text_table_infos_from(
    definitions: Sequence[TableDefinition],
    since: int,
    upstream_at: Callable[[TableDefinition], Mapping[str, Any] | None] | None,
    where: str,
) -> list[dict[str, Any] | None]:
    """:func:`text_table_infos` of ``definitions[since:]`` (the versions a run reads), the DDL text read
    from the first definition on: a run whose versions start after the CREATE TABLE still has what only
    that statement says (a later ALTER names no element of a column it leaves alone). Where the text
    gives nothing at ``since`` (the table predates the changefeed), ``upstream_at`` gives the upstream's
    TableInfo in force at that definition, unless it is a CREATE TABLE."""
    texts = text_table_infos(definitions, None, where)[since:]
    first = definitions[since]
    if texts[0] is None and upstream_at is not None and not first.query.strip().upper().startswith("CREATE"):
        texts = text_table_infos(definitions[since:], upstream_at(first), where)
    return texts


def with_text_elements(info: dict[str, Any], text_info: Mapping[str, Any] | None) -> dict[str, Any]:
    """`info` whose ENUM/SET columns without elements take them from `text_info` (same column name)."""
    if text_info is None:
        return info
    known = {
        str(c["name"]["L"]): list(c["type"]["Elems"])
        for c in text_info.get("cols") or ()
        if c["type"].get("Elems")
    }
    wanted = {
        str(c["name"]["O"]): known[str(c["name"]["L"])]
        for c in info["cols"]
        if c["type"]["Tp"] in (247, 248) and not c["type"].get("Elems") and str(c["name"]["L"]) in known
    }
    return with_elems(info, wanted) if wanted else info


__all__ = ["lacks_elements", "text_table_infos", "text_table_infos_from", "with_text_elements"]
