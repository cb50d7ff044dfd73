"""HTTP byte ranges: the `Range` header of a vectored read and the `multipart/byteranges` answer.

The parser walks the body by each part's Content-Range length rather than searching for the
boundary, so file data that happens to contain the boundary cannot confuse it (XrdHttp uses
the fixed boundary `123456`). Parts are memoryviews into the body: nothing is copied.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

_BOUNDARY = re.compile(r';\s*boundary\s*=\s*(?:"([^"]+)"|([^;\s]+))', re.IGNORECASE)
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)\s*$", re.IGNORECASE)


class MalformedRanges(ValueError):
    """The server's ranged answer cannot be parsed."""


class MissingRanges(MalformedRanges):
    """The server's ranged answer parses but lacks some of the requested bytes."""


@dataclass(frozen=True)
class Part:
    """One part of a ranged answer: the bytes of the file from `start` on."""

    start: int
    data: memoryview

    @property
    def end(self) -> int:
        return self.start + len(self.data)


def range_header(chunks: Sequence[tuple[int, int]]) -> str:
    """`bytes=a-b,c-d,...` for (offset, size) chunks of at least one byte each."""
    return "bytes=" + ",".join([f"{offset}-{offset + size - 1}" for offset, size in chunks])


def parse_content_range(value: str) -> tuple[int, int, int]:
    """(first, last, total) of `bytes first-last/total`; total is -1 when the server sent `*`."""
    match = _CONTENT_RANGE.match(value.strip())
    if match is None:
        raise MalformedRanges(f"bad Content-Range {value!r}")
    first, last, total = match.groups()
    if int(last) < int(first):
        raise MalformedRanges(f"bad Content-Range {value!r}")
    return int(first), int(last), -1 if total == "*" else int(total)


def unsatisfied_range_total(value: str) -> int | None:
    """The file size in a 416 answer's `bytes */total`, or None."""
    match = _UNSATISFIED_RANGE.match(value.strip())
    return int(match.group(1)) if match else None


def boundary_of(content_type: str) -> bytes:
    match = _BOUNDARY.search(content_type)
    if match is None:
        raise MalformedRanges(f"no boundary in Content-Type {content_type!r}")
    return (match.group(1) or match.group(2)).encode("latin-1")


def parse_byteranges(body: bytes, content_type: str) -> list[Part]:
    """The parts of a `multipart/byteranges` body, in the order the server sent them."""
    delimiter = b"--" + boundary_of(content_type)
    position = body.find(delimiter)  # anything before the first delimiter is preamble
    if position < 0:
        raise MalformedRanges("no multipart boundary in the body")
    view = memoryview(body)
    parts: list[Part] = []
    while True:
        position += len(delimiter)
        if body.startswith(b"--", position):
            return parts
        part, position = _parse_part(body, view, position)
        if not body.startswith(b"\r\n" + delimiter, position):
            raise MalformedRanges(f"part at byte {part.start} is not followed by the boundary")
        parts.append(part)
        position += 2


def _parse_part(body: bytes, view: memoryview, position: int) -> tuple[Part, int]:
    """The part whose delimiter ends at `position`, and where its data ends."""
    line_end = body.find(b"\r\n", position)
    if line_end < 0 or body[position:line_end].strip(b" \t"):
        raise MalformedRanges(f"garbage after the boundary at byte {position}")
    headers_end = body.find(b"\r\n\r\n", line_end)
    if headers_end < 0:
        raise MalformedRanges(f"part headers at byte {position} never end")
    first, last, _ = parse_content_range(_content_range(body[line_end + 2 : headers_end]))
    data_start = headers_end + 4
    data_end = data_start + last - first + 1
    if data_end > len(body):
        raise MalformedRanges(f"part bytes {first}-{last} cut short by the end of the body")
    return Part(first, view[data_start:data_end]), data_end


def _content_range(headers: bytes) -> str:
    for line in headers.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-range":
            return value
    raise MalformedRanges("a part has no Content-Range")


def chunk_views(parts: Sequence[Part], chunks: Sequence[tuple[int, int]]) -> list[memoryview]:
    """The bytes of each (offset, size) chunk, found in `parts` however the server grouped them.

    Servers may coalesce adjacent or overlapping ranges and send parts in any order; a chunk
    that no part fully holds is stitched from several (a copy, only then). A requested byte
    that came back in no part raises MissingRanges.
    """
    ordered = sorted(parts, key=lambda part: part.start)
    starts = [part.start for part in ordered]
    widest = _widest_so_far(ordered)
    views = []
    for offset, size in chunks:
        index = bisect_right(starts, offset) - 1
        part = widest[index] if index >= 0 else None
        if size == 0:
            views.append(memoryview(b""))
        elif part is not None and part.end >= offset + size:
            views.append(part.data[offset - part.start : offset - part.start + size])
        else:
            views.append(_stitch(ordered, offset, offset + size))
    return views


def _widest_so_far(ordered: Sequence[Part]) -> list[Part]:
    """For each index, the part reaching furthest among ordered[0..index]."""
    widest: list[Part] = []
    for part in ordered:
        widest.append(part if not widest or part.end > widest[-1].end else widest[-1])
    return widest


def _stitch(ordered: Sequence[Part], offset: int, end: int) -> memoryview:
    stitched = bytearray()
    position = offset
    for part in ordered:
        if part.start <= position < part.end:
            taken = min(part.end, end)
            stitched += part.data[position - part.start : taken - part.start]
            position = taken
            if position == end:
                return memoryview(bytes(stitched))
    raise MissingRanges(
        f"bytes {position}-{end - 1} (of chunk at {offset}) missing from the answer"
    )
