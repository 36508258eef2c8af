"""The one error type for bytes that cannot be decoded (or values that cannot be encoded)."""

from __future__ import annotations


class CodecError(ValueError):
    """Bad key or value bytes, or a value the schema cannot hold.

    Carries where it happened so a backfill error can name the row: ``table_id`` and ``handle`` (either
    may be ``None`` when not known yet) and ``offset``, the byte offset into the value (or key) at which
    decoding failed. The message names all three. Decoders never return a partially right row instead.
    """

    def __init__(
        self,
        reason: str,
        *,
        table_id: int | None = None,
        handle: object = None,
        offset: int | None = None,
        column: str | None = None,
    ) -> None:
        self.reason = reason
        self.table_id = table_id
        self.handle = handle
        self.offset = offset
        self.column = column
        super().__init__(self._message())

    def _message(self) -> str:
        where = [
            f"table {self.table_id if self.table_id is not None else '?'}",
            f"handle {self.handle!r}" if self.handle is not None else "handle ?",
            f"offset {self.offset if self.offset is not None else '?'}",
        ]
        if self.column is not None:
            where.append(f"column {self.column!r}")
        return f"{self.reason} ({', '.join(where)})"

    def at(
        self,
        *,
        table_id: int | None = None,
        handle: object = None,
        offset: int | None = None,
        column: str | None = None,
    ) -> CodecError:
        """Return a copy with the missing location fields filled (inner decoders know less than callers)."""
        return CodecError(
            self.reason,
            table_id=self.table_id if self.table_id is not None else table_id,
            handle=self.handle if self.handle is not None else handle,
            offset=self.offset if self.offset is not None else offset,
            column=self.column if self.column is not None else column,
        )

    def __reduce__(self):  # keep pickling (Spark executors) working with keyword-only attrs
        return (_rebuild, (self.reason, self.table_id, self.handle, self.offset, self.column))


def _rebuild(reason, table_id, handle, offset, column) -> CodecError:
    return CodecError(reason, table_id=table_id, handle=handle, offset=offset, column=column)
