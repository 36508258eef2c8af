"""``large-message-handle-compression`` of TiCDC's open protocol: none, snappy or lz4, on values only.

tiflow ``pkg/compression/compress.go`` (ticdc's copy is the same): snappy is
``klauspost/compress/snappy.Encode``, the raw *block* format (no stream framing, no CRC), and lz4 is
``pierrec/lz4/v4``'s ``NewWriter``, the LZ4 *frame* format (magic 04 22 4D 18). cramjam implements both.
"""

from __future__ import annotations

import cramjam

NONE, SNAPPY, LZ4 = "none", "snappy", "lz4"
CODECS = (NONE, SNAPPY, LZ4)


def check_codec(codec: str) -> str:
    """The codec name, validated (TiCDC's names, case-sensitive like ``compression.Supported``)."""
    if codec not in CODECS:
        raise ValueError(f"unknown compression {codec!r}; known: {', '.join(CODECS)}")
    return codec


def decompress(codec: str, data: bytes) -> bytes:
    """Undo TiCDC's value compression. Raises ValueError on corrupt input."""
    if codec == NONE:
        return data
    try:
        if codec == SNAPPY:
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
    except cramjam.DecompressionError as e:
        raise ValueError(f"{codec} decompression failed: {e}") from None
    raise ValueError(f"unknown compression {codec!r}; known: {', '.join(CODECS)}")


def compress(codec: str, data: bytes) -> bytes:
    """What TiCDC's encoder does to a value (the simulator uses it)."""
    if codec == NONE:
        return data
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    raise ValueError(f"unknown compression {codec!r}; known: {', '.join(CODECS)}")
