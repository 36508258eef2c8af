"""``backfill decode``: decode one record key + row value with a TableInfo, for debugging bad rows."""

from __future__ import annotations

import base64
import datetime as dt
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from backfill.codec.errors import CodecError
from backfill.codec.keys import classify_key, decode_record_key
from backfill.codec.row import DecodeStats, decode_row, row_version
from backfill.codec.schema import TableSchema


def load_table_infos(path: str) -> list[tuple[str | None, dict]]:
    """A TableInfo JSON file, or ``tables.jsonl`` lines ``{"schema_name", "table_info"}``."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        docs = [json.loads(text)]
    except json.JSONDecodeError:
        docs = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = []
    for doc in docs:
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: expected a JSON object per table, got {type(doc).__name__}")
        if "table_info" in doc:
            out.append((doc.get("schema_name"), doc["table_info"]))
        else:
            out.append((None, doc))
    return out


def _pick_schema(infos: list[tuple[str | None, dict]], table_id: int) -> TableSchema:
    schemas = [TableSchema.from_table_info(ti, schema_name=sn) for sn, ti in infos]
    for s in schemas:
        if table_id in s.physical_ids:
            return s
    if len(schemas) == 1:
        return schemas[0]  # decode_row reports the id mismatch
    raise CodecError(f"no table in the file has physical id {table_id}", table_id=table_id)


def json_value(v: Any) -> Any:
    """Row value -> JSON: Decimal as its exact text, bytes as base64, dates/times in ISO 8601."""
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, bytes):
        return {"base64": base64.b64encode(v).decode()}
    if isinstance(v, dt.date | dt.datetime):
        return v.isoformat()
    return v


def _display(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        return "0x" + v.hex()
    if isinstance(v, Decimal):
        return format(v, "f")
    return str(v)


def decode_command(table_info_path: str, key_hex: str, value_hex: str, as_json: bool) -> int:
    """Print the decoded row (rich table, or JSON) and return 0; on bad input print why and return 2."""
    try:
        key = bytes.fromhex(key_hex.strip().removeprefix("0x"))
        value = bytes.fromhex(value_hex.strip().removeprefix("0x"))
    except ValueError as e:
        print(f"decode: --key/--value must be hex: {e}", file=sys.stderr)
        return 2
    try:
        infos = load_table_infos(table_info_path)
    except (OSError, ValueError) as e:
        print(f"decode: cannot read table info {table_info_path}: {e}", file=sys.stderr)
        return 2
    try:
        if classify_key(key) != "record":
            raise CodecError(f"{classify_key(key)} key, not a record key", offset=0)
        rk = decode_record_key(key)
        schema = _pick_schema(infos, rk.table_id)
        stats = DecodeStats()
        row = decode_row(schema, key, value, stats=stats)
        version = row_version(value)
    except CodecError as e:
        print(f"decode: {e}", file=sys.stderr)
        return 2
    if as_json:
        doc = {
            "table_id": rk.table_id,
            "table": schema.name,
            "schema": schema.schema_name,
            "handle": [json_value(h) for h in rk.handle] if isinstance(rk.handle, tuple) else rk.handle,
            "row_format": version,
            "zero_dates": stats.zero_dates,
            "row": {k: json_value(v) for k, v in row.items()},
        }
        print(json.dumps(doc, ensure_ascii=False))
        return 0
    from rich.console import Console
    from rich.table import Table

    title = (
        f"{schema.schema_name + '.' if schema.schema_name else ''}{schema.name} "
        f"(physical id {rk.table_id}, handle {rk.handle!r}, row format v{version})"
    )
    table = Table(title=title)
    table.add_column("column")
    table.add_column("delta type")
    table.add_column("value", overflow="fold")
    types = {c.name: c.spark_type for c in schema.columns}
    for name, v in row.items():
        table.add_row(name, types.get(name, "BIGINT"), _display(v))
    Console(soft_wrap=False).print(table)
    if stats.zero_dates:
        print(f"{stats.zero_dates} zero date(s) decoded as NULL", file=sys.stderr)
    return 0
