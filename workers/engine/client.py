"""One client of a run: runs in its own process, does its operation, reports.

A read opens, reads its plan, closes; a write creates, writes, commits, asks the server's
checksum and deletes (always: also after a failure, the deadline or SIGTERM); a metadata
storm stats, opens and closes, or lists its URLs `ops` times (client_ops.py has those two).
The loops are the measurement: they do nothing per operation but the call, time it,
append the latency to an array and publish the count for the progress bar. Latencies
are folded into histograms after the client's clock has stopped.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
import traceback
import zlib
from array import array
from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import astuple, dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

from workers.engine.backends import backend_for
from workers.engine.backends.base import Backend, OpenOptions, RemoteFile
from workers.engine.backends.local import LOCAL_VECTOR_LIMITS, LocalBackend
from workers.engine.client_ops import SIGTERM, WriteSource, run_metadata, run_write
from workers.engine.credentials import Access
from workers.engine.deadline import Deadline
from workers.engine.egress_guard import client_label
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.families import endpoint_port, peer_address
from workers.engine.metrics import ClientError, ClientResult, op_kinds
from workers.engine.params import (
    METADATA_OPERATIONS,
    TPC_OPERATIONS,
    Method,
    Operation,
    Pattern,
    RunParams,
)
from workers.engine.patterns import Request, client_seed, plan_requests, vector_batches
from workers.engine.processes import die_with
from workers.engine.readahead import ReadAheadFile
from workers.engine.replay import Replay
from workers.engine.tpc import run_third_party_copies


class ReleaseEvent(Protocol):
    def wait(self, timeout: float | None = None) -> bool: ...


class ResultSink(Protocol):
    def send(self, obj: object) -> None: ...


@dataclass(frozen=True)
class FileTarget:
    """One file a client reads: its URL, its size (from the preflight) and read plan seed."""

    url: str
    size: int
    index: int


@dataclass(frozen=True)
class Plan:
    """One file's requests, and for vector reads the same requests grouped into readvs."""

    requests: list[Request]
    batches: list[list[Request]]

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.requests)


@dataclass(frozen=True)
class ClientSpec:
    """Everything a client process needs; picklable."""

    params: RunParams
    client: int
    targets: tuple[FileTarget, ...]
    deadline_s: float
    scratch: str
    vector_limits: tuple[int, int] | None
    start_timeout_s: float
    access: Access = field(default_factory=Access)
    # The process running the run: the client ends when it is gone.
    run_pid: int = field(default_factory=os.getpid)


# What a client sends its parent once it is prepared and waiting for the release.
READY = "ready"


def client_main(
    spec: ClientSpec, release: ReleaseEvent, progress: MutableSequence[int], sink: ResultSink
) -> None:
    """Process entry point: prepare, say ready, wait for the release, measure, report."""
    # A process group of its own: the run can stop this client and any copy tool it runs.
    os.setpgid(0, 0)
    die_with(spec.run_pid)
    signal.signal(signal.SIGTERM, SIGTERM.handle)
    spec.access.apply_environment()
    result = ClientResult(client=spec.client, op_kinds=op_kinds(str(spec.params.operation)))
    try:
        if spec.access.guard is not None:
            spec.access.guard.attach(client_label(spec.client))
        client = Client(spec, result, progress)
        sink.send(READY)
        if release.wait(timeout=spec.start_timeout_s):
            client.run()
        else:
            result.error = ClientError(ErrorClass.CANCELLED, "never released", 0.0)
    except ProbeError as exc:
        result.error = ClientError(exc.error_class, exc.message, round(result.wall_s, 6))
    except Exception as exc:  # a bug of ours must still end the run with a record
        traceback.print_exc()
        message = f"client failed: {type(exc).__name__}: {exc}"
        result.error = ClientError(ErrorClass.SERVER_ERROR, message, round(result.wall_s, 6))
    finally:
        # Its clock has stopped: which address its connection went to, from the OS.
        result.address = peer_address(endpoint_port(spec.params.urls[0]))
        sink.send(result)


