"""Runs one measurement: N client processes, released together, held to one deadline.

The parent plans the run (stats the files, derives the deadline), starts the clients
(each its own process and connection), releases them on a barrier, shows progress, and
collects their results. A client still running at the deadline, or when the run is
cancelled, is killed; its record is kept with the bytes it had read by then.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from workers.engine.backends import backend_for
from workers.engine.backends.base import OpenOptions
from workers.engine.client import READY, ClientSpec, FileTarget, client_main
from workers.engine.deadline import Deadline
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.metrics import ClientError, ClientResult
from workers.engine.params import Method, Pattern, RunParams
from workers.engine.results import RunResult
from workers.engine.urls import check_url

PREFLIGHT_TIMEOUT_S = 60.0
START_TIMEOUT_S = 120.0
# How long past the deadline a client may take to report before it is killed.
KILL_GRACE_S = 2.0
POLL_S = 0.2

_T = TypeVar("_T")


@dataclass(frozen=True)
class Progress:
    """A snapshot for progress bars: bytes delivered so far of those planned."""

    bytes_done: int
    bytes_planned: int
    clients_done: int
    clients: int
    elapsed_s: float
    deadline_s: float
    # Bytes delivered so far by each client, by client index.
    client_bytes: tuple[int, ...] = ()


ProgressCallback = Callable[[Progress], None]
CancelCheck = Callable[[], bool]


def run_probe(
    params: RunParams,
    *,
    on_progress: ProgressCallback | None = None,
    should_cancel: CancelCheck | None = None,
) -> RunResult:
    """Validate, plan and execute one run. Raises InvalidParams before anything starts."""
    params.validate()
    result = RunResult(
        params=params,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        host=socket.getfqdn(),
        deadline_s=0.0,
    )
    try:
        planned_at = time.time()
        preflight_s = min(PREFLIGHT_TIMEOUT_S, params.timeout_s or PREFLIGHT_TIMEOUT_S)
        found = _preflight(params, Deadline.after(preflight_s))
    except ProbeError as exc:
        result.run_error = (exc.error_class, exc.message)
        return result
    sizes, vector_limits = found.sizes, found.vector_limits
    result.file_sizes = sizes
    result.preflight_rtt_s = found.rtt_s
    # An explicit --timeout covers the whole run, preflight included.
    spent = time.time() - planned_at if params.timeout_s is not None else 0.0
    derived = params.deadline_s(max(sizes.values()), rtt_s=found.rtt_s, vector_limits=vector_limits)
    result.deadline_s = max(0.0, derived - spent)
    specs = _client_specs(params, sizes, result.deadline_s, vector_limits)
    planned = sum(params.planned_bytes(target.size) for spec in specs for target in spec.targets)
    try:
        _Execution(specs, result, planned, on_progress, should_cancel).run()
    finally:
        for spec in specs:
            if spec.scratch:
                shutil.rmtree(spec.scratch, ignore_errors=True)
    if params.egress is not None and backend_for(check_url(params.urls[0])).egress_after_run:
        check_served_by(result, params.egress)
    return result


@dataclass
class _Preflight:
    """What the preflight found: file sizes, readv limits, and the endpoint's round-trip
    time as the fastest of its opens and stats (never below the real one: only calls that
    always ask the endpoint are timed, not readv limits or closes a backend may answer
    itself)."""

    sizes: dict[str, int] = field(default_factory=dict)
    vector_limits: tuple[int, int] | None = None
    rtt_s: float = math.inf

    def timed(self, request: Callable[[], _T]) -> _T:
        started = time.perf_counter()
        answer = request()
        self.rtt_s = min(self.rtt_s, time.perf_counter() - started)
        return answer


def _preflight(params: RunParams, deadline: Deadline) -> _Preflight:
    """Check every URL against the egress policy, then stat every file (and ask the readv
    limits) before the clients start; untimed.

    A direct run stats its first file once more: its first request paid for connecting and
    logging in, the repeat on the same connection (XrdCl keeps it) is one round trip.
    """
    options = OpenOptions(user="fpplan", streams=1, deadline=deadline, egress=params.egress)
    found = _Preflight()
    for url in dict.fromkeys(params.urls):
        backend_for(check_url(url)).check_egress(url, options)
    for url in dict.fromkeys(params.urls):
        backend = backend_for(check_url(url))
        if params.pattern == Pattern.VECTOR and params.method == Method.DIRECT:
            file = found.timed(partial(backend.open, url, options))
            found.sizes[url] = file.size
            limits = file.vector_limits()
            found.vector_limits = (limits.max_chunks, limits.max_chunk_bytes)
            file.close()
        else:
            found.sizes[url] = found.timed(partial(backend.stat_size, url, options))
        if found.sizes[url] >= 0:
            params.check_file_size(url, found.sizes[url])
    if params.method == Method.DIRECT:
        first = params.urls[0]
        found.timed(partial(backend_for(check_url(first)).stat_size, first, options))
    return found


def check_served_by(result: RunResult, egress: EgressPolicy) -> None:
    """A client served by a server the policy refuses fails with class egress.

    XrdCl and the copy tools resolve and follow redirections themselves: a redirection the
    preflight could not foresee is only seen here, after the fact (docs/engine.md).
    """
    for client in result.clients:
        for server in client.served_by:
            try:
                egress.check_server(server)
            except ProbeError as exc:
                if exc.error_class == ErrorClass.EGRESS and client.error is None:
                    message = f"served by {server}: {exc.message}"
                    client.error = ClientError(ErrorClass.EGRESS, message, round(client.wall_s, 6))


def _client_specs(
    params: RunParams,
    sizes: dict[str, int],
    deadline_s: float,
    vector_limits: tuple[int, int] | None,
) -> list[ClientSpec]:
    """Client c reads `files` URLs of the collection, starting at URL c * files."""
    urls = params.urls
    specs = []
    for client in range(params.clients):
        picked = (urls[(client * params.files + k) % len(urls)] for k in range(params.files))
        targets = tuple(FileTarget(url, sizes[url], k) for k, url in enumerate(picked))
        scratch = ""
        if params.method != Method.DIRECT:
            scratch = tempfile.mkdtemp(prefix=f"fedprobe-c{client}-", dir=params.scratch_dir)
        specs.append(
            ClientSpec(params, client, targets, deadline_s, scratch, vector_limits, START_TIMEOUT_S)
        )
    return specs


def _kill_client(pid: int) -> None:
    """Kill a client and what it started (a copy tool): its process group, once it has one."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start clients without multiprocessing re-importing the caller's __main__ in each.

    multiprocessing re-runs the parent's main script in every child it starts (as
    __mp_main__): per client start-up time, side effects of the caller's script, and a
    crash when there is no script file (python - < script, a REPL). Clients need nothing
    from __main__, so it is swapped for an empty module while they are being started.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _context() -> ForkServerContext | SpawnContext:
    """Clients fork from a clean server process that has the engine already imported."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["workers.engine.client"])
        return ctx
    return multiprocessing.get_context("spawn")


class _Execution:
    """The parent's side of a run: start, release, watch, collect."""

    def __init__(
        self,
        specs: list[ClientSpec],
        result: RunResult,
        planned: int,
        on_progress: ProgressCallback | None,
        should_cancel: CancelCheck | None,
    ) -> None:
        self.specs = specs
        self.result = result
        self.planned = planned
        self.on_progress = on_progress
        self.should_cancel = should_cancel
        ctx = _context()
        self.ctx = ctx
        self.release = ctx.Event()
        self.progress: Any = ctx.RawArray("q", len(specs))
        self.processes: dict[int, BaseProcess] = {}
        self.pipes: dict[int, Connection] = {}
        self.results: dict[int, ClientResult] = {}

    def run(self) -> None:
        try:
            self._start_clients()
            if not self._release():
                return
            released = time.perf_counter()
            self.result.released_at = datetime.now(UTC).isoformat(timespec="microseconds")
            self._watch(released)
            self.result.wall_s = max((c.wall_s for c in self.results.values()), default=0.0)
        finally:
            self._kill_remaining(ErrorClass.CANCELLED, "the run was stopped")
            self.result.clients = [self.results[i] for i in sorted(self.results)]

    def _start_clients(self) -> None:
        with _main_module_hidden():
            for spec in self.specs:
                self._start_client(spec)

    def _start_client(self, spec: ClientSpec) -> None:
        receiver, sender = self.ctx.Pipe(duplex=False)
        process = self.ctx.Process(
            target=client_main,
            args=(spec, self.release, self.progress, sender),
            name=f"fedprobe-client-{spec.client}",
            daemon=True,
        )
        process.start()
        sender.close()
        self.processes[spec.client] = process
        self.pipes[spec.client] = receiver

    def _release(self) -> bool:
        """Wait until every client is prepared, then let them all go at once.

        A client that dies or fails while preparing aborts the run: its record says why,
        the others are stopped before they touch the endpoint.
        """
        waiting = dict(self.pipes)
        give_up = time.perf_counter() + START_TIMEOUT_S
        while waiting and time.perf_counter() < give_up:
            ready = wait(list(waiting.values()), timeout=POLL_S)
            for client in [c for c, pipe in waiting.items() if pipe in ready]:
                pipe = waiting.pop(client)
                try:
                    message = pipe.recv()
                except EOFError:
                    message = self._lost(client, "the client process died while starting")
                if message != READY:
                    self.results[client] = message
                    self._forget(client)
                    self._abort_start("a client could not start")
                    return False
        if waiting:
            self._abort_start(f"clients not ready after {START_TIMEOUT_S:.0f} s")
            return False
        self.release.set()
        return True

    def _abort_start(self, why: str) -> None:
        self.result.run_error = (ErrorClass.SERVER_ERROR, why)
        self._kill_remaining(ErrorClass.CANCELLED, f"not started: {why}")

    def _watch(self, released: float) -> None:
        hard_stop = released + self.result.deadline_s + KILL_GRACE_S
        while self.pipes:
            self._collect(timeout=POLL_S)
            elapsed = time.perf_counter() - released
            self._report(elapsed)
            if self.should_cancel is not None and self.should_cancel():
                self.result.cancelled = True
                self._kill_remaining(ErrorClass.CANCELLED, "the run was cancelled")
            elif time.perf_counter() > hard_stop:
                self._kill_remaining(ErrorClass.TIMEOUT, "no answer by the run's deadline")

    def _collect(self, timeout: float) -> None:
        ready = wait(list(self.pipes.values()), timeout=timeout)
        for client, pipe in list(self.pipes.items()):
            if pipe not in ready:
                continue
            try:
                self.results[client] = pipe.recv()
            except EOFError:
                self.results[client] = self._lost(client, "the client process died")
            self._forget(client)

    def _kill_remaining(self, error_class: ErrorClass, message: str) -> None:
        for client in list(self.pipes):
            process = self.processes[client]
            if process.pid is not None and process.is_alive():
                _kill_client(process.pid)
            process.join(timeout=5)
            self.results[client] = self._lost(client, message, error_class)
            self._forget(client)

    def _lost(
        self, client: int, message: str, error_class: ErrorClass = ErrorClass.SERVER_ERROR
    ) -> ClientResult:
        """The record of a client that could not report: what the parent knows of it."""
        elapsed = self.result.deadline_s if error_class == ErrorClass.TIMEOUT else 0.0
        record = ClientResult(client=client, bytes_read=int(self.progress[client]))
        record.wall_s = elapsed
        record.error = ClientError(error_class, message, round(elapsed, 6))
        return record

    def _forget(self, client: int) -> None:
        self.pipes.pop(client).close()
        self.processes[client].join(timeout=5)

    def _report(self, elapsed: float) -> None:
        if self.on_progress is None:
            return
        done = tuple(self.progress)
        self.on_progress(
            Progress(
                bytes_done=sum(done),
                bytes_planned=self.planned,
                clients_done=len(self.results),
                clients=len(self.specs),
                elapsed_s=elapsed,
                deadline_s=self.result.deadline_s,
                client_bytes=done,
            )
        )
