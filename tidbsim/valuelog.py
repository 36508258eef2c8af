"""Row payloads (encoded values, packed column maps) spilled to disk, so that memory holds ints.

A hot-table run keeps millions of versions, and a window's transactions all start at once: as Python
bytes their payloads were most of the simulator's memory. A payload is appended to the active segment,
an unlinked temporary file (nothing is left behind, however the run ends), and read back with ``os.pread``
(recent ones from the write buffer): the page cache, not the process, holds what is hot.

A ref is ``(segment << 40 | offset) << 24 | length``; 0 is the empty payload. The store owns what its
versions point at and releases it when they go; whoever else keeps a ref (a pending write, a lock) holds
it. Segments end at each GC: one that is mostly released and held by nobody is emptied (the store moves
its versions' payloads out) and goes, so the disk holds about the live payloads, not all ever written.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

ValueRef = int
_LENGTH_BITS = 24
_LENGTH_MASK = (1 << _LENGTH_BITS) - 1
_OFFSET_BITS = 40
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
_BUFFER_BYTES = 1 << 20


def join_ref(at: int, length: int) -> ValueRef:
    """The ref of ``length`` bytes at ``at`` (a ref's part beside its length, as records keep it)."""
    return at << _LENGTH_BITS | length


def split_ref(ref: ValueRef) -> tuple[int, int]:
    return ref >> _LENGTH_BITS, ref & _LENGTH_MASK


class ValueLog:
    def __init__(self, directory: Path | None = None) -> None:
        self._dir = directory
        self._fds: dict[int, int] = {}  # segment -> its file
        self._size: dict[int, int] = {}  # bytes written, per segment
        self._live: dict[int, int] = {}  # bytes not released yet
        self._held: dict[int, int] = {}  # refs held outside the store
        self._active = -1
        self._buffer = bytearray()
        self._flushed = 0  # bytes of the active segment on disk; the buffer holds the ones after them
        self.rotate()

    def put(self, data: bytes) -> ValueRef:
        """Append ``data``; the caller holds the ref it gets (until the store adopts it, or discards)."""
        n = len(data)
        if not n:
            return 0
        if n > _LENGTH_MASK:
            raise ValueError(f"value log: a payload of {n} bytes is over the {_LENGTH_MASK}-byte limit")
        seg = self._active
        ref = (seg << _OFFSET_BITS | (self._flushed + len(self._buffer))) << _LENGTH_BITS | n
        self._buffer += data
        self._size[seg] += n
        self._live[seg] += n
        self._held[seg] += 1
        if len(self._buffer) >= _BUFFER_BYTES:
            self._flush()
        return ref

    def get(self, ref: ValueRef) -> bytes:
        n = ref & _LENGTH_MASK
        if not n:
            return b""
        at = ref >> _LENGTH_BITS
        seg, offset = at >> _OFFSET_BITS, at & _OFFSET_MASK
        if seg == self._active and offset >= self._flushed:
            offset -= self._flushed
            return bytes(self._buffer[offset : offset + n])
        data = os.pread(self._fds[seg], n, offset)
        if len(data) != n:
            raise OSError(f"value log: short read in segment {seg} at {offset}")
        return data

    def segment(self, ref: ValueRef) -> int:
        return ref >> (_LENGTH_BITS + _OFFSET_BITS)

    def hold(self, ref: ValueRef) -> None:
        if ref:
            self._held[self.segment(ref)] += 1

    def unhold(self, ref: ValueRef) -> None:
        if ref:
            self._held[self.segment(ref)] -= 1

    def release(self, ref: ValueRef) -> None:
        """Nothing will read the payload at ``ref`` after the current capture."""
        if ref:
            self._live[self.segment(ref)] -= ref & _LENGTH_MASK

    def discard(self, ref: ValueRef) -> None:
        """Unhold and release a payload no version adopted."""
        self.unhold(ref)
        self.release(ref)

    def move(self, ref: ValueRef) -> ValueRef:
        """Copy an owned, unheld payload into the active segment; returns its new ref."""
        new = self.put(self.get(ref))
        self.unhold(new)
        self.release(ref)
        return new

    def rotate(self) -> set[int]:
        """Start a new active segment; returns the older ones to empty (mostly released, not held)."""
        if self._active >= 0:
            self._flush()
        self._active += 1
        fd, path = tempfile.mkstemp(dir=self._dir, prefix=".tidelake-sim-values-")
        os.unlink(path)  # the space goes with the descriptor, however the run ends
        self._fds[self._active] = fd
        self._size[self._active] = self._live[self._active] = self._held[self._active] = 0
        self._flushed = 0
        return {
            s
            for s in self._fds
            if s != self._active and not self._held[s] and 2 * self._live[s] <= self._size[s]
        }

    def drop(self, segments: set[int]) -> None:
        """Close segments whose payloads were all released or moved."""
        for seg in segments:
            if self._live[seg] or self._held[seg]:
                raise AssertionError(f"value log: segment {seg} still has {self._live[seg]} live bytes")
            os.close(self._fds.pop(seg))
            del self._size[seg], self._live[seg], self._held[seg]

    def disk_bytes(self) -> int:
        return sum(self._size.values())

    def _flush(self) -> None:
        fd, view = self._fds[self._active], memoryview(self._buffer)
        done = 0
        while done < len(view):
            done += os.write(fd, view[done:])
        view.release()
        self._flushed += len(self._buffer)
        self._buffer.clear()

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


__all__ = ["ValueLog", "ValueRef", "join_ref", "split_ref"]
