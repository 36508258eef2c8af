"""TiDB timestamps (TSO): `physical_ms << 18 | logical`."""

from __future__ import annotations

from datetime import UTC, datetime

LOGICAL_BITS = 18
_LOGICAL_MASK = (1 << LOGICAL_BITS) - 1


def compose_ts(physical_ms: int, logical: int = 0) -> int:
    """The TSO for a unix time in milliseconds and a logical counter."""
    if not 0 <= logical <= _LOGICAL_MASK:
        raise ValueError(f"logical part {logical} does not fit in {LOGICAL_BITS} bits")
    return (physical_ms << LOGICAL_BITS) | logical


def physical_ms(ts: int) -> int:
    """Unix milliseconds of a TSO."""
    return ts >> LOGICAL_BITS


def logical(ts: int) -> int:
    return ts & _LOGICAL_MASK


def ts_to_datetime(ts: int) -> datetime:
    """The UTC wall-clock time a TSO stands for (millisecond precision)."""
    return datetime.fromtimestamp(physical_ms(ts) / 1000, tz=UTC)


def ts_from_datetime(moment: datetime, logical_part: int = 0) -> int:
    """The TSO of a wall-clock time; naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return compose_ts(round(moment.timestamp() * 1000), logical_part)


def format_ts(ts: int) -> str:
    """`ts (YYYY-MM-DD HH:MM:SS.mmm UTC)` for reports."""
    return f"{ts} ({ts_to_datetime(ts).strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]} UTC)"
