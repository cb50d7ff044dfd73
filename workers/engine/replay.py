"""Replaying a recorded job (trace.py) through a backend, as one client of a run.

Everything is planned before the clock starts: which URL each recorded open reads, and the
steps in the order the job started them. Reads on one open that overlapped in the
recording (each started before the one before had its answer) were the job's asynchronous
reads: they become one step of async reads with as many outstanding as the job had. The
loop then does, per step, the call, a perf_counter_ns pair and an append; in "recorded"
timing it first sleeps until the step's recorded start (from the client's release) and
appends how late it is.

One client replays the trace's steps one after another: operations the job ran at the same
time on different files are serialized, and the lag shows what that cost.
"""

from __future__ import annotations

import contextlib
import math
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from workers.engine.backends.base import AsyncRecorder, RemoteFile
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError
from workers.engine.params import (
    DEADLINE_MARGIN_S,
    MAX_TIMEOUT_S,
    MIN_RATE_BPS,
    MIN_ROUND_TRIP_S,
    RTT_FACTOR,
    ReplayTiming,
    RunParams,
)
from workers.engine.trace import OpKind, Trace, TracedOp, load_trace

if TYPE_CHECKING:
    from workers.engine.client import Client


class Step(IntEnum):
    OPEN = 0
    READ = 1
    READV = 2
    ASYNC = 3
    CLOSE = 4


# Latency kind of each step in the run JSON's latency_us (async reads: each request's).
_KINDS = ("open", "read", "readv", "async_read", "close")
LAG_KIND = "lag"


@dataclass(frozen=True)
class PlannedStep:
    """One call of the replay: what, on which open, when (ns from the trace's start), the
    (offset, size) requests, the bytes the recording got, and async reads' depth."""

    step: Step
    handle: int
    at_ns: int
    requests: tuple[tuple[int, int], ...]
    expected: int
    depth: int = 1


def trace_of(params: RunParams) -> Trace:
    """The run's trace, its files matched to the run's URLs: the trace's first-opened file
    is read at the first URL, the second at the second, and so on."""
    if params.trace is None:
        raise InvalidParams("trace", "a replay needs a recorded trace (--trace CSV)")
    trace = load_trace(params.trace)
    if len(params.urls) != len(trace.files):
        listed = "; ".join(trace.files)
        raise InvalidParams(
            "urls",
            f"the trace reads {len(trace.files)} files ({listed}): give one URL for each, "
            f"in that order, not {len(params.urls)}",
        )
    return trace


def replay_deadline_s(params: RunParams, sizes: dict[str, int], rtt_s: float) -> float:
    """Check each URL holds what the trace read there, and derive the replay's deadline
    (docs/engine.md, Deadlines): the margin, the recorded duration in "recorded" timing,
    the bytes at the minimum rate and each operation a round trip."""
    trace = trace_of(params)
    for url, needed in zip(params.urls, trace.needed_sizes(), strict=True):
        if sizes[url] < needed:
            raise InvalidParams(
                "trace", f"{url} has {sizes[url]} bytes; the trace reads up to byte {needed}"
            )
    if params.timeout_s is not None:
        return params.timeout_s
    paced_s = trace.duration_s if params.replay_timing == ReplayTiming.RECORDED else 0.0
    waits_s = len(trace.ops) * max(RTT_FACTOR * rtt_s, MIN_ROUND_TRIP_S)
    derived = DEADLINE_MARGIN_S + paced_s + trace.bytes_read / MIN_RATE_BPS + waits_s
    return min(MAX_TIMEOUT_S, derived)


def plan_steps(trace: Trace) -> list[PlannedStep]:
    """The trace's operations as replay steps, overlapping reads of one open grouped."""
    steps: list[PlannedStep | list[TracedOp]] = []
    # The open group of overlapping reads of each handle, and when its last answer came.
    groups: dict[int, tuple[list[TracedOp], float]] = {}
    for op in trace.ops:
        group = groups.get(op.handle)
        if op.kind == OpKind.READ and group is not None and op.start_s < group[1]:
            group[0].append(op)
            groups[op.handle] = (group[0], max(group[1], op.end_s))
            continue
        groups.pop(op.handle, None)
        if op.kind == OpKind.READ:
            members = [op]
            steps.append(members)
            groups[op.handle] = (members, op.end_s)
        else:
            steps.append(_single(op))
    return [_reads(step) if isinstance(step, list) else step for step in steps]


def _single(op: TracedOp) -> PlannedStep:
    step = {OpKind.OPEN: Step.OPEN, OpKind.READV: Step.READV, OpKind.CLOSE: Step.CLOSE}[op.kind]
    return PlannedStep(step, op.handle, _ns(op.start_s), op.requests, op.delivered)


def _reads(members: list[TracedOp]) -> PlannedStep:
    first = members[0]
    if len(members) == 1:
        return PlannedStep(
            Step.READ, first.handle, _ns(first.start_s), first.requests, first.delivered
        )
    return PlannedStep(
        Step.ASYNC,
        first.handle,
        _ns(first.start_s),
        tuple(op.requests[0] for op in members),
        sum(op.delivered for op in members),
        _most_outstanding(members),
    )


def _most_outstanding(members: list[TracedOp]) -> int:
    """The most reads that were waiting for their answer at once."""
    events = sorted([(op.start_s, 1) for op in members] + [(op.end_s, -1) for op in members])
    most = outstanding = 0
    for _, change in events:
        outstanding += change
        most = max(most, outstanding)
    return max(1, most)


