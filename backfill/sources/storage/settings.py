"""`[source.storage]`: how the TiCDC storage sink wrote its folder, parsed at the edge (the config loader,
through the `ticdc-storage` registration in this package's `__init__`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from backfill.sources.ticdc.csv_format import CsvOptions


@dataclass(frozen=True)
class StorageSourceConfig:
    """How a TiCDC storage sink wrote its folder (`source.kind = "ticdc-storage"`): the changefeed's
    `protocol`, `[sink]` and `[sink.csv]` settings, with `_` for `-`. CSV must carry commit ts."""

    protocol: Literal["csv", "canal-json"] = "csv"
    date_separator: Literal["none", "year", "month", "day"] = "day"
    terminator: str = "\r\n"
    # The changefeed's time zone: TIMESTAMP values are printed in it (a name like Asia/Shanghai, or +08:00).
    time_zone: str = "UTC"
    delimiter: str = ","
    quote: str = '"'
    null: str = "\\N"
    binary_encoding: Literal["base64", "hex"] = "base64"
    output_field_header: bool = False
    include_commit_ts: bool = True
    output_old_value: bool = False
    output_handle_key: bool = False

    def __post_init__(self) -> None:
        if self.protocol == "csv":
            self.csv_options()  # validates the CSV settings (ConfigError naming the option)

    def csv_options(self) -> CsvOptions:
        return CsvOptions(
            delimiter=self.delimiter, quote=self.quote, null=self.null, terminator=self.terminator,
            binary_encoding=self.binary_encoding, header=self.output_field_header,
            include_commit_ts=self.include_commit_ts, output_old_value=self.output_old_value,
            output_handle_key=self.output_handle_key,
        )  # fmt: skip
