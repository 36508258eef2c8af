from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tidelake.tso import compose_ts, format_ts, logical, physical_ms, ts_from_datetime, ts_to_datetime

pytestmark = pytest.mark.unit


def test_tso_layout_is_physical_ms_shifted_18_bits() -> None:
    ts = compose_ts(1_700_000_000_123, 5)
    assert ts == (1_700_000_000_123 << 18) | 5
    assert physical_ms(ts) == 1_700_000_000_123 and logical(ts) == 5


def test_tso_utc_time_round_trip() -> None:
    moment = datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    ts = ts_from_datetime(moment, 9)
    assert ts_to_datetime(ts) == moment
    assert format_ts(ts).endswith("(2024-01-02 03:04:05.678 UTC)")


def test_logical_part_must_fit() -> None:
    with pytest.raises(ValueError, match="18 bits"):
        compose_ts(1, 1 << 18)
