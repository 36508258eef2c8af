"""The Delta sink: one typed operation commits a table's changes under the job's transaction id
(docs/architecture.md "The commit contract")."""

from backfill.sink.commit import (
    Advance,
    Append,
    Committed,
    Merge,
    Replace,
    Rewrite,
    TableChange,
    Txn,
    commit,
)

__all__ = ["Advance", "Append", "Committed", "Merge", "Replace", "Rewrite", "TableChange", "Txn", "commit"]
