"""Runs one measurement: N client processes, released together, held to one deadline.

The parent plans the run (stats the files, derives the deadline), starts the clients
(each its own process and connection), releases them on a barrier, shows progress, and
collects their results. A client still running at the deadline, or when the run is
cancelled, is killed; its record is kept with the bytes it had read by then.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from workers.engine.backends import backend_for
from workers.engine.cleanup import CLEANUP_TIMEOUT_S, sweep_in_child
from workers.engine.client import READY, ClientSpec, FileTarget, client_main
from workers.engine.client_ops import DELETE_TIMEOUT_S
from workers.engine.credentials import (
    Access,
    AuthMethod,
    Credential,
    describe,
    refusal_hint,
    remove_stale_run_dirs,
    run_secrets,
)
from workers.engine.deadline import Deadline
from workers.engine.egress_guard import PREFLIGHT, EgressGuard, client_label
from workers.engine.errors import NO_TLS, ErrorClass, InvalidParams, ProbeError
from workers.engine.families import (
    NAMES,
    PINNED,
    addresses_for,
    endpoint_of,
    family_of,
    most_common,
    wrong_family,
)
from workers.engine.guarding import guarded, guarded_secrets
from workers.engine.metrics import ClientError, ClientResult
from workers.engine.params import (
    METADATA_OPERATIONS,
    TPC_OPERATIONS,
    AddressFamily,
    Method,
    Operation,
    RunParams,
    in_directory,
    written_name,
)
from workers.engine.preflight import run_preflight
from workers.engine.processes import client_context, main_module_hidden
from workers.engine.replay import replay_deadline_s, trace_of
from workers.engine.results import RunResult
from workers.engine.urls import HTTP_SCHEMES

PREFLIGHT_TIMEOUT_S = 60.0
START_TIMEOUT_S = 120.0
# How long past the deadline a client may take to report before it is killed.
KILL_GRACE_S = 2.0
# How long a writer asked to stop (SIGTERM) may take to delete its file before it is killed.
WRITE_STOP_GRACE_S = DELETE_TIMEOUT_S + 2.0
# How long XrdHttpTPC may go on copying once our COPY's connection dropped: it notices only
# when writing a perf marker (every 5 s) fails, 2 to 12 s after the drop on the lab (xrootd
# 5.5.3), then stops and keeps what it copied (docs/engine.md "Third-party copy"). The copy
# sweep waits this long from the cut before it deletes.
HTTP_TPC_DRAIN_S = 15.0
POLL_S = 0.2

_T = TypeVar("_T")


@dataclass(frozen=True)
class Progress:
    """A snapshot for progress bars: bytes delivered (read or written) so far of those
    planned; for a metadata storm (`counts_ops`), operations done of those planned."""

    bytes_done: int
    bytes_planned: int
    clients_done: int
    clients: int
    elapsed_s: float
    deadline_s: float
    # Bytes delivered so far by each client, by client index.
    client_bytes: tuple[int, ...] = ()
    # The records of the clients that have ended, as they ended (kept if the worker dies).
    finished: tuple[ClientResult, ...] = ()
    counts_ops: bool = False


ProgressCallback = Callable[[Progress], None]
CancelCheck = Callable[[], bool]


def run_probes(
    params: RunParams,
    *,
    on_progress: ProgressCallback | None = None,
    should_cancel: CancelCheck | None = None,
) -> list[RunResult]:
    """The runs `params` asks for: one, or with address family "each" one per address of
    the endpoint's name (resolved once, here), in the resolver's order, each pinned to that
    address's family and recording its own address. Raises InvalidParams before anything
    starts; a name that does not resolve is one failed run."""
    params.validate()
    if params.address_family != AddressFamily.EACH:
        return [run_probe(params, on_progress=on_progress, should_cancel=should_cancel)]
    host, port = endpoint_of(params.urls)
    try:
        addresses = addresses_for(host, port, AddressFamily.EACH)
    except ProbeError as exc:
        failed = _new_result(params)
        failed.run_error = (exc.error_class, exc.message)
        return [failed]
    results = []
    for address in addresses:
        if should_cancel is not None and should_cancel():
            break
        pinned = replace(params, address_family=family_of(address))
        results.append(
            run_probe(
                pinned,
                address=str(address),
                on_progress=on_progress,
                should_cancel=should_cancel,
            )
        )
    return results


def run_probe(
    params: RunParams,
    *,
    address: str | None = None,
    on_progress: ProgressCallback | None = None,
    should_cancel: CancelCheck | None = None,
) -> RunResult:
    """Validate, plan and execute one run (at `address` of the endpoint's name, for one of
    run_probes's runs per address). Raises InvalidParams before anything starts."""
    params.validate()
    if params.address_family == AddressFamily.EACH and address is None:
        raise InvalidParams(
            "address_family", "'each' makes one run per address: run_probes runs them"
        )
    if params.operation == Operation.REPLAY:
        trace_of(params)  # a bad trace, or URLs not matching it, before anything starts
    scheme = params.scheme
    if (params.operation == Operation.WRITE or params.operation in TPC_OPERATIONS) and (
        params.run_tag is None
    ):  # one tag for the run's files (its JSON's params say it: the cleanup's key)
        params = replace(params, run_tag=secrets.token_hex(6))
    credential = params.credential
    result = _new_result(params)
    # Once per process (the backends cache it), before anything is timed.
    copies = params.method != Method.DIRECT
    result.client_version = backend_for(scheme).client_version(copies=copies)
    remove_stale_run_dirs()
    # The clients (and the preflight) get the credential from the run's private folder.
    shared = params.without_credential()
    try:
        if credential is not None:
            credential.check_valid(until=datetime.now(UTC))
        with (
            guarded_secrets(params) as (access, guard),
            _destination_secrets(params) as destination,
        ):
            guarded = replace(
                access,
                address_family=str(params.address_family),
                address=address,
                destination=_held_to(destination, params.address_family),
            )
            _plan_and_execute(
                shared, credential, guarded, result, guard, on_progress, should_cancel
            )
    except ProbeError as exc:
        result.run_error = (exc.error_class, _over(exc.message, params.address_family, address))
        result.run_error_phase = exc.phase
    return result


def _held_to(destination: Access | None, family: AddressFamily) -> Access | None:
    """A third-party copy's destination is reached over the run's family too (not at the
    address of an "each" run: that is the source's name's)."""
    if destination is None:
        return None
    return replace(destination, address_family=str(family))


def _new_result(params: RunParams) -> RunResult:
    """A run's record before anything ran."""
    credential = params.credential
    return RunResult(
        params=params,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        host=socket.getfqdn(),
        deadline_s=0.0,
        auth=AuthMethod.NONE if credential is None else credential.auth_method(params.scheme),
    )


def _over(message: str, family: AddressFamily, address: str | None) -> str:
    """A pinned run's failure says over which family, and to which address, it was tried."""
    if family not in PINNED or NAMES[family] in message:
        return message
    to = f" to {address}" if address else ""
    return f"{message} (over {NAMES[family]}{to})"


@contextlib.contextmanager
def _destination_secrets(params: RunParams) -> Iterator[Access | None]:
    """A third-party copy's destination credential, in a private folder of its own."""
    scheme = params.destination_scheme
    if scheme is None:
        yield None
        return
    credential = params.destination_credential
    if credential is not None:
        try:
            credential.check_valid(until=datetime.now(UTC))
        except ProbeError as exc:
            message = f"the destination's credential: {exc.message}"
            raise ProbeError(exc.error_class, message, phase=exc.phase) from None
    with run_secrets(credential, scheme=scheme, ca_dir=params.ca_dir) as access:
        yield access


def _plan_and_execute(  # noqa: PLR0917 (one call site, the steps of run_probe)
    params: RunParams,
    credential: Credential | None,
    access: Access,
    result: RunResult,
    guard: EgressGuard | None,
    on_progress: ProgressCallback | None,
    should_cancel: CancelCheck | None,
) -> None:
    # An explicit timeout covers the whole run: its credential's fetching (before the
    # engine started), the preflight and the clients.
    planned_at = time.time() - params.credential_s
    preflight_s = PREFLIGHT_TIMEOUT_S
    if params.timeout_s is not None:
        if params.credential_s >= params.timeout_s:
            raise ProbeError(ErrorClass.TIMEOUT, "deadline passed while getting the credential")
        preflight_s = min(preflight_s, params.timeout_s - params.credential_s)
    try:
        found = run_preflight(client_context(), params, access, Deadline.after(preflight_s))
    except ProbeError as exc:
        if guard is not None:
            exc = guard.explain(exc, PREFLIGHT)
        raise explained(exc, credential, params.ca_dir, params.urls[0]) from None
    sizes, vector_limits = found.sizes, found.vector_limits
    result.address = found.address
    result.file_sizes = sizes
    result.preflight_rtt_s = found.rtt_s
    result.negotiated = found.negotiated
    spent = time.time() - planned_at if params.timeout_s is not None else 0.0
    file_size = max(sizes.values()) if sizes else params.file_size
    derived = params.deadline_s(file_size, rtt_s=found.rtt_s, vector_limits=vector_limits)
    if params.operation == Operation.REPLAY:
        derived = replay_deadline_s(params, sizes, found.rtt_s)
    result.deadline_s = max(0.0, derived - spent)
    if credential is not None:
        ends = datetime.now(UTC) + timedelta(seconds=result.deadline_s)
        credential.check_valid(until=ends, why="the run's deadline")
    specs = _client_specs(params, sizes, result.deadline_s, vector_limits, access)
    planned = _planned(params, sizes)
    execution: _Execution | None = None
    try:
        execution = _Execution(
            specs,
            result,
            planned=planned,
            guard=guard,
            on_progress=on_progress,
            should_cancel=should_cancel,
        )
        execution.run()
        _record_address(params, found.address, result)
    finally:
        for spec in specs:
            if spec.scratch:
                shutil.rmtree(spec.scratch, ignore_errors=True)
        if params.operation == Operation.WRITE:
            _sweep_after_write(params, access, result, guard)
        elif params.operation in TPC_OPERATIONS and execution and execution.cut_at is not None:
            _sweep_after_cut_copies(params, access, result, execution.cut_at)


def _sweep_after_write(
    params: RunParams, access: Access, result: RunResult, guard: EgressGuard | None
) -> None:
    """Delete what a client could not (killed past the grace of its delete): the run's own
    names only (cleanup.py). Untimed, after the clients; a failed sweep is the run's error
    (files may be left on the endpoint)."""
    try:
        sweep_in_child(params, access, Deadline.after(CLEANUP_TIMEOUT_S), guard)
    except ProbeError as exc:
        if result.run_error is None:
            result.run_error = (exc.error_class, f"cleanup of the written files: {exc.message}")


def _sweep_after_cut_copies(
    params: RunParams, access: Access, result: RunResult, cut_at: float
) -> None:
    """Delete the copies a cut client left at the destination (killed mid-copy by the
    deadline or a cancel, it never deleted its copy; a native TPC's server may leave it
    too): the run's names only, with the destination's credential (cleanup.py). HTTP-TPC's
    server goes on copying after the cut, so the sweep first waits HTTP_TPC_DRAIN_S from
    it. Untimed, after the clients; a failed sweep is the run's error. Copies not cut were
    deleted by their client. The sweep is held by the egress guard as the run's processes
    are, its credential to the destination's own server (the hosts listed for the run are
    the source's)."""
    assert params.destination is not None  # RunParams.validate
    if params.scheme in HTTP_SCHEMES:
        time.sleep(max(0.0, cut_at + HTTP_TPC_DRAIN_S - time.monotonic()))
    at_destination = replace(
        params,
        urls=(params.destination,),
        operation=Operation.WRITE,
        destination=None,
        credential_hosts=(),
    )
    destination_access = access.destination or Access(ca_dir=access.ca_dir)
    try:
        with guarded(at_destination, destination_access) as (held, guard):
            sweep_in_child(at_destination, held, Deadline.after(CLEANUP_TIMEOUT_S), guard)
    except ProbeError as exc:
        if result.run_error is None:
            message = f"cleanup of the copies at {params.destination}: {exc.message}"
            result.run_error = (exc.error_class, message)


def _planned(params: RunParams, sizes: dict[str, int]) -> int:
    """What the progress bar counts to: bytes read or written, or metadata operations."""
    if params.operation == Operation.WRITE:
        return params.clients * params.files * params.file_size
    if params.operation == Operation.REPLAY:
        return params.clients * trace_of(params).bytes_read
    if params.operation in METADATA_OPERATIONS:
        return params.clients * params.ops
    return sum(params.client_planned_bytes(sizes))


def _record_address(params: RunParams, preflight_address: str | None, result: RunResult) -> None:
    """The run's address: most clients' (the preflight's when none held a connection at its
    end, as with copy tools); a pinned run whose preflight or a client went over the other
    family does not count (class harness: the pin failed, not the endpoint)."""
    result.address = most_common(c.address for c in result.clients) or preflight_address
    used = [("the preflight", preflight_address)]
    used += [(f"client {c.client}", c.address) for c in result.clients]
    wrong = wrong_family(params.address_family, used)
    if wrong is not None:
        result.run_error = (ErrorClass.HARNESS, wrong)


def explained(
    exc: ProbeError, credential: Credential | None, ca_dir: str | None, url: str
) -> ProbeError:
    """A refusal says what was presented and, where the token's claims tell, its likely
    cause; a certificate problem, what it was checked against."""
    if exc.error_class == ErrorClass.AUTH:
        presented = f"presented {describe(credential)}"
        hint = "" if exc.phase else refusal_hint(credential, url)
        return ProbeError(
            exc.error_class,
            f"{exc.message} ({presented}{'; ' + hint if hint else ''})",
            phase=exc.phase,
        )
    if exc.error_class == ErrorClass.TLS and NO_TLS not in exc.message:
        store = f"the CA folder {ca_dir}" if ca_dir else "the system store"
        return ProbeError(exc.error_class, f"{exc.message} (verified against {store})")
    return exc


def _client_specs(
    params: RunParams,
    sizes: dict[str, int],
    deadline_s: float,
    vector_limits: tuple[int, int] | None,
    access: Access,
) -> list[ClientSpec]:
    """Each client reads (or does its operation on) its params.client_urls; a writer writes
    its files in them (directories), by the run's names."""
    specs = []
    for client in range(params.clients):
        targets = _targets(params, client, sizes)
        scratch = ""
        if params.method != Method.DIRECT:
            scratch = tempfile.mkdtemp(prefix=f"fedprobe-c{client}-", dir=params.scratch_dir)
        specs.append(
            ClientSpec(
                params, client, targets, deadline_s, scratch, vector_limits, START_TIMEOUT_S, access
            )
        )
    return specs


def _targets(params: RunParams, client: int, sizes: dict[str, int]) -> tuple[FileTarget, ...]:
    picked = params.client_urls(client)
    if params.operation == Operation.WRITE:
        assert params.run_tag is not None
        return tuple(
            FileTarget(in_directory(url, written_name(params.run_tag, client, k)), 0, k)
            for k, url in enumerate(picked)
        )
    return tuple(FileTarget(url, sizes.get(url, 0), k) for k, url in enumerate(picked))


# A client that ended with these was stopped mid-operation, by the run.
_CUT_BY = frozenset({ErrorClass.TIMEOUT, ErrorClass.CANCELLED})


def _kill_client(pid: int) -> None:
    """Kill a client and what it started (a copy tool): its process group, once it has one."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class _Execution:
    """The parent's side of a run: start, release, watch, collect."""

    def __init__(
        self,
        specs: list[ClientSpec],
        result: RunResult,
        *,
        planned: int,
        guard: EgressGuard | None,
        on_progress: ProgressCallback | None,
        should_cancel: CancelCheck | None,
    ) -> None:
        self.specs = specs
        self.result = result
        self.planned = planned
        self.guard = guard
        self.on_progress = on_progress
        self.should_cancel = should_cancel
        # Writers are asked to stop first (SIGTERM) and given this long to delete their files.
        self.operation = specs[0].params.operation if specs else Operation.READ
        self.stop_grace_s = WRITE_STOP_GRACE_S if self.operation == Operation.WRITE else 0.0
        ctx = client_context()
        self.ctx = ctx
        self.release = ctx.Event()
        self.progress: Any = ctx.RawArray("q", len(specs))
        self.processes: dict[int, BaseProcess] = {}
        self.pipes: dict[int, Connection] = {}
        self.results: dict[int, ClientResult] = {}
        # When a released client last stopped mid-operation (killed, found dead, or ended
        # by the deadline or a cancel), on time.monotonic(): a copy's server may still be
        # writing its file, and the client did not delete it.
        self.cut_at: float | None = None

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
        with main_module_hidden():
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
                record = self.explained(pipe.recv())
            except EOFError:
                record = self._lost(client, "the client process died")
                self._cut()
            if record.error is not None and record.error.error_class in _CUT_BY:
                self._cut()
            self.results[client] = record
            self._forget(client)

    def explained(self, record: ClientResult) -> ClientResult:
        """A client that failed after the guard refused one of its connections failed
        for that reason (class egress)."""
        error = record.error
        if self.guard is None or error is None:
            return record
        failure = ProbeError(error.error_class, error.message)
        explained = self.guard.explain(failure, client_label(record.client))
        record.error = ClientError(explained.error_class, explained.message, error.wasted_s)
        return record

    def _kill_remaining(self, error_class: ErrorClass, message: str) -> None:
        self._ask_to_stop(error_class, message)
        for client in list(self.pipes):
            process = self.processes[client]
            if process.pid is not None and process.is_alive():
                _kill_client(process.pid)
            self._cut()
            process.join(timeout=5)
            self.results[client] = self._lost(client, message, error_class)
            self._forget(client)

    def _ask_to_stop(self, error_class: ErrorClass, message: str) -> None:
        """SIGTERM to each client still running, then the grace for their records (a
        writer's record comes after its delete): stopped this way, a client failed for
        the reason it was stopped (the deadline, a cancel), not of its SIGTERM."""
        if not self.stop_grace_s or not self.pipes:
            return
        stopped = list(self.pipes)
        for client in stopped:
            process = self.processes[client]
            if process.pid is not None and process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)
        give_up = time.perf_counter() + self.stop_grace_s
        while self.pipes and time.perf_counter() < give_up:
            self._collect(timeout=POLL_S)
        for client in stopped:
            record = self.results.get(client)
            error = None if record is None else record.error
            if (
                record is not None
                and error is not None
                and error.error_class == ErrorClass.CANCELLED
            ):
                record.error = ClientError(error_class, message, error.wasted_s)

    def _cut(self) -> None:
        if self.release.is_set():
            self.cut_at = time.monotonic()

    def _lost(
        self, client: int, message: str, error_class: ErrorClass = ErrorClass.SERVER_ERROR
    ) -> ClientResult:
        """The record of a client that could not report: what the parent knows of it."""
        elapsed = self.result.deadline_s if error_class == ErrorClass.TIMEOUT else 0.0
        record = ClientResult(client=client)
        done = int(self.progress[client])  # bytes read or written, or metadata operations
        if self.operation == Operation.WRITE:
            record.bytes_written = done
        elif self.operation == Operation.READ:
            record.bytes_read = done
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
                finished=tuple(self.results.values()),
                counts_ops=self.operation in METADATA_OPERATIONS,
            )
        )
