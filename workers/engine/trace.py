"""A real job's file accesses, as XRootD's client recorder wrote them, ready to replay.

The recorder (XrdClRecorder, XRD_PLUGIN=libXrdClRecorder-5.so XRD_RECORDERPATH=F.csv) writes
one quoted CSV line per XrdCl::File operation when its answer arrives (so lines are in
completion order, not start order):

    "id","action","start","arguments;timeout","end","status","response"

`id` is the File object's address (reused when a File is freed and another made), `start`
and `end` Unix times with nanoseconds, `status` "[SUCCESS]" or "[ERROR] ...". Arguments by
action (XrdClAction.hh): Open "url;flags;mode;timeout", Read and PgRead
"offset;size;timeout", VectorRead "offset;size;offset;size;...;timeout", Close and Sync
"timeout", Stat "force;timeout", Truncate "size;timeout", Fcntl "bytes;timeout". Responses:
Read the bytes delivered, PgRead "bytes;repairs", VectorRead "bytes;offset;size;...".

What a replay keeps (docs/engine.md, "Replaying a recorded job"): the opens, reads, vector
reads and closes of the remote files, in the order they started. Left out, and counted in
`Trace.left_out`: operations that failed when recorded (xrdreplay -f does the same), stats
and fcntls (an open file's stat is answered by the client library itself), and every
operation on a local file (file://: a job's output, xrdcp's destination). A write to a
remote file is refused: a replay only reads.
"""

from __future__ import annotations

import csv
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from urllib.parse import urlsplit

from workers.engine.errors import InvalidParams

# A trace larger than this is refused: replays are planned in memory before the clock.
MAX_TRACE_BYTES = 64 * 1024 * 1024
# XrdCl::OpenFlags that write (Delete, New, Update, Write).
_WRITE_FLAGS = 0x0001 | 0x0008 | 0x0020 | 0x0040
# Actions that change a file: refused on a remote file.
_WRITES = frozenset({"Write", "PgWrite", "VectorWrite", "Truncate", "Sync"})
# Actions a replay leaves out (answered without the server, or nothing to replay).
_LEFT_OUT = frozenset({"Stat", "Fcntl"})
_READS = frozenset({"Read", "PgRead"})
_KNOWN = frozenset({"Open", "Close", "VectorRead"}) | _READS | _WRITES | _LEFT_OUT
_COLUMNS = "id, action, start, arguments, end, status, response"


class OpKind(StrEnum):
    """What one replayed operation does; the names are its latency kinds in the run JSON."""

    OPEN = "open"
    READ = "read"
    READV = "readv"
    CLOSE = "close"


@dataclass(frozen=True)
class TracedOp:
    """One recorded operation: on which open (`handle`, the trace's opens counted from 0),
    when (seconds from the trace's first start), what it asked and what it got."""

    kind: OpKind
    handle: int
    start_s: float
    end_s: float
    # read: one (offset, size); readv: its chunks; open and close: none.
    requests: tuple[tuple[int, int], ...] = ()
    # Bytes the recorded answer delivered (fewer than asked at the end of a file).
    delivered: int = 0
    line: int = 0
    # The job's time between the previous answer on the same open and this operation.
    think_s: float = 0.0


@dataclass(frozen=True)
class Trace:
    """A recorded job: its remote files (URLs in the order it first opened them), which
    file each open is of, and its operations in the order they started."""

    files: tuple[str, ...]
    handle_files: tuple[int, ...]
    ops: tuple[TracedOp, ...]
    # Recorded lines not replayed, by reason ("failed Read", "Stat", "local file").
    left_out: dict[str, int] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        """From the first operation's start to the last one's answer."""
        return max((op.end_s for op in self.ops), default=0.0)

    @property
    def bytes_read(self) -> int:
        return sum(op.delivered for op in self.ops)

    def needed_sizes(self) -> list[int]:
        """Bytes each file must have for every read to get what it got when recorded: a
        read's delivered bytes, a vector read's every chunk (XRootD fails a readv past the
        end of the file)."""
        needed = [0] * len(self.files)
        for op in self.ops:
            file = self.handle_files[op.handle]
            if op.kind == OpKind.READ:
                offset, _ = op.requests[0]
                needed[file] = max(needed[file], offset + op.delivered)
            for offset, size in op.requests if op.kind == OpKind.READV else ():
                needed[file] = max(needed[file], offset + size)
        return needed


