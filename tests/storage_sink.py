"""Write small TiCDC storage-sink folders by hand for tests: schema files as TiCDC names and hashes them,
data files and indexes in the layout `<schema>/<table>/<version>[/<pid>][/<date>]/CDC<n>.<ext>`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from backfill.sources.ticdc.schema_file import (
    TableColumn,
    TableDefinition,
    columns_from_sql,
    definition_json,
    schema_file_name,
)

# (name, ColumnType, extra fields) of `app.users`: id INT PRIMARY KEY, name VARCHAR(32), score INT.
USERS_COLUMNS = (
    ("id", "INT", {"precision": "11", "nullable": "false", "is_pk": "true"}),
    ("name", "VARCHAR", {"precision": "32"}),
    ("score", "INT", {"precision": "11"}),
)


class SinkFolder:
    """One storage sink prefix."""

    def __init__(self, root: Path, extension: str = ".csv", width: int = 6) -> None:
        self.root = root
        self.extension = extension
        self.width = width
        root.mkdir(parents=True, exist_ok=True)

    def checkpoint(self, ts: int) -> SinkFolder:
        (self.root / "metadata").write_text(json.dumps({"checkpoint-ts": ts}))
        return self

    def schema(
        self,
        table: str,
        version: int,
        columns: Sequence[tuple[str, str, dict[str, str]]] | Sequence[TableColumn] = USERS_COLUMNS,
        *,
        db: str = "app",
        query: str = "",
        action: int = 0,
    ) -> Path:
        cols = (
            tuple(columns) if columns and isinstance(columns[0], TableColumn) else columns_from_sql(columns)
        )  # type: ignore[arg-type]
        definition = TableDefinition(table, db, 1, version, query, action, cols, len(cols))  # type: ignore[arg-type]
        folder = (self.root / db / table if table else self.root / db) / "meta"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / schema_file_name(definition)
        path.write_text(definition_json(definition))
        return path

    def data(
        self,
        table: str,
        version: int,
        number: int,
        text: str,
        *,
        db: str = "app",
        pid: int | None = None,
        date: str | None = None,
        dispatcher: str | None = None,
        index: bool = True,
    ) -> Path:
        folder = self.root / db / table / str(version)
        if pid is not None:
            folder /= str(pid)
        if date is not None:
            folder /= date
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"CDC_{dispatcher}_" if dispatcher else "CDC"
        name = f"{stem}{number:0{self.width}d}{self.extension}"
        path = folder / name
        path.write_text(text)
        if index:
            self.index(folder, name, dispatcher)
        return path

    def index(self, folder: Path, name: str, dispatcher: str | None = None) -> None:
        (folder / "meta").mkdir(exist_ok=True)
        index_name = f"CDC_{dispatcher}.index" if dispatcher else "CDC.index"
        (folder / "meta" / index_name).write_text(name + "\n")


def csv_line(op: str, table: str, ts: int, *values: object, db: str = "app") -> str:
    """A CSV line as TiCDC writes it with default settings and include-commit-ts (strings quoted)."""
    cells = [f'"{op}"', f'"{table}"', f'"{db}"', str(ts)]
    for value in values:
        if value is None:
            cells.append("\\N")
        elif isinstance(value, str):
            cells.append('"' + value.replace('"', '""') + '"')
        else:
            cells.append(str(value))
    return ",".join(cells) + "\r\n"


def canal_line(
    kind: str, table: str, ts: int, data: dict, old: dict | None = None, *, db: str = "app"
) -> str:
    """A canal-json line with the TiDB extension, as TiCDC's storage sink writes it."""
    message = {
        "id": 0, "database": db, "table": table, "pkNames": ["id"], "isDdl": False, "type": kind,
        "es": ts >> 18, "ts": 0, "sql": "", "sqlType": {k: 12 for k in data},
        "mysqlType": {k: "varchar" for k in data},
        "data": [{k: None if v is None else str(v) for k, v in data.items()}],
        "old": None if old is None else [{k: None if v is None else str(v) for k, v in old.items()}],
        "_tidb": {"commitTs": ts},
    }  # fmt: skip
    return json.dumps(message) + "\r\n"