class Client:
    """The measurement of one client; `run` is timed from the moment of release."""

    def __init__(self, spec: ClientSpec, result: ClientResult, progress: MutableSequence[int]):
        self.spec = spec
        self.params = spec.params
        self.result = result
        self.progress = progress
        self.backend: Backend = backend_for(self.params.scheme)
        self.backend.prepare(spec.access)
        reads = self.params.operation == Operation.READ
        self.plans = [self._plan(target) for target in spec.targets] if reads else []
        writes = self.params.operation == Operation.WRITE
        self.source = WriteSource.of(self.params) if writes else None
        self.replay = Replay(self.params) if self.params.operation == Operation.REPLAY else None
        self.expected_adler32 = dict(self.params.adler32)
        self.delivered = 0
        self.opened: list[RemoteFile] = []
        self.samples: dict[str, array[int]] = {}
        self.t0 = 0.0
        # When the current read phase's first byte arrived (perf_counter_ns; 0: not yet).
        self.first_ns = 0

    def _plan(self, target: FileTarget) -> Plan:
        """Made before the release, so planning is never part of a timed phase."""
        p = self.params
        requests = plan_requests(
            p.pattern,
            file_size=target.size,
            read_size=p.read_size,
            fraction=p.fraction,
            skip=p.skip,
            seed=client_seed(p.seed, self.spec.client, target.index),
        )
        batches = []
        if p.pattern == Pattern.VECTOR:
            limits = self.spec.vector_limits if p.method == Method.DIRECT else None
            max_chunks, max_chunk_bytes = limits or astuple(LOCAL_VECTOR_LIMITS)
            batches = vector_batches(requests, p.vector_size, max_chunks, max_chunk_bytes)
        return Plan(requests, batches)

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def run(self) -> None:
        self.t0 = time.perf_counter()
        cpu_start = resource.getrusage(resource.RUSAGE_SELF)  # microseconds, not clock ticks
        deadline = Deadline.after(self.spec.deadline_s)
        self.options = OpenOptions(
            user=f"fp{os.getpid()}c{self.spec.client}",
            streams=self.params.streams,
            deadline=deadline,
            egress=self.params.egress,
            access=self.spec.access,
        )
        try:
            self._runner()()
        finally:
            self.result.wall_s = self.now()
            self.result.bytes_read = self.delivered
            self.result.bytes_wire += sum(file.bytes_wire for file in self.opened)
            cpu_end = resource.getrusage(resource.RUSAGE_SELF)
            self.result.cpu_user_s = cpu_end.ru_utime - cpu_start.ru_utime
            self.result.cpu_sys_s = cpu_end.ru_stime - cpu_start.ru_stime
            for kind, latencies in self.samples.items():
                self.result.histogram(kind).record_all(latencies)
            self.progress[self.spec.client] = self.delivered

    def _runner(self) -> Callable[[], None]:
        """What the client does, by the run's operation: the one place to add one."""
        operation = self.params.operation
        if operation == Operation.READ:
            return {
                Method.DIRECT: self._run_direct,
                Method.COPY: self._run_copy,
                Method.STAGE: self._run_stage,
            }[self.params.method]
        if operation in TPC_OPERATIONS:
            return partial(run_third_party_copies, self)
        if operation == Operation.REPLAY:
            assert self.replay is not None
            return partial(self.replay.run, self)
        if operation == Operation.WRITE:
            return partial(run_write, self)
        if operation in METADATA_OPERATIONS:
            return partial(run_metadata, self)
        raise ProbeError(ErrorClass.HARNESS, f"this engine does not do {operation} yet")

    # -- methods -------------------------------------------------------------------------

    def _run_direct(self) -> None:
        for target, plan in zip(self.spec.targets, self.plans, strict=True):
            file = self._open(self.backend, target.url)
            self._read(file, plan, self._checksum_to_verify(plan, target))
            self._close(file)
            self.result.files_done += 1

    def _run_copy(self) -> None:
        for target, plan in zip(self.spec.targets, self.plans, strict=True):
            local = self._copy(target)
            self._read_local(local, plan, target)

    def _run_stage(self) -> None:
        """FileStager (paper 001): copy file k+1 in the background while file k is read."""
        targets, plans = self.spec.targets, self.plans
        local = self._copy(targets[0])
        for k, (target, plan) in enumerate(zip(targets, plans, strict=True)):
            stager = None
            if k + 1 < len(targets):
                stager = _Stager(self, targets[k + 1])
                stager.start()
            try:
                self._read_local(local, plan, target)
            except BaseException:
                if stager is not None:
                    stager.abandon()
                raise
            if stager is not None:
                local = stager.finish()

    def _copy(self, target: FileTarget) -> Path:
        dest = Path(self.spec.scratch) / f"file-{target.index}"
        started = self.now()
        try:
            copied = self.backend.copy_to_local(target.url, dest, self.options)
        except ProbeError as exc:  # what a failed copy moved is still moved over the wire
            self.result.bytes_wire += exc.bytes_received
            raise
        ended = self.now()
        self.result.add_phase("copy", started, ended)
        self.result.copy_s += ended - started
        self.latencies("copy").append(int((ended - started) * 1e9))
        self.result.bytes_wire += copied.bytes_copied
        self.note_served_by(copied.served_by or self.backend.copy_source(target.url, self.options))
        if copied.bytes_copied != target.size:
            raise ProbeError(
                ErrorClass.SHORT_READ,
                f"copy of {target.url} gave {copied.bytes_copied} of {target.size} bytes",
            )
        return dest

    def _read_local(self, local: Path, plan: Plan, target: FileTarget) -> None:
        try:
            file = self._open(LocalBackend(), local.as_uri(), remote=False)
            self._read(file, plan, None)
            self._close(file)
            expected = self.expected_adler32.get(target.url)
            if expected is not None:
                self._check_adler32(_adler32_of(local), expected, f"the copy of {target.url}")
            self.result.files_done += 1
        finally:
            local.unlink(missing_ok=True)

    # -- phases ------------------------------------------------------------------------

    def _open(self, backend: Backend, url: str, *, remote: bool = True) -> RemoteFile:
        started = self.now()
        file = backend.open(url, self.options)
        ended = self.now()
        self.result.add_phase("open", started, ended)
        self.latencies("open").append(int((ended - started) * 1e9))
        if remote:
            # The endpoint's connect and open only: a copy's local file opens in microseconds
            # and would read as an endpoint that opens in no time (the copy tool's own open
            # of the remote file is part of copy_s, out of sight).
            self.result.open_s += ended - started
        for phase, seconds in file.open_phases.items():
            self.result.open_phases_s[phase] = self.result.open_phases_s.get(phase, 0.0) + seconds
        if remote:
            self.note_served_by(file.served_by)
            self.opened.append(file)
        if self.params.readahead:
            return ReadAheadFile(file, self.params.readahead)
        return file

    def _close(self, file: RemoteFile) -> None:
        started = self.now()
        file.close()
        ended = self.now()
        self.result.add_phase("close", started, ended)
        self.result.close_s += ended - started
        self.latencies("close").append(int((ended - started) * 1e9))

    def _read(self, file: RemoteFile, plan: Plan, adler32: str | None) -> None:
        pattern = self.params.pattern
        self.result.bytes_requested += plan.bytes
        started = self.now()
        self.first_ns = 0
        try:
            if pattern == Pattern.VECTOR:
                self._read_vector(file, plan.batches)
            elif pattern == Pattern.ASYNC:
                self._read_async(file, plan.requests)
            else:
                self._read_sync(file, plan.requests, adler32)
        finally:  # a failed read phase is still part of the timeline, its first byte too
            ended = self.now()
            self.result.add_phase("read", started, ended)
            self.result.read_s += ended - started
            if self.result.ttfb_s is None and self.first_ns:
                self.result.ttfb_s = (self.first_ns / 1e9) - self.t0

    # -- the read loops: each leaves when its first byte arrived in first_ns (perf_counter_ns),
    # -- even when it fails (a checksum mismatch after every read, a cut mid-read) --------

    def _read_sync(self, file: RemoteFile, plan: Sequence[Request], adler32: str | None) -> None:
        record, read, clock = self.latencies("read").append, file.read, time.perf_counter_ns
        progress, slot, delivered = self.progress, self.spec.client, self.delivered
        adler, first_ns, verify = 1, 0, adler32 is not None
        try:
            for offset, size in plan:
                started = clock()
                data = read(offset, size)
                ended = clock()
                record(ended - started)
                if len(data) != size:
                    raise _short_read(offset, size, len(data))
                if verify:
                    adler = zlib.adler32(data, adler)
                if not first_ns:
                    first_ns = ended
                delivered += size
                progress[slot] = delivered
        except ProbeError as exc:
            delivered += exc.bytes_received
            progress[slot] = delivered
            raise
        finally:
            self.delivered, self.first_ns = delivered, first_ns
        if adler32 is not None:
            self._check_adler32(adler, adler32, "the bytes read")

    def _read_vector(self, file: RemoteFile, batches: Sequence[list[Request]]) -> None:
        record, readv, clock = self.latencies("readv").append, file.readv, time.perf_counter_ns
        progress, slot, delivered = self.progress, self.spec.client, self.delivered
        first_ns = 0
        try:
            for batch in batches:
                started = clock()
                n_bytes = readv(batch)
                ended = clock()
                record(ended - started)
                expected = sum(size for _, size in batch)
                if n_bytes != expected:
                    raise ProbeError(ErrorClass.SHORT_READ, f"readv gave {n_bytes} of {expected} B")
                if not first_ns:
                    first_ns = ended
                delivered += n_bytes
                progress[slot] = delivered
        except ProbeError as exc:
            delivered += exc.bytes_received
            progress[slot] = delivered
            raise
        finally:
            self.delivered, self.first_ns = delivered, first_ns

    def _read_async(self, file: RemoteFile, plan: Sequence[Request]) -> None:
        record_latency, clock = self.latencies("async_read").append, time.perf_counter_ns
        progress, slot = self.progress, self.spec.client
        state = [self.delivered, 0]  # bytes delivered, first byte (ns)

        def record(latency_ns: int, n_bytes: int) -> None:
            record_latency(latency_ns)
            state[0] += n_bytes
            progress[slot] = state[0]
            if not state[1]:
                state[1] = clock()

        started_with = self.delivered
        try:
            file.read_async(plan, self.params.depth, record)
        finally:
            self.delivered, self.first_ns = state
        expected = sum(size for _, size in plan)
        if state[0] - started_with != expected:
            got = state[0] - started_with
            raise ProbeError(ErrorClass.SHORT_READ, f"async reads gave {got} of {expected} B")

    def _check_adler32(self, adler: int, expected: str, what: str) -> None:
        self.result.checksum = _checksum_verdict(adler, expected)
        if self.result.checksum == "mismatch":
            raise ProbeError(ErrorClass.CHECKSUM, f"adler32 of {what} differs from the expected")

    # -- helpers -----------------------------------------------------------------------

    def _checksum_to_verify(self, plan: Plan, target: FileTarget) -> str | None:
        """The file's known adler32 when the reads cover the whole file in order."""
        whole_in_order = (
            self.params.pattern == Pattern.SEQUENTIAL
            and not self.params.readahead
            and plan.bytes == target.size
        )
        return self.expected_adler32.get(target.url) if whole_in_order else None

    def latencies(self, kind: str) -> array[int]:
        """The latencies (ns) of one operation kind, folded into histograms after the clock."""
        if kind not in self.samples:
            self.samples[kind] = array("q")
        return self.samples[kind]

    def note_served_by(self, server: str) -> None:
        """Add a server the client's data came from (or went to) to its record."""
        if server not in self.result.served_by:
            self.result.served_by.append(server)


