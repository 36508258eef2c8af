"""MySQL/TiDB temporal values: packed DATE/DATETIME/TIMESTAMP (``Time.ToPackedUint``) and TIME durations.

A packed time keeps the calendar fields, not an instant, so values Python cannot hold (``0000-00-00``,
``2020-02-31``, year 0) still round-trip as :class:`PackedTime`. Decoding to Python objects maps those to
``None`` and the caller counts them (docs/architecture.md "Delta conventions": zero dates become NULL and
are counted).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import NamedTuple

from backfill.codec.errors import CodecError

UTC = dt.UTC
MAX_DURATION_NS = ((838 * 3600) + 59 * 60 + 59) * 1_000_000_000  # TIME max 838:59:59
NS_PER_SEC = 1_000_000_000


class PackedTime(NamedTuple):
    """Calendar fields of a DATE/DATETIME/TIMESTAMP exactly as TiDB stores them (any may be 0)."""

    year: int = 0
    month: int = 0
    day: int = 0
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0

    def pack(self) -> int:
        """``((ymd << 17 | hms) << 24) | usec`` with ``ymd = (year*13 + month) << 5 | day``."""
        if not (
            0 <= self.year <= 9999
            and 0 <= self.month <= 12
            and 0 <= self.day <= 31
            and 0 <= self.hour <= 23
            and 0 <= self.minute <= 59
            and 0 <= self.second <= 59
            and 0 <= self.microsecond <= 999_999
        ):
            raise CodecError(f"time fields out of range: {tuple(self)}")
        ymd = ((self.year * 13 + self.month) << 5) | self.day
        hms = (self.hour << 12) | (self.minute << 6) | self.second
        return (((ymd << 17) | hms) << 24) | self.microsecond

    @classmethod
    def unpack(cls, packed: int) -> PackedTime:
        if packed < 0 or packed >> 64:
            raise CodecError(f"packed time {packed} out of uint64 range")
        ymdhms = packed >> 24
        ymd = ymdhms >> 17
        ym = ymd >> 5
        hms = ymdhms & 0x1FFFF
        return cls(ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, packed & 0xFFFFFF)

    def is_zero(self) -> bool:
        return not any(self)

    def __str__(self) -> str:
        s = (
            f"{self.year:04d}-{self.month:02d}-{self.day:02d} "
            f"{self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        )
        return f"{s}.{self.microsecond:06d}" if self.microsecond else s


ZERO_TIME = PackedTime()
"""The zero date/datetime/timestamp ``0000-00-00 00:00:00``: the encoder accepts it; decoding yields None."""


def packed_from_python(value: object, *, fsp: int, is_date: bool, is_timestamp: bool) -> int:
    """Pack a date/datetime/PackedTime/ISO string as TiDB stores it.

    DATETIME/TIMESTAMP microseconds are rounded half-up to the column's fsp, as TiDB does on insert.
    TIMESTAMP is stored in UTC: aware datetimes are converted, naive ones are taken as UTC.
    """
    if isinstance(value, PackedTime):
        return value.pack()
    if isinstance(value, str):
        value = parse_time_text(value)
        if isinstance(value, PackedTime):
            return value.pack()
    if isinstance(value, dt.datetime):
        if is_timestamp and value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        elif value.tzinfo is not None:
            value = value.replace(tzinfo=None)
        if is_date:
            return PackedTime(value.year, value.month, value.day).pack()
        value = round_microseconds(value, fsp)
        return PackedTime(
            value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond
        ).pack()
    if isinstance(value, dt.date):
        return PackedTime(value.year, value.month, value.day).pack()
    raise CodecError(f"cannot store {type(value).__name__} {value!r} as a date/time")


def round_microseconds(value: dt.datetime, fsp: int) -> dt.datetime:
    if fsp >= 6:
        return value
    unit = 10 ** (6 - fsp)
    rem = value.microsecond % unit
    if rem == 0:
        return value
    down = value.replace(microsecond=value.microsecond - rem)
    if rem * 2 >= unit:
        try:
            return down + dt.timedelta(microseconds=unit)
        except OverflowError as e:
            raise CodecError(f"datetime {value} overflows when rounded to fsp {fsp}") from e
    return down


_TIME_TEXT = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6})\d*)?)?$"
)


def parse_time_text(text: str) -> PackedTime:
    """Parse ``YYYY-MM-DD[ HH:MM:SS[.ffffff]]`` (how TiDB writes origin defaults) into calendar fields."""
    m = _TIME_TEXT.match(text.strip())
    if not m:
        raise CodecError(f"cannot parse date/time text {text!r}")
    y, mo, d, h, mi, s, frac = m.groups()
    usec = int((frac or "0").ljust(6, "0"))
    return PackedTime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), usec)


def packed_to_python(packed: int, *, kind: str) -> dt.date | dt.datetime | None:
    """Packed uint -> date (kind 'date'), naive datetime ('datetime') or UTC datetime ('timestamp').

    Returns None for the zero date and for dates Python/Spark cannot hold (zero month/day, year 0,
    Feb 30): callers count those. Raises CodecError for fields no valid encoder writes (hour 24+ ...).
    """
    t = PackedTime.unpack(packed)
    if t.year > 9999 or t.hour > 23 or t.minute > 59 or t.second > 59 or t.microsecond > 999_999:
        raise CodecError(f"packed time {packed:#x} has fields out of range {tuple(t)}")
    try:
        if kind == "date":
            return dt.date(t.year, t.month, t.day)
        tz = UTC if kind == "timestamp" else None
        return dt.datetime(t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond, tzinfo=tz)
    except ValueError:
        return None


def duration_to_text(ns: int, fsp: int) -> str:
    """TIME as MySQL prints it: ``[-]HH:MM:SS[.fff]`` (hours grow to 3 digits), fsp digits, truncated."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    secs, frac_ns = divmod(ns, NS_PER_SEC)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    out = f"{sign}{h:02d}:{m:02d}:{s:02d}"
    if fsp > 0:
        out += "." + f"{frac_ns:09d}"[:fsp]
    return out


_DURATION_TEXT = re.compile(r"^(-)?(\d+):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?$")


def duration_from_python(value: object, fsp: int) -> int:
    """timedelta or ``[-]H:MM:SS[.f]`` text -> nanoseconds, rounded half-up to fsp (as TiDB does)."""
    if isinstance(value, dt.timedelta):
        ns = (value.days * 86400 + value.seconds) * NS_PER_SEC + value.microseconds * 1000
    elif isinstance(value, str):
        m = _DURATION_TEXT.match(value.strip())
        if not m:
            raise CodecError(f"cannot parse TIME text {value!r}")
        neg, h, mi, s, frac = m.groups()
        if int(mi) > 59 or int(s) > 59:
            raise CodecError(f"TIME text {value!r} has minutes/seconds out of range")
        ns = ((int(h) * 3600 + int(mi) * 60 + int(s)) * NS_PER_SEC) + int((frac or "0").ljust(9, "0"))
        ns = -ns if neg else ns
    elif isinstance(value, int) and not isinstance(value, bool):
        ns = value
    else:
        raise CodecError(f"cannot store {type(value).__name__} {value!r} as TIME")
    unit = 10 ** (9 - min(max(fsp, 0), 6))
    mag, rem = divmod(abs(ns), unit)
    if rem * 2 >= unit:
        mag += 1
    ns = mag * unit if ns >= 0 else -mag * unit
    if abs(ns) > MAX_DURATION_NS:
        raise CodecError(f"TIME value {value!r} outside -838:59:59..838:59:59")
    return ns
