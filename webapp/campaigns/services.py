"""Workflows over campaigns and runs: launch, execute, ingest, cancel, reap.

State lives in our rows, never in Celery: a run is claimed with a conditional update, its
clients get attempt rows with heartbeats, results are ingested once (atomically), and a
reaper ends runs whose worker died.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import BigIntegerField, Case, F, QuerySet, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from webapp.campaigns.cleanups import cleanup_record, cleanups_dispatch_local
from webapp.campaigns.estimates import run_moved_bytes
from webapp.campaigns.metrics import RUN_METRICS
from webapp.campaigns.models import (
    COPY_OPERATIONS,
    Campaign,
    ClientAttempt,
    MatrixRows,
    Run,
    matrix_files,
)
from webapp.campaigns.traces import params_with_trace
from webapp.campaigns.validation import (
    campaign_credential_refusal,
    campaign_family_errors,
    campaign_operation_errors,
    campaign_trace_errors,
)
from webapp.sites.credential_expiry import endpoint_credential_expiry
from webapp.sites.models import Endpoint, TestFile, VantagePoint
from workers.engine import InvalidParams, ProbeError, run_probe
from workers.engine.beats import ProgressBeats
from workers.engine.errors import ErrorClass, OutsideFileRoots
from workers.engine.params import Operation
from workers.engine.results import ClientErrorJson, ClientRecordJson, RunJson

log = logging.getLogger(__name__)

# How often a running client beats (the reaper's FEDPROBE_REAPER_STALE_S must be more).
HEARTBEAT_S = 2.0
# Ingestion waits this long in all (1 + 2 + 4 + 8 s) for a database that is restarting:
# well inside FEDPROBE_REAPER_STALE_S (60 s), so the reaper does not end the run meanwhile.
INGEST_RETRY_S = (1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class MatrixPreview:
    """What launching a campaign would do: how many runs, and how many bytes they get (the
    engine's RunParams.run_delivered_bytes: copies get whole files; each run's files counted
    at its test file's size)."""

    runs: int
    planned_bytes: int
    cap: int
    # Its endpoints' credentials that expire within FEDPROBE_CREDENTIAL_WARN_DAYS, have
    # expired or do not parse: each a sentence ("the token of endpoint X expires in ...").
    credential_warnings: tuple[str, ...] = ()
    # A saved campaign none of whose endpoints is enabled: why it expands into no runs.
    endpoints_all_disabled: bool = False

    @property
    def too_large(self) -> bool:
        return self.runs > self.cap

    @property
    def refusal(self) -> str | None:
        """Why this matrix cannot be launched, or None."""
        if self.too_large:
            return f"{self.runs} runs exceed the limit of {self.cap} per launch: use fewer values"
        if not self.runs and self.endpoints_all_disabled:
            return (
                "its endpoints are all disabled (a disabled endpoint is not read): enable "
                "one, or edit the campaign to choose others"
            )
        if not self.runs:
            return "the campaign expands into no runs"
        return None


def matrix_rows_draft(
    *,
    endpoints: Iterable[Endpoint],
    test_files: Iterable[TestFile],
    vantage_points: Iterable[VantagePoint],
) -> MatrixRows:
    """The matrix rows of a campaign not saved yet (a form's, an API request's): its
    relations come as arguments and nothing is written (no vantage point chosen: the local
    one)."""
    files = matrix_files(endpoints=endpoints, chosen=test_files)
    return MatrixRows(files, campaign_vantage_points(chosen=vantage_points, save=False))


def campaign_vantage_points(
    *, chosen: Iterable[VantagePoint], save: bool = True
) -> list[VantagePoint]:
    """Where a campaign measures from: the vantage points chosen, else the local one (made
    if missing; with `save` False, an unsaved one instead: a preview writes nothing)."""
    chosen = list(chosen)
    if chosen:
        return chosen
    return [VantagePoint.local() if save else VantagePoint.local_unsaved()]


@transaction.atomic
def campaign_save(
    *,
    campaign: Campaign,
    endpoints: Iterable[Endpoint],
    test_files: Iterable[TestFile],
    vantage_points: Iterable[VantagePoint],
) -> Campaign:
    """Save a campaign (new or changed) with its relations; no vantage point chosen means
    the local one."""
    campaign.save()
    campaign.endpoints.set(list(endpoints))
    campaign.test_files.set(list(test_files))
    campaign.vantage_points.set(campaign_vantage_points(chosen=vantage_points))
    return campaign


def campaign_preview_draft(
    *,
    draft: Campaign,
    endpoints: Iterable[Endpoint],
    test_files: Iterable[TestFile],
    vantage_points: Iterable[VantagePoint],
) -> MatrixPreview:
    """The preview of a campaign not saved yet: see matrix_rows_draft."""
    rows = matrix_rows_draft(
        endpoints=endpoints, test_files=test_files, vantage_points=vantage_points
    )
    return campaign_preview(campaign=draft, rows=rows)


def campaign_preview(*, campaign: Campaign, rows: MatrixRows | None = None) -> MatrixPreview:
    """`rows` preview a campaign not saved yet (a form's): nothing is read from its relations."""
    planned = 0
    endpoints: dict[int, Endpoint] = {}
    trace_bytes = campaign.trace.bytes_read if campaign.trace else None
    for cell in campaign.cells(rows):
        params = Run.from_cell(cell, campaign=campaign).measured_params(files=[cell.test_file])
        planned += run_moved_bytes(params, cell.test_file.size, trace_bytes=trace_bytes)
        endpoints.setdefault(cell.endpoint.pk, cell.endpoint)
    now = timezone.now()
    expiries = (endpoint_credential_expiry(e, now=now) for e in endpoints.values())
    warnings = tuple(expiry.message for expiry in expiries if expiry is not None)
    size = campaign.matrix_size(rows)
    return MatrixPreview(
        size,
        planned,
        settings.FEDPROBE_MAX_MATRIX,
        warnings,
        endpoints_all_disabled=not size and _endpoints_all_disabled(campaign),
    )


def _endpoints_all_disabled(campaign: Campaign) -> bool:
    """Whether a saved campaign has endpoints and none of them is enabled."""
    if campaign.pk is None:
        return False
    endpoints = campaign.endpoints.all()
    return endpoints.exists() and not endpoints.filter(enabled=True).exists()


class LaunchWhileActive(Exception):
    """A launch refused because runs of the campaign are still queued or running: launching
    again would queue the same runs twice (a double click, a script run twice)."""

    def __init__(self, active: int) -> None:
        self.active = active
        runs = "run" if active == 1 else "runs"
        verb = "is" if active == 1 else "are"
        super().__init__(f"{active} {runs} of this campaign {verb} still queued or running")


def campaign_active_runs(*, campaign: Campaign) -> int:
    """How many runs of the campaign are queued or running."""
    return campaign.runs.filter(status__in=Run.Status.ACTIVE).count()


def campaign_launch(
    *,
    campaign: Campaign,
    trigger: str,
    user: AbstractBaseUser | AnonymousUser | None = None,
    if_idle: bool = False,
) -> list[Run]:
    """Create the campaign's runs (queued, launched by `user`: none for the schedule) and
    enqueue each once the transaction commits. The runs of one launch share its created_at.

    `if_idle` (a person's launch, from a page or the API without ?again=1): refuse with
    LaunchWhileActive while runs of the campaign are still queued or running.
    """
    launched_by = user if user is not None and user.is_authenticated else None
    refusal = campaign_preview(campaign=campaign).refusal
    if refusal:
        raise ValidationError({"matrix": refusal})
    endpoints = list(
        campaign.endpoints.select_related("site__owner").prefetch_related("credential_teams")
    )
    # A scratch path or a write scope may have gone since the campaign was saved.
    needs = campaign_operation_errors(
        operations=campaign.operations,
        endpoints=endpoints,
        destination=campaign.destination_endpoint,
    )
    needs = needs or campaign_trace_errors(operations=campaign.operations, trace=campaign.trace)
    needs = needs or campaign_family_errors(
        address_family=campaign.address_family, endpoints=endpoints
    )
    if needs:
        raise ValidationError(needs)
    # Its runs spend their endpoints' credentials (a copy's destination's too): the
    # campaign's owner must be allowed to, whoever launches it (a person, or the schedule).
    destination = campaign.destination_endpoint
    copies = COPY_OPERATIONS & set(campaign.operations)
    spending = campaign_credential_refusal(
        endpoints=[*endpoints, *([destination] if destination and copies else [])],
        owner=campaign.owner,
    )
    if spending:
        raise PermissionDenied(spending)
    revoked = campaign.vantage_points.filter(revoked_at__isnull=False).first()
    if revoked is not None:
        raise ValidationError(
            {
                "vantage_points": f"{revoked.name} was revoked at "
                f"{revoked.revoked_at:%Y-%m-%d %H:%M} UTC: enrol it again or measure from "
                "another vantage point"
            }
        )
    with transaction.atomic():
        # Two launches of one campaign at once wait for each other here, so the second
        # sees the first one's runs (PostgreSQL; SQLite runs one writer at a time anyway).
        Campaign.objects.select_for_update().filter(pk=campaign.pk).first()
        active = campaign_active_runs(campaign=campaign)
        if if_idle and active:
            raise LaunchWhileActive(active)
        launched_at = timezone.now()
        runs = Run.objects.bulk_create(
            Run.from_cell(cell, campaign=campaign, trigger=trigger, launched_by=launched_by)
            for cell in campaign.cells()
        )
        # auto_now_add gave each run its own instant: one launch, one instant (the campaign
        # page's ETA tells this launch's runs from earlier ones by it).
        Run.objects.filter(campaign=campaign, created_at__gte=launched_at).update(
            created_at=launched_at
        )
        for run in runs:
            run.created_at = launched_at
        transaction.on_commit(lambda: _enqueue(runs))
    return runs


def campaign_clone(*, campaign: Campaign, owner: User) -> Campaign:
    """A copy of the campaign named "<name> (copy)", owned by `owner`, without runs and
    without a schedule (a copy should not start launching by itself)."""
    suffix = " (copy)"
    max_length = Campaign._meta.get_field("name").max_length
    assert max_length is not None  # a CharField's
    name = campaign.name[: max_length - len(suffix)] + suffix
    with transaction.atomic():
        copy = Campaign.objects.get(pk=campaign.pk)
        copy.pk, copy._state.adding = None, True
        copy.name, copy.owner, copy.schedule = name, owner, ""
        copy.schedule_paused_at = copy.schedule_resumed_at = None
        copy.save()
        copy.endpoints.set(campaign.endpoints.all())
        copy.test_files.set(campaign.test_files.all())
        copy.vantage_points.set(campaign.vantage_points.all())
    return copy


def run_enqueue_later(run_id: int) -> None:
    from webapp.campaigns.dispatch import enqueue_run

    run = Run.objects.select_related("vantage_point").get(pk=run_id)
    enqueue_run(run, countdown_s=CLAIM_RETRY_S)


def _enqueue(runs: Iterable[Run]) -> None:
    from webapp.campaigns.dispatch import enqueue_run

    for run in runs:
        enqueue_run(run)


class RunMustWait(Exception):
    """The run's vantage point is measuring its endpoint, or as many runs as it may at once:
    the run stays queued and is taken later."""


# How long a run that must wait is left before a worker tries it again.
CLAIM_RETRY_S = 3.0


def run_claim(*, run_id: int, worker: str) -> Run | None:
    """Move a queued run to running and create its attempts, or None if it is not queued
    (cancelled, or already taken: a redelivered message then does nothing).

    Exclusive, not serial: the claim succeeds only while no other run of the same vantage
    point and endpoint is running and fewer than the vantage point's max_parallel_runs are,
    else RunMustWait (the run stays queued; its last send is now, so the resend pass does not
    take it for lost). Decided in the claim's transaction under a lock on the vantage point's
    row (PostgreSQL; SQLite has one writer), so it holds across worker processes and hosts.
    """
    now = timezone.now()
    try:
        with transaction.atomic():
            claimed = Run.objects.filter(
                pk=run_id, status=Run.Status.QUEUED, cancel_requested=False
            ).update(status=Run.Status.RUNNING, started_at=now, worker=worker[:200])
            if not claimed:
                return None
            run = Run.objects.select_related("endpoint", "test_file", "vantage_point").get(
                pk=run_id
            )
            refusal = _claim_refusal(run)
            if refusal:
                raise RunMustWait(refusal)  # rolls the claim back
            # It starts now, when its turn was decided, not when it asked (the lock may have
            # made it wait for the run it followed to end).
            now = timezone.now()
            Run.objects.filter(pk=run_id).update(started_at=now)
            run.started_at = now
            ClientAttempt.objects.bulk_create(
                [ClientAttempt(run=run, client=i, heartbeat_at=now) for i in range(run.clients)],
                ignore_conflicts=True,
            )
    except RunMustWait:
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(resent_at=now)
        raise
    return run


def _claim_refusal(run: Run) -> str | None:
    """Why `run` (claimed in this transaction) may not run yet, or None; waits for the lock
    on its vantage point's row, so claims of one vantage point are decided one at a time."""
    limit = (
        VantagePoint.objects.select_for_update()
        .filter(pk=run.vantage_point_id)
        .values_list("max_parallel_runs", flat=True)
        .get()
    )
    others = Run.objects.filter(
        vantage_point_id=run.vantage_point_id, status=Run.Status.RUNNING
    ).exclude(pk=run.pk)
    if others.filter(endpoint_id=run.endpoint_id).exists():
        return f"another run of {run.vantage_point.name} is measuring {run.endpoint.name}"
    running = others.count()
    if running >= limit:
        return f"{run.vantage_point.name} is measuring {running} runs, its limit"
    return None


def run_execute(*, run_id: int, worker: str) -> None:
    """Measure a queued run from this host and record the outcome; a run that must wait for
    its turn (run_claim) is sent again, to be taken CLAIM_RETRY_S later."""
    try:
        run = run_claim(run_id=run_id, worker=worker)
    except RunMustWait as wait:
        log.info("run %s waits: %s", run_id, wait)
        run_enqueue_later(run_id)
        return
    if run is None:
        log.info("run %s is not queued: nothing to do", run_id)
        return
    with _heartbeat(run.pk) as heartbeat:
        try:
            with params_with_trace(run.engine_params(), run_trace_text(run)) as params:
                result = run_probe(
                    params, on_progress=heartbeat.update, should_cancel=heartbeat.cancelled
                )
        except (InvalidParams, ProbeError) as exc:
            run_refused(run_id=run.pk, refusal=exc)
            return
        except Exception as exc:
            # A bug or a broken worker host: say so now rather than let the reaper call it lost.
            log.exception("run %s could not be measured", run.pk)
            message = f"the worker failed: {type(exc).__name__}: {exc}"
            run_fail(run_id=run.pk, message=message, error_class=ErrorClass.HARNESS)
            raise
    _ingest_retrying(run_id=run.pk, run_json=result.to_json())


def run_trace_text(run: Run) -> str | None:
    """The recorder CSV a run replays: the trace it was launched with (None for other
    operations), not the one its campaign names now."""
    if run.operation != Operation.REPLAY or run.trace is None:
        return None
    return run.trace.text


def _ingest_retrying(*, run_id: int, run_json: RunJson) -> bool:
    """run_ingest, tried again while the database connection is broken: PostgreSQL may have
    restarted during the measurement, closing the connection that claimed the run. Ingestion
    is idempotent, so a try that did commit before failing leaves the next one nothing to do."""
    for pause_s in INGEST_RETRY_S:
        try:
            return run_ingest(run_id=run_id, run_json=run_json)
        except (OperationalError, InterfaceError) as exc:
            if connection.in_atomic_block:
                raise
            log.warning("run %s: storing the results failed (%s), trying again", run_id, exc)
            connection.close()  # the next query opens a new connection
            time.sleep(pause_s)
    return run_ingest(run_id=run_id, run_json=run_json)


def run_ingest(*, run_id: int, run_json: RunJson) -> bool:
    """Store a run's results once: False if the run was already ended (a duplicate)."""
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status != Run.Status.RUNNING:
            return False
        _store_attempts(run, run_json.get("clients", []), now)
        run.status = run_json["status"]
        run.finished_at = now
        run.errors = run_json.get("errors", [])
        _store_negotiated(run, run_json)
        _end_unreported_attempts(run, now)
        if run.status in Run.Status.MEASURED:
            _store_aggregates(run, run_json)
        run.save()
    return True


def _store_attempts(run: Run, records: list[ClientRecordJson], now: datetime) -> None:
    """Upsert the clients' attempt rows in one statement (a 256-client run is one query)."""
    attempts = []
    for record in records:
        error = record.get("error")
        attempts.append(
            ClientAttempt(
                run=run,
                client=record["client"],
                status=_attempt_status(error),
                heartbeat_at=now,
                finished_at=now,
                error_class=_error_class(error),
                error_message=_error_message(error),
                bytes_read=record.get("bytes_read", 0),
                record=record,
            )
        )
    ClientAttempt.objects.bulk_create(
        attempts,
        update_conflicts=True,
        unique_fields=["run", "client"],
        update_fields=[
            "status",
            "heartbeat_at",
            "finished_at",
            "error_class",
            "error_message",
            "bytes_read",
            "record",
        ],
    )


def _attempt_status(error: ClientErrorJson | None) -> str:
    if not error:
        return ClientAttempt.Status.OK
    if error.get("class") == ErrorClass.CANCELLED:
        return ClientAttempt.Status.CANCELLED
    return ClientAttempt.Status.FAILED


def _error_class(error: ClientErrorJson | None) -> str:
    return error.get("class", "") if error else ""


def _error_message(error: ClientErrorJson | None) -> str:
    return error.get("message", "")[:10_000] if error else ""


def _store_aggregates(run: Run, run_json: RunJson) -> None:
    """The run metrics (each where the registry says the run JSON has it) and the other
    figures into their columns; the run JSON without its clients into `result`."""
    for metric in RUN_METRICS:
        setattr(run, metric.name, metric.from_run_json(cast(Mapping[str, Any], run_json)))
    latency = run_json.get("op_latency_us")
    run.ops = run_json.get("ops")
    run.latency_max_us = latency.get("max") if latency else None
    run.bytes_requested = run_json.get("bytes_requested")
    run.bytes_read = run_json.get("bytes_read")
    run.served_by = run_json.get("served_by", [])
    run.result = {k: v for k, v in run_json.items() if k != "clients"}


def _store_negotiated(run: Run, run_json: RunJson) -> None:
    """How the run authenticated, its TLS, the server's version (null when not asked) and
    the client's (absent from older agents' reports)."""
    run.auth = run_json.get("auth") or ""
    run.tls = run_json.get("tls")
    run.server_version = (run_json.get("server_version") or "")[:200]
    run.client_version = (run_json.get("client_version") or "")[:200]


def _end_unreported_attempts(run: Run, now: datetime) -> None:
    """End the attempts of clients the run has no record of (it stopped before they started),
    with the run's own first error."""
    first_error = run.errors[0] if run.errors else {}
    cancelled = run.status == Run.Status.CANCELLED
    run.attempts.filter(status=ClientAttempt.Status.RUNNING).update(
        status=ClientAttempt.Status.CANCELLED if cancelled else ClientAttempt.Status.FAILED,
        finished_at=now,
        error_class=str(first_error.get("class", ErrorClass.CANCELLED if cancelled else ""))[:20],
        error_message=str(first_error.get("message", ""))[:10_000],
    )


def run_fail(
    *,
    run_id: int,
    message: str,
    error_class: ErrorClass = ErrorClass.SERVER_ERROR,
    phase: str = "",
) -> bool:
    """End a running run as failed without results (its parameters were refused, its
    credential failed before any request, or the worker broke). `phase` as the run JSON's."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, status=Run.Status.RUNNING).first()
        if run is None:
            return False
        run.status = Run.Status.FAILED
        run.finished_at = timezone.now()
        error: dict[str, object] = {"class": str(error_class), "message": message, "client": None}
        if phase:
            error["phase"] = phase
        run.errors = [error]
        run.save(update_fields=["status", "finished_at", "errors"])
        _end_unreported_attempts(run, run.finished_at)
    return True


def run_refused(*, run_id: int, refusal: InvalidParams | ProbeError) -> bool:
    """End a running run that never measured: its parameters were refused (a stored file://
    endpoint outside the file roots meets the egress policy) or its credential failed (an
    oauth client's issuer gave no token: phase credential)."""
    if isinstance(refusal, ProbeError):
        return run_fail(
            run_id=run_id,
            message=refusal.message,
            error_class=refusal.error_class,
            phase=refusal.phase,
        )
    error_class = (
        ErrorClass.EGRESS if isinstance(refusal, OutsideFileRoots) else ErrorClass.SERVER_ERROR
    )
    return run_fail(
        run_id=run_id, message=f"{refusal.field}: {refusal.message}", error_class=error_class
    )


def run_cancel_refusal(run: Run) -> str | None:
    """Why cancelling the run would do nothing (it has already ended), or None."""
    if run.is_final:
        return f"run {run.pk} has already ended ({run.status}): there is nothing to cancel"
    return None


def run_cancel(*, run: Run) -> Run:
    """Cancel a queued run at once; ask a running one to stop (its worker ends it)."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(
        status=Run.Status.CANCELLED, cancel_requested=True, finished_at=now
    )
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(cancel_requested=True)
    run.refresh_from_db()
    return run


@dataclass(frozen=True)
class CampaignCancel:
    """What cancelling a campaign did: queued runs cancelled at once, running ones asked to
    stop (their workers end them cancelled within seconds; their figures never count)."""

    cancelled: list[int]
    stopping: list[int]


def campaign_cancel(*, campaign: Campaign, runs: QuerySet[Run] | None = None) -> CampaignCancel:
    """Cancel every queued run of the campaign and ask every running one to stop; of `runs`
    only, if given (Campaign.runs_cancellable_by: those a user may cancel)."""
    now = timezone.now()
    scope = (runs if runs is not None else Run.objects.all()).filter(campaign=campaign)
    with transaction.atomic():
        queued = list(
            scope.select_for_update()
            .filter(status=Run.Status.QUEUED)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        Run.objects.filter(pk__in=queued, status=Run.Status.QUEUED).update(
            status=Run.Status.CANCELLED, cancel_requested=True, finished_at=now
        )
        running = list(
            scope.filter(status=Run.Status.RUNNING).order_by("pk").values_list("pk", flat=True)
        )
        Run.objects.filter(pk__in=running).update(cancel_requested=True)
    return CampaignCancel(cancelled=queued, stopping=running)


def runs_reap(*, stale_after_s: float | None = None) -> int:
    """End running runs whose attempts stopped beating for `stale_after_s` (by default
    FEDPROBE_REAPER_STALE_S): their worker died. Idempotent."""
    if stale_after_s is None:
        stale_after_s = float(settings.FEDPROBE_REAPER_STALE_S)
    stale = timezone.now() - timedelta(seconds=stale_after_s)
    lost_runs = set(
        ClientAttempt.objects.filter(
            status=ClientAttempt.Status.RUNNING,
            heartbeat_at__lt=stale,
            run__status=Run.Status.RUNNING,
        ).values_list("run_id", flat=True)
    )
    ended = 0
    for run_id in lost_runs:
        ended += _reap_run(run_id)
    # Also the cleanups of earlier passes that failed and are due again.
    cleanups_dispatch_local(now=timezone.now())
    return ended


def _reap_run(run_id: int) -> int:
    """End one lost run; one that wrote (a write, a copy) gets a cleanup recorded: a worker
    of its vantage point deletes its files (its clients died before they could), a local
    one sent it by the reaper, a remote one's agent asking for it (webapp.campaigns.cleanups)."""
    reaped = _reap_run_ended(run_id)
    if reaped is not None:
        cleanup_record(reaped)
    return int(reaped is not None)


def _reap_run_ended(run_id: int) -> Run | None:
    message = "the worker stopped reporting (lost)"
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, status=Run.Status.RUNNING).first()
        if run is None:
            return None
        attempts = run.attempts.select_for_update()
        attempts.filter(status=ClientAttempt.Status.RUNNING).update(
            status=ClientAttempt.Status.LOST,
            finished_at=timezone.now(),
            error_class=ErrorClass.LOST.value,
            error_message=message,
        )
        some_ok = attempts.filter(status=ClientAttempt.Status.OK).exists()
        run.status = Run.Status.PARTIAL if some_ok else Run.Status.FAILED
        run.finished_at = timezone.now()
        # The tester's fault (class lost), never the endpoint's.
        run.errors = [{"class": ErrorClass.LOST.value, "message": message, "client": None}]
        run.save(update_fields=["status", "finished_at", "errors"])
    return run


@dataclass(frozen=True)
class ResendOutcome:
    """What one pass of runs_resend_stale did: the ids of the runs sent again and failed."""

    resent: list[int]
    failed: list[int]


def runs_resend_stale(*, now: datetime) -> ResendOutcome:
    """Send again the queued runs whose message seems lost, or fail them after
    FEDPROBE_RESEND_MAX_SENDS sends.

    A run counts as lost when it was last sent FEDPROBE_RESEND_AFTER_S ago and no worker of
    its vantage point took anything since (none running, none started): a worker consuming
    the queue would have taken it. A run waiting behind others is left alone. A duplicate
    message is harmless: run_claim only takes a queued run.
    """
    since = now - timedelta(seconds=settings.FEDPROBE_RESEND_AFTER_S)
    stale = (
        Run.objects.filter(status=Run.Status.QUEUED, cancel_requested=False)
        .annotate(last_sent=Coalesce("resent_at", "created_at"))
        .filter(last_sent__lt=since)
        .select_related("vantage_point")
        .order_by("pk")
    )
    outcome = ResendOutcome(resent=[], failed=[])
    idle: dict[int, bool] = {}
    for run in stale:
        if run.vantage_point_id not in idle:
            idle[run.vantage_point_id] = _vantage_point_idle(run.vantage_point_id, since=since)
        if not idle[run.vantage_point_id]:
            continue
        if run.resent_count + 1 >= settings.FEDPROBE_RESEND_MAX_SENDS:
            if _run_fail_unsent(run, now):
                outcome.failed.append(run.pk)
        elif _run_resend(run, now):
            outcome.resent.append(run.pk)
    return outcome


def _vantage_point_idle(vantage_point_id: int, *, since: datetime) -> bool:
    runs = Run.objects.filter(vantage_point_id=vantage_point_id)
    return not (
        runs.filter(status=Run.Status.RUNNING).exists()
        or runs.filter(started_at__gte=since).exists()
    )


def _unchanged(run: Run) -> QuerySet[Run]:
    """The run, if still queued as this pass saw it (another pass or a worker may act)."""
    return Run.objects.filter(
        pk=run.pk, status=Run.Status.QUEUED, cancel_requested=False, resent_count=run.resent_count
    )


def _run_resend(run: Run, now: datetime) -> bool:
    with transaction.atomic():
        sent = _unchanged(run).update(resent_count=F("resent_count") + 1, resent_at=now)
        if sent:
            log.warning("run %s still queued: sent again to %s", run.pk, run.vantage_point.queue)
            transaction.on_commit(lambda: _enqueue([run]))
    return bool(sent)


def _run_fail_unsent(run: Run, now: datetime) -> bool:
    message = f"no worker took the run: is a worker consuming queue {run.vantage_point.queue}?"
    failed = _unchanged(run).update(
        status=Run.Status.FAILED,
        finished_at=now,
        # No worker of the vantage point took it: the tester's fault, not the endpoint's
        # (never started, class harness: models.q_never_taken, which the watch's not-run reads).
        errors=[{"class": ErrorClass.HARNESS.value, "message": message, "client": None}],
    )
    if failed:
        log.warning("run %s: %s", run.pk, message)
    return bool(failed)


def _heartbeat(run_id: int) -> ProgressBeats:
    """Beats a running run's attempts every HEARTBEAT_S from a thread (each client's bytes
    read so far, which the pages show, in the same statement; the records of clients that
    ended), and notices cancels. If the worker dies, the beats stop and the reaper ends the
    run."""

    def report(client_bytes: tuple[int, ...], finished: list[ClientRecordJson]) -> bool | None:
        try:
            return run_heartbeat(run_id=run_id, client_bytes=client_bytes, finished=finished)
        except (OperationalError, InterfaceError) as exc:
            # PostgreSQL restarting, or the connection cut: this beat is lost and the next one
            # reconnects. Beats must only stop with the worker (the reaper relies on it).
            log.warning("run %s: heartbeat missed (%s)", run_id, exc)
            connection.close()
            return None

    def close() -> None:
        # In the beats' thread: its own connection (`connection` is per thread).
        connection.close()

    return ProgressBeats(report, interval_s=HEARTBEAT_S, name=f"heartbeat-{run_id}", after=close)


def run_heartbeat(
    *, run_id: int, client_bytes: Sequence[int], finished: Sequence[ClientRecordJson]
) -> bool:
    """One beat of a running run (from its worker, or a remote agent): its running attempts
    are alive and have read `client_bytes` so far; the clients in `finished` have ended, as
    their records say (if the worker dies later, the reaper finds those attempts ended: a run
    with some is partial; ingestion writes them again, the same). True when a cancel was
    asked for."""
    now = timezone.now()
    ClientAttempt.objects.filter(run_id=run_id, status=ClientAttempt.Status.RUNNING).update(
        heartbeat_at=now, bytes_read=_bytes_read(client_bytes)
    )
    for record in finished:
        error = record["error"]
        ClientAttempt.objects.filter(
            run_id=run_id, client=record["client"], status=ClientAttempt.Status.RUNNING
        ).update(
            status=_attempt_status(error),
            heartbeat_at=now,
            finished_at=now,
            error_class=_error_class(error),
            error_message=_error_message(error),
            bytes_read=record["bytes_read"],
            record=record,
        )
    return Run.objects.filter(pk=run_id, cancel_requested=True).exists()


def _bytes_read(client_bytes: Sequence[int]) -> Case | F:
    """Each attempt's bytes read so far, by client index (unchanged where none is known)."""
    if not client_bytes:
        return F("bytes_read")
    return Case(
        *(When(client=client, then=Value(n)) for client, n in enumerate(client_bytes)),
        default=F("bytes_read"),
        output_field=BigIntegerField(),
    )