class _Stager:
    """Copies the next file of a collection on a thread while the current one is read."""

    def __init__(self, client: Client, target: FileTarget) -> None:
        self._client = client
        self._target = target
        self._local: Path | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._copy, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _copy(self) -> None:
        try:
            self._local = self._client._copy(self._target)
        except BaseException as exc:
            self._error = exc

    def abandon(self) -> None:
        """The read failed: wait for the copy (bounded by the deadline) and drop it."""
        self._thread.join()
        if self._local is not None:
            self._local.unlink(missing_ok=True)

    def finish(self) -> Path:
        started = self._client.now()
        self._thread.join()
        self._client.result.add_phase("stage-wait", started, self._client.now())
        if self._error is not None:
            raise self._error
        assert self._local is not None
        return self._local


def _short_read(offset: int, size: int, got: int) -> ProbeError:
    return ProbeError(ErrorClass.SHORT_READ, f"read at {offset} gave {got} of {size} bytes")


def _adler32_of(path: Path) -> int:
    adler = 1
    with path.open("rb") as handle:
        while chunk := handle.read(4 * 1024 * 1024):
            adler = zlib.adler32(chunk, adler)
    return adler


def _checksum_verdict(adler: int, expected: str) -> str:
    return "ok" if f"{adler:08x}" == expected.lower() else "mismatch"
