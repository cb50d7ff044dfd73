"""Client-side read-ahead: the buffered mode of paper 001, to compare with unbuffered reads."""

from __future__ import annotations

from collections.abc import Sequence

from workers.engine.backends.base import AsyncRecorder, RemoteFile, VectorLimits


class ReadAheadFile(RemoteFile):
    """Reads through a window of `window` bytes: a miss fetches max(size, window) bytes
    from the offset asked for; a hit is served from memory. `bytes_wire` is what the
    inner file fetched, so the data-transferred-vs-needed ratio shows the cost."""

    def __init__(self, inner: RemoteFile, window: int) -> None:
        self._inner = inner
        self._window = window
        self._start = 0
        self._buffer = b""
        self.size = inner.size
        self.served_by = inner.served_by
        self.bytes_wire = inner.bytes_wire

    def read(self, offset: int, size: int) -> bytes:
        start = offset - self._start
        if start >= 0 and start + size <= len(self._buffer):
            return self._buffer[start : start + size]
        fetch = min(max(size, self._window), max(0, self.size - offset))
        self._buffer = self._inner.read(offset, fetch) if fetch else b""
        self._start = offset
        self.bytes_wire = self._inner.bytes_wire
        return self._buffer[:size]

    def readv(self, chunks: Sequence[tuple[int, int]]) -> int:
        raise NotImplementedError("read-ahead applies to sequential, random and skip reads")

    def read_async(
        self, requests: Sequence[tuple[int, int]], depth: int, record: AsyncRecorder
    ) -> None:
        raise NotImplementedError("read-ahead applies to sequential, random and skip reads")

    def vector_limits(self) -> VectorLimits:
        return self._inner.vector_limits()

    def close(self) -> None:
        self._buffer = b""
        self._inner.close()
