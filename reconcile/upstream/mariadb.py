"""MariaDB: JSON is LONGTEXT with a `json_valid` check, normalised in SQL by `JSON_NORMALIZE` (10.7+)."""

from __future__ import annotations

import re
from typing import ClassVar

from reconcile.encoding import JsonMode
from reconcile.upstream.mysql import MySQL, register
from reconcile.upstream.sqltext import Query

_JSON_CHECK = re.compile(r"\s*json_valid\(`((?:[^`]|``)+)`\)\s*", re.IGNORECASE)


@register
class MariaDB(MySQL):
    name: ClassVar[str] = "mariadb"
    position_variable: ClassVar[str] = "gtid_binlog_pos"

    @classmethod
    def claims(cls, version: str) -> bool:
        return "mariadb" in version.lower()

    @property
    def json_mode(self) -> JsonMode:
        """JSON_NORMALIZE's form, which Spark reproduces; before 10.7 (no JSON_NORMALIZE) as stored."""
        match = re.search(r"(\d+)\.(\d+)", self.version)
        if match and (int(match.group(1)), int(match.group(2))) < (10, 7):
            return JsonMode.AS_STORED
        return JsonMode.NORMALIZED

    def json_text(self, quoted: str) -> str:
        if self.json_mode is JsonMode.NORMALIZED:
            return f"COALESCE(JSON_NORMALIZE({quoted}), CONCAT('!', {quoted}))"
        return super().json_text(quoted)

    def json_columns(self, query: Query, db: str, table: str) -> set[str]:
        """Columns declared JSON: MariaDB stores them as LONGTEXT CHECK (json_valid(`c`))."""
        rows = query(
            "SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s",
            (db, table),
        )
        found = (_JSON_CHECK.fullmatch(str(clause)) for _name, clause in rows)
        return {m.group(1).replace("``", "`") for m in found if m}