def _ns(seconds: float) -> int:
    return math.floor(seconds * 1e9)


class Replay:
    """One client's replay of the run's trace; `run` is called once the client is released."""

    def __init__(self, params: RunParams) -> None:
        trace = trace_of(params)
        # Tuples for the loop; chunk lists, as the XRootD bindings take them.
        self.steps = [
            (int(s.step), s.handle, s.at_ns, list(s.requests), s.expected, s.depth)
            for s in plan_steps(trace)
        ]
        self.urls = tuple(params.urls[file] for file in trace.handle_files)
        self.paced = params.replay_timing == ReplayTiming.RECORDED
        self.bytes_planned = trace.bytes_read

    def run(self, client: Client) -> None:
        """Replay every step; the client's result gets latencies, bytes and files."""
        result = client.result
        result.bytes_requested += self.bytes_planned
        started = client.now()
        files: list[Any] = [None] * len(self.urls)
        try:
            self._loop(client, files)
        finally:
            ended = client.now()
            result.add_phase("replay", started, ended)
            result.read_s += ended - started
            for file in files:  # opens the job never closed: not part of the replay
                if file is not None:
                    with contextlib.suppress(ProbeError):
                        file.close()

    def _loop(self, client: Client, files: list[Any]) -> None:
        """The measurement; latencies go to the client's samples, bytes to its progress."""
        latencies = [array("q") for _ in _KINDS]
        lags: array[int] = array("q")
        tally = [0, 0]  # bytes delivered, when the first byte came (perf_counter_ns)
        try:
            self._steps(client, files, latencies, lags, tally)
        except ProbeError as exc:
            tally[0] += exc.bytes_received
            client.progress[client.spec.client] = tally[0]
            raise
        finally:
            self._account(client, tally, latencies, lags)

    def _steps(
        self,
        client: Client,
        files: list[Any],
        latencies: list[array[int]],
        lags: array[int],
        tally: list[int],
    ) -> None:
        """`files` holds each recorded open's RemoteFile while it is open (the trace never
        reads a file it has not opened: trace.py checks that)."""
        records = [latency.append for latency in latencies]
        record_async, lag = records[Step.ASYNC], lags.append
        clock, sleep, paced = time.perf_counter_ns, time.sleep, self.paced
        progress, slot, delivered, first_ns = client.progress, client.spec.client, 0, 0
        # Plain ints: comparing with an IntEnum member costs an attribute lookup per step.
        read, readv, async_reads, open_ = int(Step.READ), int(Step.READV), int(Step.ASYNC), 0
        t0 = clock()
        try:
            for step, handle, at_ns, requests, expected, depth in self.steps:
                if paced:
                    wait_ns = t0 + at_ns - clock()
                    if wait_ns > 0:
                        sleep(wait_ns / 1e9)
                    late = clock() - t0 - at_ns
                    lag(late if late > 0 else 0)
                file = files[handle]
                begun = clock()
                if step == read:
                    n_bytes = len(file.read(*requests[0]))
                    ended = clock()
                    records[read](ended - begun)
                elif step == readv:
                    n_bytes = file.readv(requests)
                    ended = clock()
                    records[readv](ended - begun)
                elif step == async_reads:
                    got = [0]
                    file.read_async(requests, depth, _async_recorder(record_async, got))
                    ended = clock()
                    n_bytes = got[0]
                else:
                    if step == open_:
                        files[handle] = self._open(client, handle)
                    else:
                        file.close()
                        files[handle] = None
                    ended = clock()
                    records[step](ended - begun)
                    continue
                if n_bytes < expected:
                    raise _short(requests, expected, n_bytes)
                delivered += n_bytes
                progress[slot] = delivered
                first_ns = first_ns or ended
        finally:
            tally[0], tally[1] = delivered, first_ns

    def _open(self, client: Client, handle: int) -> RemoteFile:
        file = client.backend.open(self.urls[handle], client.options)
        client.opened.append(file)
        if file.served_by not in client.result.served_by:
            client.result.served_by.append(file.served_by)
        return file

    def _account(
        self, client: Client, tally: list[int], latencies: list[array[int]], lags: array[int]
    ) -> None:
        """After the clock: bytes, latencies, files closed, open and close times, time to
        first byte, and in recorded timing how late each step started."""
        result, (delivered, first_ns) = client.result, tally
        client.delivered += delivered
        for kind, latency in zip(_KINDS, latencies, strict=True):
            if latency:
                client.samples.setdefault(kind, array("q")).extend(latency)
        if self.paced:
            client.samples[LAG_KIND] = lags
        result.files_done += len(latencies[Step.CLOSE])
        result.open_s += sum(latencies[Step.OPEN]) / 1e9
        result.close_s += sum(latencies[Step.CLOSE]) / 1e9
        if first_ns and result.ttfb_s is None:
            result.ttfb_s = first_ns / 1e9 - client.t0


def _async_recorder(record: Callable[[int], None], got: list[int]) -> AsyncRecorder:
    """Each async read's latency, and the bytes of them all in `got`."""

    def on_answer(latency_ns: int, n_bytes: int) -> None:
        record(latency_ns)
        got[0] += n_bytes

    return on_answer


def _short(requests: list[tuple[int, int]], expected: int, got: int) -> ProbeError:
    where = f"at {requests[0][0]}" if requests else ""
    return ProbeError(
        ErrorClass.SHORT_READ, f"replayed read {where} gave {got} of the recorded {expected} B"
    )
