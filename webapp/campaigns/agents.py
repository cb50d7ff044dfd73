"""What a remote vantage point's agent asks of the server (docs/vantage-points.md): it holds no
database URL and no central key, so it claims each run sent to its queue here, gets the
run's parameters and its credential sealed to its own key, reports progress (and learns of
a cancel) and hands in the run JSON, which is stored exactly as a local worker's: once, in
one transaction (run_ingest), a second delivery adding nothing. It also asks here for the
cleanups of its lost runs (webapp.campaigns.cleanups), which a local worker gets from its
queue.

Every call names a run of the agent's own vantage point; any other is refused as unknown.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from webapp.campaigns import health
from webapp.campaigns.cleanups import cleanup_report, cleanup_target, cleanups_hand_out
from webapp.campaigns.models import Run, RunCleanup
from webapp.campaigns.services import (
    RunMustWait,
    run_claim,
    run_enqueue_later,
    run_fail,
    run_heartbeat,
    run_ingest,
    run_refused,
)
from webapp.campaigns.traces import Trace
from webapp.sites.enrolment import vantage_revoke
from webapp.sites.models import VantagePoint
from workers.agent.sealing import Sealed, seal
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError
from workers.engine.params import Operation
from workers.engine.results import check_client_record, check_run_json

log = logging.getLogger(__name__)


class UnknownRun(Exception):
    """Not a run of this vantage point (or none at all): the agent is told nothing more."""


class MalformedReport(Exception):
    """A report the server cannot store; the message names what is wrong."""


@dataclass(frozen=True)
class AgentClaim:
    """A claimed run as the agent measures it: its parameters (RunParams.to_json without
    anything of the server's host) and its credential, sealed to the vantage point's key."""

    run_id: int
    params: dict[str, object]
    sealed_credential: str | None
    # A replay's trace, by the sha256 of its text: the agent fetches it (agent_trace).
    trace_sha256: str | None = None
    # A copy's destination credential, sealed like the run's.
    sealed_destination_credential: str | None = None


def _own_run(vantage_point: VantagePoint, run_id: int) -> Run:
    run = Run.objects.filter(pk=run_id, vantage_point=vantage_point).first()
    if run is None:
        raise UnknownRun(run_id)
    return run


def agent_claim(*, vantage_point: VantagePoint, run_id: int, worker: str) -> AgentClaim | None:
    """Claim run `run_id` for the agent's worker `worker`: its parameters and sealed
    credential, or None when there is nothing to measure (taken already, cancelled, or its
    credential or parameters failed here: the run is then ended with the reason). RunMustWait
    when the vantage point is busy: the run is sent again a little later, from here (the
    agent cannot publish)."""
    _own_run(vantage_point, run_id)
    try:
        run = run_claim(run_id=run_id, worker=f"{worker} ({vantage_point.name})")
    except RunMustWait:
        run_enqueue_later(run_id)
        raise
    if run is None:
        return None
    try:
        params = run.engine_params()
    except (InvalidParams, ProbeError) as exc:
        run_refused(run_id=run_id, refusal=exc)
        return None
    sealed, sealed_destination = (
        None
        if credential is None
        else seal(
            Sealed(run_id, vantage_point.name, credential.kind, credential.secret),
            vantage_point.public_key,
        )
        for credential in (params.credential, params.destination_credential)
    )
    answer = params.to_json()
    answer.pop("ca_dir", None)  # the agent verifies servers against its own CA folder
    answer.pop("trace", None)  # a path on the agent's host, where the agent writes it
    # The trace the run was launched with, not the one its campaign names now.
    trace = run.trace if run.operation == Operation.REPLAY else None
    return AgentClaim(run_id, answer, sealed, trace.sha256 if trace else None, sealed_destination)


@dataclass(frozen=True)
class AgentCleanup:
    """A cleanup as the agent runs it (workers.engine.cleanup.cleanup_written): the run's tag
    and the directories it wrote to, with the credential of the endpoint written to sealed
    to the vantage point's key for this run."""

    run_id: int
    run_tag: str
    urls: tuple[str, ...]
    sealed_credential: str | None
    # Where else the credential may be presented (the endpoint's, as a claim's params say).
    credential_hosts: tuple[str, ...] = ()


def agent_cleanups(*, vantage_point: VantagePoint, now: datetime) -> list[AgentCleanup]:
    """The due cleanups of the vantage point's lost runs, each counted as an attempt (the
    agent reports it through agent_cleanup_report). One whose credential cannot be had here
    (it does not parse, an oauth issuer gave no token) is not handed out: that attempt
    failed, with the reason."""
    own = VantagePoint.objects.filter(pk=vantage_point.pk)
    answer = []
    for cleanup in cleanups_hand_out(vantage_points=own, now=now):
        target = cleanup_target(cleanup.run)
        if target is None:  # nowhere it wrote any more (the scratch path was removed)
            cleanup_report(run_id=cleanup.run_id, deleted=0, now=now)
            continue
        try:
            params = target.params()
        except InvalidParams as exc:
            cleanup_report(run_id=cleanup.run_id, error=f"{exc.field}: {exc.message}", now=now)
            continue
        except ProbeError as exc:
            cleanup_report(run_id=cleanup.run_id, error=f"credential: {exc.message}", now=now)
            continue
        credential = params.credential
        sealed = (
            None
            if credential is None
            else seal(
                Sealed(target.run_id, vantage_point.name, credential.kind, credential.secret),
                vantage_point.public_key,
            )
        )
        answer.append(
            AgentCleanup(
                target.run_id, target.run_tag, target.urls, sealed, params.credential_hosts
            )
        )
    return answer


def agent_cleanup_report(
    *, vantage_point: VantagePoint, run_id: int, report: dict[str, Any]
) -> bool:
    """What the agent's cleanup of run `run_id` did: {"deleted": N} or {"error": MESSAGE};
    False when the run has no cleanup pending. MalformedReport for anything else."""
    _own_run(vantage_point, run_id)
    deleted, error = report.get("deleted"), report.get("error")
    if (deleted is None) == (error is None):
        raise MalformedReport("deleted, error: one of them (a count of files, or a message)")
    if deleted is not None and (
        not isinstance(deleted, int) or isinstance(deleted, bool) or deleted < 0
    ):
        raise MalformedReport(f"deleted: {deleted!r} is not a count of files")
    if error is not None and (not isinstance(error, str) or not error.strip()):
        raise MalformedReport("error: a message saying why the cleanup failed")
    return cleanup_report(run_id=run_id, deleted=deleted, error=(error or "")[:2000])


def agent_trace(*, vantage_point: VantagePoint, sha256: str) -> str:
    """The text of the trace with this sha256, for a replay the vantage point is measuring
    (a run of its own, running, launched with that trace); UnknownRun for any other: an
    agent reads only what its own runs replay."""
    trace = Trace.objects.filter(
        sha256=sha256,
        runs__vantage_point=vantage_point,
        runs__status=Run.Status.RUNNING,
        runs__operation=Operation.REPLAY,
    ).first()
    if trace is None:
        raise UnknownRun(sha256)
    return trace.text


def agent_progress(
    *,
    vantage_point: VantagePoint,
    run_id: int,
    client_bytes: Sequence[int],
    finished: Sequence[object],
) -> bool:
    """One heartbeat of a run the agent measures; True when a cancel was asked for."""
    run = _own_run(vantage_point, run_id)
    if run.status != Run.Status.RUNNING:
        return True  # ended meanwhile (the reaper, a revocation): stop measuring
    if len(client_bytes) > run.clients or len(finished) > run.clients:
        raise MalformedReport(f"client_bytes, finished: at most one per client ({run.clients})")
    if not all(isinstance(n, int) and n >= 0 for n in client_bytes):
        raise MalformedReport("client_bytes: a list of byte counts")
    try:
        records = [check_client_record(f, f"finished[{i}]") for i, f in enumerate(finished)]
    except InvalidParams as exc:
        raise MalformedReport(f"{exc.field}: {exc.message}") from None
    return run_heartbeat(run_id=run_id, client_bytes=client_bytes, finished=records)


def agent_result(*, vantage_point: VantagePoint, run_id: int, run_json: object) -> bool:
    """Store the run JSON the agent measured; False when the run had already ended (a second
    delivery, or ended here meanwhile). MalformedReport, storing nothing, for anything that
    does not have the run JSON's shape (results.check_run_json): a compromised vantage point
    can report wrong figures for its own runs, not break or bloat the database."""
    _own_run(vantage_point, run_id)
    try:
        checked = check_run_json(run_json)
    except InvalidParams as exc:
        raise MalformedReport(f"{exc.field}: {exc.message}") from None
    return run_ingest(run_id=run_id, run_json=checked)


def agent_failure(
    *, vantage_point: VantagePoint, run_id: int, message: str, error_class: str, phase: str
) -> bool:
    """The agent could not measure a run it claimed (its parameters refused on its host, its
    credential did not open): ended as failed with its reason."""
    _own_run(vantage_point, run_id)
    try:
        cls = ErrorClass(error_class)
    except ValueError:
        raise MalformedReport(f"error_class: {error_class!r} is not an error class") from None
    return run_fail(run_id=run_id, message=message[:2000], error_class=cls, phase=phase[:50])


def agent_heartbeat(
    *, vantage_point: VantagePoint, worker: dict[str, Any], now: datetime, stopped: bool = False
) -> None:
    """The agent's worker reports itself, on its own queue only (pages show it as any
    worker's: docs/workers.md#worker-health)."""
    hostname = str(worker.get("hostname", ""))[:200]
    pid = int(worker.get("pid", 0))
    if not hostname or pid <= 0:
        raise MalformedReport("worker: hostname and pid")
    if stopped:
        health.worker_stopped(hostname=hostname, pid=pid, now=now)
        return
    current = worker.get("current_run_id")
    if (
        current is not None
        and not Run.objects.filter(pk=current, vantage_point=vantage_point).exists()
    ):
        current = None
    health.worker_heartbeat(
        hostname=hostname,
        queues=[vantage_point.queue],
        pid=pid,
        version=str(worker.get("version", ""))[:50],
        started_at=_started_at(worker.get("started_at"), now),
        current_run_id=current,
        now=now,
    )


def _started_at(value: object, now: datetime) -> datetime:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return now
    return parsed if parsed.tzinfo is not None else now


def vantage_point_revoke(*, vantage_point: VantagePoint, now: datetime | None = None) -> int:
    """Revoke a remote vantage point (its agent token, broker account and key end) and end
    its queued and running runs as tester faults saying so; returns how many runs ended."""
    now = now or timezone.now()
    message = (
        f"vantage point {vantage_point.name} was revoked at {now.isoformat(timespec='seconds')}: "
        "its agent may no longer measure"
    )
    error = [{"class": str(ErrorClass.HARNESS), "message": message, "client": None}]
    try:
        vantage_revoke(vantage_point=vantage_point, now=now)
    finally:  # the agent's token is gone even when the broker did not answer: end its runs
        ended = Run.objects.filter(vantage_point=vantage_point, status=Run.Status.QUEUED).update(
            status=Run.Status.FAILED, finished_at=now, errors=error
        )
        running = Run.objects.filter(vantage_point=vantage_point, status=Run.Status.RUNNING)
        for run_id in running.values_list("pk", flat=True):
            ended += run_fail(run_id=run_id, message=message, error_class=ErrorClass.HARNESS)
        # No agent of it will ask for its cleanups any more.
        RunCleanup.objects.filter(
            run__vantage_point=vantage_point, status=RunCleanup.Status.PENDING
        ).update(status=RunCleanup.Status.GAVE_UP, error=message, finished_at=now)
        log.info("vantage point %s revoked: %d runs ended", vantage_point.name, ended)
    return ended
