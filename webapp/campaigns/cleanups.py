"""What a lost write or copy run left on the storage, and deleting it (issue 20).

A write's or a copy's clients delete their files themselves, also after a failure or a
cancel; killed with their worker they cannot. The reaper then records a cleanup
(RunCleanup) for the run, and a worker of the run's vantage point deletes
fedprobe-<run_tag>-* where the run wrote, with the credential of the endpoint written to: a
local vantage point's through the queue (the task fedprobe.cleanup_run, run_cleanup), a
remote one's agent when it asks the agent API (webapp.campaigns.agents.agent_cleanups). Both
take what to clean from cleanup_target, are handed their cleanups by cleanups_hand_out and
report through cleanup_report: tried FEDPROBE_CLEANUP_MAX_ATTEMPTS times at most, with a
back-off, and shown on the run's page and in the API.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from webapp.campaigns.models import COPY_OPERATIONS, WRITE_OPERATIONS, Run, RunCleanup
from webapp.sites.models import Endpoint, VantagePoint
from workers.engine.cleanup import CLEANUP_TIMEOUT_S, cleanup_written
from workers.engine.errors import InvalidParams, ProbeError
from workers.engine.params import RunParams

log = logging.getLogger(__name__)

# A cleanup handed out is not handed out again for this long unless its worker reports: the
# engine's own deadline for one cleanup, a message waiting behind a run, a slow poll.
CLEANUP_LEASE_S = 10 * CLEANUP_TIMEOUT_S
# At most this many cleanups in one answer to an agent (each holds a sealed credential).
HAND_OUT_AT_ONCE = 10


@dataclass(frozen=True)
class CleanupTarget:
    """Where a run wrote: the directories (`urls`) its files are in, the endpoint whose
    credential deletes there, and the tag in their names (Run.run_tag)."""

    run_id: int
    run_tag: str
    urls: tuple[str, ...]
    endpoint: Endpoint

    def params(self) -> RunParams:
        """The engine's parameters of a cleanup on this host: the endpoint's credential (an
        oauth client's token), this host's egress policy, CA folder and file roots.
        InvalidParams or ProbeError as Endpoint.engine_params."""
        measured = RunParams(urls=self.urls, run_tag=self.run_tag, timeout_s=CLEANUP_TIMEOUT_S)
        return self.endpoint.engine_params(measured)


def cleanup_target(run: Run) -> CleanupTarget | None:
    """What `run` may have left: a write's files in its endpoint's scratch directory, a
    copy's in its destination endpoint's (deleted with that endpoint's credential, not the
    source's); None for a run that writes nothing, or has nowhere it wrote."""
    if run.operation not in WRITE_OPERATIONS | COPY_OPERATIONS:
        return None
    # Both write into the scratch directory of that endpoint (Run.measured_params).
    copy = run.operation in COPY_OPERATIONS
    written_to = run.destination_endpoint if copy else run.endpoint
    scratch = written_to.scratch_url() if written_to is not None else None
    if written_to is None or not scratch:
        return None
    return CleanupTarget(run.pk, run.run_tag, (scratch,), written_to)


def cleanup_record(run: Run, *, now: datetime | None = None) -> RunCleanup | None:
    """Record that `run` (just ended as lost) is to be cleaned up, if it wrote anything; at
    once due. Recording it twice records it once."""
    if cleanup_target(run) is None:
        return None
    cleanup, _ = RunCleanup.objects.get_or_create(
        run=run, defaults={"due_at": now or timezone.now()}
    )
    return cleanup


def cleanups_hand_out(
    *, vantage_points: QuerySet[VantagePoint], now: datetime, limit: int = HAND_OUT_AT_ONCE
) -> list[RunCleanup]:
    """The due cleanups of runs of `vantage_points`, each now counted as one more attempt
    and held for CLEANUP_LEASE_S (no other worker gets it meanwhile). One handed out
    FEDPROBE_CLEANUP_MAX_ATTEMPTS times whose last attempt never reported gives up."""
    with transaction.atomic():
        due = (
            RunCleanup.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                status=RunCleanup.Status.PENDING,
                due_at__lte=now,
                run__vantage_point__in=vantage_points,
            )
            .select_related("run")
            .order_by("due_at", "pk")
        )
        handed: list[RunCleanup] = []
        for cleanup in due[: limit * 2]:
            if cleanup.attempts >= settings.FEDPROBE_CLEANUP_MAX_ATTEMPTS:
                _give_up(cleanup, now, cleanup.error or "its last attempt never reported")
                continue
            if len(handed) == limit:
                break
            cleanup.attempts += 1
            cleanup.due_at = now + timedelta(seconds=CLEANUP_LEASE_S)
            cleanup.save(update_fields=["attempts", "due_at"])
            handed.append(cleanup)
    return handed


def cleanup_report(
    *, run_id: int, deleted: int | None = None, error: str = "", now: datetime | None = None
) -> bool:
    """What a cleanup's attempt did: `deleted` files (done), or an `error` (tried again
    after a back-off, or given up after FEDPROBE_CLEANUP_MAX_ATTEMPTS). False when the run
    has no cleanup, or it ended already (a late report of a success still counts: the files
    are gone)."""
    now = now or timezone.now()
    with transaction.atomic():
        cleanup = RunCleanup.objects.select_for_update().filter(run_id=run_id).first()
        if cleanup is None or cleanup.status == RunCleanup.Status.DONE:
            return False
        if deleted is not None:
            cleanup.status, cleanup.deleted, cleanup.error = RunCleanup.Status.DONE, deleted, ""
            cleanup.finished_at = now
            cleanup.save(update_fields=["status", "deleted", "error", "finished_at"])
            log.info("run %s: cleanup deleted %d files", run_id, deleted)
            return True
        if cleanup.status == RunCleanup.Status.GAVE_UP:
            return False
        log.warning("run %s: cleanup attempt %d failed: %s", run_id, cleanup.attempts, error)
        if cleanup.attempts >= settings.FEDPROBE_CLEANUP_MAX_ATTEMPTS:
            _give_up(cleanup, now, error)
            return True
        backoff_s = settings.FEDPROBE_CLEANUP_RETRY_S * 2 ** max(cleanup.attempts - 1, 0)
        cleanup.error, cleanup.due_at = error[:2000], now + timedelta(seconds=backoff_s)
        cleanup.save(update_fields=["error", "due_at"])
    return True


def _give_up(cleanup: RunCleanup, now: datetime, error: str) -> None:
    log.warning(
        "run %s: cleanup given up after %d attempts: %s", cleanup.run_id, cleanup.attempts, error
    )
    cleanup.status, cleanup.error, cleanup.finished_at = (
        RunCleanup.Status.GAVE_UP,
        error[:2000],
        now,
    )
    cleanup.save(update_fields=["status", "error", "finished_at"])


def cleanups_dispatch_local(*, now: datetime) -> list[int]:
    """Send the due cleanups of the deployment's own vantage points to their queues (a
    remote vantage point's agent asks for its own); the ids of their runs."""
    from webapp.campaigns.dispatch import enqueue_cleanup

    local = VantagePoint.objects.filter(enrolled_at__isnull=True)
    handed = cleanups_hand_out(vantage_points=local, now=now, limit=100)
    for cleanup in handed:
        enqueue_cleanup(cleanup.run)
    return [cleanup.run_id for cleanup in handed]


def run_cleanup(*, run_id: int) -> list[str]:
    """A local worker's cleanup of run `run_id` (the task fedprobe.cleanup_run): delete the
    files cleanup_target names, with the credential of the endpoint written to; return
    their URLs. A failure is reported (the cleanup is tried again later), not raised."""
    run = Run.objects.select_related("endpoint", "destination_endpoint", "test_file").get(pk=run_id)
    target = cleanup_target(run)
    if target is None:
        return []
    try:
        params = target.params()
        deleted: list[str] = cleanup_written(
            run_tag=target.run_tag,
            urls=target.urls,
            credential=params.credential,
            credential_hosts=params.credential_hosts,
            ca_dir=params.ca_dir,
            egress=params.egress,
            file_roots=params.file_roots,
        )
    except InvalidParams as exc:
        cleanup_report(run_id=run_id, error=f"{exc.field}: {exc.message}")
        return []
    except ProbeError as exc:
        cleanup_report(run_id=run_id, error=f"{exc.error_class}: {exc.message}")
        return []
    cleanup_report(run_id=run_id, deleted=len(deleted))
    return deleted
