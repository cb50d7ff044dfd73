"""What a client does beyond reads: writes (and their delete) and metadata storms.

Same rules as the read loops in client.py: everything is prepared before the clock (the
bytes to write and their adler32, the metadata calls), and the loops do nothing per
operation but the call, a perf_counter_ns pair, an array append and the progress count (and
once a second the deadline's time left that each call carries: deadline.Countdown).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import random
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from workers.engine.backends.base import MetadataCall, WritableFile
from workers.engine.deadline import Countdown, Deadline
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.params import RunParams

if TYPE_CHECKING:
    from workers.engine.client import Client

# A write's bytes repeat with this period: distinct enough that no storage deduplicates or
# compresses them away, small enough for 256 clients in one host's memory.
WRITE_PATTERN_BYTES = 1024 * 1024
# Seconds a delete (and the cleanup) may take after a failure, the deadline or a SIGTERM.
DELETE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class WriteSource:
    """The bytes every file of a run is written with, as write requests of read_size bytes:
    `full` requests cycling over `chunks`, then `tail` (what is left of file_size), and the
    adler32 of the whole (8 hex digits), all computed before the clock."""

    chunks: tuple[bytes, ...]
    full: int
    tail: bytes
    adler32: str

    @classmethod
    def of(cls, params: RunParams) -> WriteSource:
        size, request = params.file_size, params.read_size
        rng = random.Random(params.seed)
        count = max(1, math.ceil(min(size, WRITE_PATTERN_BYTES) / request))
        chunks = tuple(rng.randbytes(request) for _ in range(count))
        full, left = divmod(size, request)
        source = cls(chunks, full, chunks[full % count][:left], "")
        adler = 1
        for data in source.requests():
            adler = zlib.adler32(data, adler)
        return replace(source, adler32=f"{adler:08x}")

    def requests(self) -> Iterator[bytes]:
        yield from itertools.islice(itertools.cycle(self.chunks), self.full)
        if self.tail:
            yield self.tail


class Sigterm:
    """SIGTERM (the run cancelled, or past its deadline) ends what the client does as a
    failure of class cancelled, so that its `finally` clauses run (a write's delete); while
    a delete runs it is held back, then raised once the delete is done."""

    def __init__(self) -> None:
        self.received = False
        self.raised = False
        self.held = False

    def handle(self, signum: int, frame: object) -> None:
        self.received = True
        if not self.held:
            self.raise_once()

    def raise_once(self) -> None:
        if self.received and not self.raised:
            self.raised = True
            raise ProbeError(ErrorClass.CANCELLED, "stopped (SIGTERM) by the run")

    @contextlib.contextmanager
    def held_back(self) -> Iterator[None]:
        self.held = True
        try:
            yield
        finally:
            self.held = False


# The client process's one handler (client_main installs it).
SIGTERM = Sigterm()


def past_deadline(client: Client, exc: ProbeError) -> ProbeError:
    """A failure once the deadline has passed is the deadline's (class timeout): XrdCl,
    its stream timed out, reconnects and the server no longer knows the open file (3004)."""
    if exc.error_class == ErrorClass.CANCELLED or client.options.deadline.remaining() > 0:
        return exc
    return ProbeError(ErrorClass.TIMEOUT, f"deadline passed: {exc.message}")


# -- writes ----------------------------------------------------------------------------


def run_write(client: Client) -> None:
    """Each target is a file to create: written, committed, checked, deleted."""
    for target in client.spec.targets:
        _write_one(client, target.url)


def _write_one(client: Client, url: str) -> None:
    unfinished: WritableFile | None = None
    try:
        unfinished = _create(client, url)
        _write(client, unfinished)
        file, unfinished = unfinished, None
        _commit(client, file)
        _verify(client, url)
        client.result.files_done += 1
    except BaseException:
        _delete(client, url, quiet=True, unfinished=unfinished)
        raise
    _delete(client, url, quiet=False, unfinished=None)


def _create(client: Client, url: str) -> WritableFile:
    started = client.now()
    try:
        file = client.backend.create(url, client.params.file_size, client.options)
    finally:  # a refused create is still the open the run measured
        ended = client.now()
        client.result.add_phase("open", started, ended)
        client.result.open_s += ended - started
        client.latencies("open").append(int((ended - started) * 1e9))
    client.note_served_by(file.served_by)
    return file


def _write(client: Client, file: WritableFile) -> None:
    """The write loop: one acknowledged request after the other, as XrdCl's sync write."""
    record, write, clock = client.latencies("write").append, file.write, time.perf_counter_ns
    progress, slot, written = client.progress, client.spec.client, client.result.bytes_written
    assert client.source is not None
    countdown, timeout_s, fewer_at = Countdown(client.options.deadline), 1, 0
    offset, first_ns = 0, 0
    started = client.now()
    try:
        for data in client.source.requests():
            begun = clock()
            if begun >= fewer_at:
                timeout_s, fewer_at = countdown.at(begun)
            write(offset, data, timeout_s)
            ended = clock()
            record(ended - begun)
            if not first_ns:
                first_ns = ended
            offset += len(data)
            written += len(data)
            progress[slot] = written
    except ProbeError as exc:
        raise past_deadline(client, exc) from None
    finally:
        client.result.bytes_written = written
        done = client.now()
        client.result.add_phase("write", started, done)
        client.result.write_s += done - started
        if client.result.ttfb_s is None and first_ns:
            client.result.ttfb_s = first_ns / 1e9 - client.t0


def _commit(client: Client, file: WritableFile) -> None:
    started = client.now()
    try:
        file.close()
    finally:
        ended = client.now()
        client.result.add_phase("close", started, ended)
        client.result.close_s += ended - started
        client.latencies("close").append(int((ended - started) * 1e9))


def _verify(client: Client, url: str) -> None:
    """What the server stored, by its own checksum (class checksum when it differs)."""
    assert client.source is not None
    started = client.now()
    stored = client.backend.checksum(url, client.options)
    client.result.add_phase("checksum", started, client.now())
    expected = client.source.adler32
    if client.result.server_checksum is None or stored != expected:
        client.result.server_checksum = f"adler32:{stored}"
    client.result.checksum = "ok" if stored == expected else "mismatch"
    if stored != expected:
        raise ProbeError(
            ErrorClass.CHECKSUM,
            f"the server's adler32 of {url} is {stored}, the bytes written have {expected}",
        )


def _delete(client: Client, url: str, *, quiet: bool, unfinished: WritableFile | None) -> None:
    """Delete the file, whatever happened before, within DELETE_TIMEOUT_S past the deadline
    and deaf to another SIGTERM. After a failure (`quiet`), a delete that fails (the create
    never happened) does not hide the failure; after a success, it fails the client."""
    with SIGTERM.held_back():
        if unfinished is not None:  # nothing more of it may land after the delete
            unfinished.abort()
        _delete_now(client, url, quiet=quiet)
    if not quiet:
        SIGTERM.raise_once()


def _delete_now(client: Client, url: str, *, quiet: bool) -> None:
    deadline = Deadline.after(max(client.options.deadline.remaining(), DELETE_TIMEOUT_S))
    options = replace(client.options, deadline=deadline)
    started = client.now()
    try:
        client.backend.delete(url, options)
    except ProbeError as exc:
        if not quiet and exc.error_class != ErrorClass.NOT_FOUND:
            raise ProbeError(exc.error_class, f"left behind: {exc.message}") from None
    finally:
        ended = client.now()
        client.result.add_phase("delete", started, ended)
        client.latencies("delete").append(int((ended - started) * 1e9))


# -- metadata storms -----------------------------------------------------------------


def run_metadata(client: Client) -> None:
    """`ops` operations cycling over the client's URLs, flat out or paced by `rate`."""
    kind = str(client.params.operation)
    calls = [
        client.backend.metadata_call(kind, target.url, client.options)
        for target in client.spec.targets
    ]
    record = client.latencies(kind).append
    ops, rate = client.params.ops, client.params.rate
    started = client.now()
    try:
        if rate:
            _storm_paced(client, calls, ops, rate, record)
        else:
            _storm(client, calls, ops, record)
    except ProbeError as exc:
        raise past_deadline(client, exc) from None
    finally:
        client.result.add_phase(kind, started, client.now())


def _storm(
    client: Client, calls: Sequence[MetadataCall], ops: int, record: Callable[[int], None]
) -> None:
    progress, slot, clock = client.progress, client.spec.client, time.perf_counter_ns
    countdown, timeout_s, fewer_at = Countdown(client.options.deadline), 1, 0
    for done, call in enumerate(itertools.islice(itertools.cycle(calls), ops), 1):
        started = clock()
        if started >= fewer_at:
            timeout_s, fewer_at = countdown.at(started)
        call(timeout_s)
        ended = clock()
        record(ended - started)
        progress[slot] = done


def _storm_paced(
    client: Client,
    calls: Sequence[MetadataCall],
    ops: int,
    rate: float,
    record: Callable[[int], None],
) -> None:
    """Operation k starts at k / rate seconds from the first, or at once when behind that
    schedule (a slow answer is caught up on, not carried into every later operation, as a
    sleep between operations would)."""
    progress, slot, clock = client.progress, client.spec.client, time.perf_counter_ns
    countdown, timeout_s, fewer_at = Countdown(client.options.deadline), 1, 0
    sleep = time.sleep
    interval_ns = 1e9 / rate
    first = clock()
    for done, call in enumerate(itertools.islice(itertools.cycle(calls), ops)):
        wait_ns = first + done * interval_ns - clock()
        if wait_ns > 0:
            sleep(wait_ns / 1e9)
        started = clock()
        if started >= fewer_at:
            timeout_s, fewer_at = countdown.at(started)
        call(timeout_s)
        ended = clock()
        record(ended - started)
        progress[slot] = done + 1
