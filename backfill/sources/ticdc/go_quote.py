"""Go's ``strconv.Quote`` and ``strconv.Unquote`` for double-quoted strings, on bytes.

TiCDC's open protocol writes CHAR/VARCHAR/BINARY/VARBINARY values of columns with the Binary flag as
``strconv.Quote(string(bytes))`` with the outer quotes cut off (tiflow ``pkg/sink/codec/internal/column.go``,
ticdc ``pkg/sink/codec/open/codec.go``), and reads them back with ``strconv.Unquote``. Quote keeps printable
runes (``unicode.IsPrint``) as UTF-8 and escapes the rest: ``\\a \\b \\f \\n \\r \\t \\v \\\\ \\"``, ``\\xNN``
for bytes that are not valid UTF-8 and for control runes below U+0080, ``\\uNNNN``/``\\UNNNNNNNN`` for other
non-printable runes. Unquote turns ``\\xNN`` and octal ``\\NNN`` into one raw byte and ``\\u``/``\\U`` into the
rune's UTF-8 bytes, so binary data round-trips exactly.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from typing import cast

_SIMPLE = {
    ord("a"): b"\x07",
    ord("b"): b"\x08",
    ord("f"): b"\x0c",
    ord("n"): b"\n",
    ord("r"): b"\r",
    ord("t"): b"\t",
    ord("v"): b"\x0b",
    ord("\\"): b"\\",
    ord('"'): b'"',
}
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPE_OUT = {0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v"}


# A body with only the escapes Python's ``codecs.escape_decode`` reads as Go does (no \\u, \\U): one C call.
_BYTE_ESCAPED = re.compile(r'[^"\\]*(?:\\(?:[abfnrtv\\"]|x[0-9a-fA-F]{2}|[0-3][0-7]{2})[^"\\]*)*\Z')


def unquote(text: str) -> bytes:
    """The bytes of a Go double-quoted string literal's body (without the quotes). ValueError if malformed."""
    if "\\" not in text:
        if '"' in text:
            raise ValueError("unescaped double quote")
        return text.encode("utf-8")
    if _BYTE_ESCAPED.match(text):
        return cast(bytes, codecs.escape_decode(text.encode("utf-8"))[0])  # typeshed says str; it gives bytes
    raw = text.encode("utf-8")
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        j = raw.find(b"\\", i)
        if j < 0:
            j = n
        chunk = raw[i:j]
        if b'"' in chunk:
            raise ValueError("unescaped double quote")
        out += chunk
        if j == n:
            break
        if j + 1 >= n:
            raise ValueError("dangling backslash at the end")
        c = raw[j + 1]
        if c in _SIMPLE:
            out += _SIMPLE[c]
            i = j + 2
        elif c == ord("x"):
            digits = raw[j + 2 : j + 4]
            if len(digits) != 2 or not set(digits) <= _HEX:
                raise ValueError(f"bad \\x escape at byte {j}")
            out.append(int(digits, 16))
            i = j + 4
        elif c in (ord("u"), ord("U")):
            width = 4 if c == ord("u") else 8
            digits = raw[j + 2 : j + 2 + width]
            if len(digits) != width or not set(digits) <= _HEX:
                raise ValueError(f"bad \\{chr(c)} escape at byte {j}")
            cp = int(digits, 16)
            if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                raise ValueError(f"escape \\{chr(c)}{digits.decode()} is not a valid rune")
            out += chr(cp).encode("utf-8")
            i = j + 2 + width
        elif ord("0") <= c <= ord("7"):
            digits = raw[j + 1 : j + 4]
            if len(digits) != 3 or not all(ord("0") <= d <= ord("7") for d in digits):
                raise ValueError(f"bad octal escape at byte {j}")
            v = int(digits, 8)
            if v > 255:
                raise ValueError(f"octal escape out of range at byte {j}")
            out.append(v)
            i = j + 4
        else:
            raise ValueError(f"unknown escape \\{chr(c)} at byte {j}")
    return bytes(out)


def _printable(ch: str) -> bool:
    """Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space."""
    if ch == " ":
        return True
    return unicodedata.category(ch)[0] in "LMNPS"


_PLAIN_ASCII = re.compile(r"[ !#-\[\]-~]*\Z")


def quote(data: bytes) -> str:
    """``strconv.Quote(string(data))`` without the surrounding quotes (what TiCDC writes)."""
    try:
        text = data.decode("ascii")
        if _PLAIN_ASCII.match(text):
            return text
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    ch: str | None
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b < 0x80:
            ch = chr(b)
            if ch in '"\\':
                out.append("\\" + ch)
            elif b in _ESCAPE_OUT:
                out.append(_ESCAPE_OUT[b])
            elif b < 0x20 or b == 0x7F:
                out.append(f"\\x{b:02x}")
            else:
                out.append(ch)
            i += 1
            continue
        width = 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF else 4 if 0xF0 <= b <= 0xF4 else 0
        ch = None
        if width and i + width <= n:
            try:
                ch = data[i : i + width].decode("utf-8")
            except UnicodeDecodeError:
                ch = None
        if ch is None:
            out.append(f"\\x{b:02x}")
            i += 1
            continue
        cp = ord(ch)
        if _printable(ch):
            out.append(ch)
        elif cp < 0x10000:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(f"\\U{cp:08x}")
        i += width
    return "".join(out)