def recorded_paths_at(trace: Trace, root_url: str) -> tuple[str, ...]:
    """The trace's files at the same paths on another endpoint (`root://host:port`): what a
    caller passes as a replay's URLs to read the recorded paths there."""
    root = root_url.rstrip("/")
    separator = "/" if urlsplit(root).scheme.startswith("root") else ""
    return tuple(f"{root}{separator}{_recorded_path(url)}" for url in trace.files)


def _recorded_path(url: str) -> str:
    path = urlsplit(url).path
    return "/" + path.lstrip("/")


def load_trace(path: str) -> Trace:
    """Read and check a recorder CSV; InvalidParams("trace", "line N: ...") for a bad one."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise InvalidParams("trace", f"cannot read {path}: {exc.strerror}") from None
    if stat.st_size > MAX_TRACE_BYTES:
        raise InvalidParams(
            "trace", f"{path} has {stat.st_size} bytes, more than {MAX_TRACE_BYTES}"
        )
    return _load_cached(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _load_cached(path: str, _mtime_ns: int, _size: int) -> Trace:
    """One parse per file version and process (the run's parent checks sizes with it)."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return parse_trace(handle)
    except UnicodeDecodeError as exc:
        raise InvalidParams("trace", f"{path} is not UTF-8 text: {exc.reason}") from None
    except OSError as exc:
        raise InvalidParams("trace", f"cannot read {path}: {exc.strerror}") from None


def parse_trace(lines: Iterable[str]) -> Trace:
    """Parse recorder CSV lines (a file or a list of strings)."""
    rows = sorted(_records(lines), key=lambda r: (r.start, r.line))
    if not rows:
        raise InvalidParams("trace", "has no recorded operations")
    return _Builder(rows[0].start).build(rows)


@dataclass(frozen=True)
class _Record:
    line: int
    file_id: int
    action: str
    start: float
    args: list[str]
    end: float
    ok: bool
    response: str


def _records(lines: Iterable[str]) -> Iterator[_Record]:
    reader = csv.reader(lines, strict=True)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # a stray or unclosed quote, an oversized field
            raise InvalidParams("trace", f"line {reader.line_num}: {exc}") from None
        if row and row != [""]:
            yield _record(reader.line_num, row)


def _record(number: int, row: list[str]) -> _Record:
    where = f"line {number}"
    if len(row) == 6:  # xrdreplay accepts a line without its (empty) response too
        row = [*row, ""]
    if len(row) != 7:
        raise InvalidParams(
            "trace", f"{where}: {len(row)} fields, a recorder line has 7 ({_COLUMNS})"
        )
    file_id, action, start, args, end, status, response = row
    if action not in _KNOWN:
        known = ", ".join(sorted(_KNOWN))
        raise InvalidParams("trace", f"{where}: action {action!r} is not one of {known}")
    started, ended = _time(where, "start", start), _time(where, "end", end)
    if ended < started:
        raise InvalidParams("trace", f"{where}: end {end} is before start {start}")
    return _Record(
        line=number,
        file_id=_whole(where, "id", file_id),
        action=action,
        start=started,
        args=args.split(";"),
        end=ended,
        ok=status.startswith("[SUCCESS]"),
        response=response,
    )


class _Builder:
    """Turns records in start order into the trace's files, opens and operations."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.files: dict[str, int] = {}
        self.handle_files: list[int] = []
        # Open File objects by recorder id: their handle, or None for a local file.
        self.open: dict[int, int | None] = {}
        self.ops: list[TracedOp] = []
        self.left_out: Counter[str] = Counter()
        # When the last answer on each open came (seconds from the trace's start).
        self.answered: dict[int, float] = {}

    def build(self, rows: list[_Record]) -> Trace:
        for row in rows:
            self.add(row)
        if not self.ops:
            raise InvalidParams("trace", "opens no remote file (nothing to replay)")
        return Trace(
            tuple(self.files), tuple(self.handle_files), tuple(self.ops), dict(self.left_out)
        )

    def add(self, row: _Record) -> None:
        where = f"line {row.line}"
        if not row.ok:
            self.left_out[f"failed {row.action}"] += 1
            return
        if row.action == "Open":
            self._open(row, where)
            return
        if row.file_id not in self.open:
            raise InvalidParams(
                "trace", f"{where}: {row.action} on file id {row.file_id}, not open at that time"
            )
        handle = self.open[row.file_id]
        if handle is None:
            self.left_out["local file"] += 1
            if row.action == "Close":
                del self.open[row.file_id]
            return
        if row.action in _WRITES:
            url = self.url_of(handle)
            raise InvalidParams("trace", f"{where}: {row.action} to {url}: a replay only reads")
        if row.action in _LEFT_OUT:
            self.left_out[row.action] += 1
            return
        self.ops.append(self._op(row, handle, where))
        if row.action == "Close":
            del self.open[row.file_id]

    def url_of(self, handle: int) -> str:
        return list(self.files)[self.handle_files[handle]]

    def _open(self, row: _Record, where: str) -> None:
        if len(row.args) != 4:
            raise InvalidParams(
                "trace", f"{where}: Open arguments are url;flags;mode;timeout, not {row.args!r}"
            )
        url, flags = row.args[0], _whole(where, "Open flags", row.args[1])
        if row.file_id in self.open:
            raise InvalidParams("trace", f"{where}: Open of file id {row.file_id}, open already")
        if urlsplit(url).scheme.lower() == "file" or "://" not in url:
            self.open[row.file_id] = None
            self.left_out["local file"] += 1
            return
        if flags & _WRITE_FLAGS:
            raise InvalidParams(
                "trace", f"{where}: Open of {url} for writing (flags {flags}): a replay only reads"
            )
        handle = len(self.handle_files)
        self.handle_files.append(self.files.setdefault(url, len(self.files)))
        self.open[row.file_id] = handle
        self.ops.append(self._timed(OpKind.OPEN, row, handle))

    def _op(self, row: _Record, handle: int, where: str) -> TracedOp:
        if row.action == "Close":
            return self._timed(OpKind.CLOSE, row, handle)
        if row.action == "VectorRead":
            return self._readv(row, handle, where)
        if len(row.args) != 3:
            raise InvalidParams("trace", f"{where}: {row.action} arguments are offset;size;timeout")
        offset = _whole(where, f"{row.action} offset", row.args[0])
        size = _whole(where, f"{row.action} size", row.args[1], low=1)
        delivered = _whole(where, f"{row.action} response", row.response.split(";")[0])
        if delivered > size:
            raise InvalidParams(
                "trace", f"{where}: {row.action} response {delivered} is more than size {size}"
            )
        return self._timed(OpKind.READ, row, handle, ((offset, size),), delivered)

    def _readv(self, row: _Record, handle: int, where: str) -> TracedOp:
        numbers = row.args[:-1]
        if not numbers or len(numbers) % 2:
            raise InvalidParams(
                "trace",
                f"{where}: VectorRead arguments are offset;size pairs and a timeout, "
                f"not {len(row.args)} values",
            )
        chunks = tuple(
            (
                _whole(where, f"VectorRead offset {k // 2 + 1}", numbers[k]),
                _whole(where, f"VectorRead size {k // 2 + 1}", numbers[k + 1], low=1),
            )
            for k in range(0, len(numbers), 2)
        )
        delivered = _whole(where, "VectorRead response", row.response.split(";")[0])
        return self._timed(OpKind.READV, row, handle, chunks, delivered)

    def _timed(
        self,
        kind: OpKind,
        row: _Record,
        handle: int,
        requests: tuple[tuple[int, int], ...] = (),
        delivered: int = 0,
    ) -> TracedOp:
        start_s, end_s = row.start - self.t0, row.end - self.t0
        think_s = max(0.0, start_s - self.answered.get(handle, start_s))
        self.answered[handle] = max(end_s, self.answered.get(handle, end_s))
        return TracedOp(kind, handle, start_s, end_s, requests, delivered, row.line, think_s)


def _whole(where: str, name: str, text: str, *, low: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InvalidParams("trace", f"{where}: {name} {text!r} is not a whole number") from None
    if value < low:
        raise InvalidParams("trace", f"{where}: {name} {value} is below {low}")
    return value


def _time(where: str, name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidParams("trace", f"{where}: {name} {text!r} is not a Unix time") from None
    if not 0 <= value < 2**40:
        raise InvalidParams("trace", f"{where}: {name} {text!r} is not a Unix time")
    return value
