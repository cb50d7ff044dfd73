"""Scheduled but not run: a vantage point that stopped taking work (no live worker, and runs
that no worker took: still queued too long, ended by the resend pass as never taken, or lost
when its worker stopped reporting; or a worker alive all along while the resend pass ended
runs as never taken) raises one tester-fault regression naming it and the command that
starts its worker. The tester faults of its series meanwhile are members of it, told with
it, not one by one. It is resolved once a worker of it is alive again (where none was) or
it takes a run (docs/watch.md#scheduled-but-not-run)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Min

from webapp.campaigns.health import VantagePointHealth, vantage_points_health
from webapp.campaigns.models import Run, q_lost, q_never_taken
from webapp.sites.models import VantagePoint
from webapp.watch.episodes import TOLD, tester_fault_open
from webapp.watch.models import Regression
from webapp.watch.states import regression_set_state

State = Regression.State
RULE = "not-run"


def not_run_key(vantage_point: VantagePoint) -> str:
    return f"vp:{vantage_point.name}:{RULE}"


@dataclass
class NotTaken:
    """A vantage point's runs that no worker took, as of a pass."""

    queued: int = 0  # still queued, longer than FEDPROBE_WATCH_NOT_RUN_AFTER_S
    never_taken: int = 0  # failed by the resend pass: no worker took them
    lost: int = 0  # their worker stopped reporting while they ran
    since: datetime | None = None  # the oldest of them was created then
    latest: datetime | None = None  # the newest sign: a queued one created, an ended one ended

    def add(self, kind: str, created_at: datetime, ended_at: datetime) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        self.since = created_at if self.since is None else min(self.since, created_at)
        self.latest = ended_at if self.latest is None else max(self.latest, ended_at)


def vantage_points_not_running(*, now: datetime) -> dict[int, Regression]:
    """Open (tester-fault) or resolve each vantage point's not-run regression as of `now`;
    returns the live ones by vantage point id (their series' tester faults are members)."""
    waiting = _since_resolved(_not_taken(now))
    live = {
        r.vantage_point_id: r
        for r in Regression.objects.filter(key__endswith=f":{RULE}", state__in=Regression.LIVE)
        if r.vantage_point_id is not None
    }
    points = list(VantagePoint.objects.filter(pk__in={*waiting, *live})) if waiting or live else []
    health = vantage_points_health(vantage_points=points, now=now) if points else {}
    for point in points:
        listening = health[point.pk].listening
        regression = live.get(point.pk)
        runs = waiting.get(point.pk)
        if point.is_revoked:
            # Retired on purpose: its runs ended as the tester's (class harness, never
            # started) by the revocation, not because no worker took them.
            if regression is not None:
                note = f"{point.name} was revoked: it takes no work by design"
                regression_set_state(regression=regression, state=State.RESOLVED, at=now, note=note)
                del live[point.pk]
        elif regression is None and runs is not None:
            if not listening:
                live[point.pk] = _open(point, runs, health[point.pk].worker_command, now)
            elif _alive_all_along(health[point.pk], runs):
                live[point.pk] = _open(
                    point, runs, health[point.pk].worker_command, now, worker_alive=True
                )
        elif regression is not None:
            if listening and not regression.blame.get("worker_alive"):
                note = f"{point.name} runs again: a worker of it is alive"
            elif _took_work(point.pk, regression, now):
                note = f"{point.name} runs again: a worker took a run"
            else:
                continue
            regression_set_state(regression=regression, state=State.RESOLVED, at=now, note=note)
            del live[point.pk]
    return live


def _not_taken(now: datetime) -> dict[int, NotTaken]:
    """Per vantage point, its runs no worker took: queued longer than the rule's wait, and
    those ended as never taken or lost within FEDPROBE_WATCH_NOT_RUN_WINDOW_S after the last
    run a worker of it took."""
    found: dict[int, NotTaken] = defaultdict(NotTaken)
    waited = now - timedelta(seconds=settings.FEDPROBE_WATCH_NOT_RUN_AFTER_S)
    queued = (
        Run.objects.filter(status=Run.Status.QUEUED, created_at__lte=waited)
        .order_by()
        .values("vantage_point")
        .annotate(runs=Count("id"), oldest=Min("created_at"), newest=Max("created_at"))
    )
    for row in queued:
        waiting = found[row["vantage_point"]]
        waiting.queued, waiting.since, waiting.latest = row["runs"], row["oldest"], row["newest"]
    window = now - timedelta(seconds=settings.FEDPROBE_WATCH_NOT_RUN_WINDOW_S)
    ended = list(
        Run.objects.filter(finished_at__gt=window, finished_at__lte=now)
        .filter(q_never_taken() | q_lost())
        .values_list("vantage_point", "created_at", "finished_at", "started_at")
    )
    took = {point: _last_took(point, now) for point in {row[0] for row in ended}}
    for point, created_at, finished_at, started_at in ended:
        last = took[point]
        if finished_at is not None and (last is None or finished_at > last):
            kind = "never_taken" if started_at is None else "lost"
            found[point].add(kind, created_at, finished_at)
    return dict(found)


def _since_resolved(waiting: dict[int, NotTaken]) -> dict[int, NotTaken]:
    """Leave out the vantage points with no sign since their not-run regression was last
    resolved (by hand, say: the vantage point is being retired), so that it stays resolved."""
    resolved = dict(
        Regression.objects.filter(
            key__endswith=f":{RULE}", state=State.RESOLVED, vantage_point__in=waiting
        )
        .order_by()
        .values("vantage_point")
        .annotate(last=Max("resolved_at"))
        .values_list("vantage_point", "last")
    )
    return {
        point: runs
        for point, runs in waiting.items()
        if (last := resolved.get(point)) is None or (runs.latest is not None and runs.latest > last)
    }


def _last_took(vantage_point_id: int, now: datetime) -> datetime | None:
    """When a worker of the vantage point last took a run that it did not lose."""
    taken = Run.objects.filter(vantage_point_id=vantage_point_id, started_at__lte=now)
    latest = taken.exclude(q_lost()).order_by("-started_at").values_list("started_at").first()
    return None if latest is None else latest[0]


def _took_work(vantage_point_id: int, regression: Regression, now: datetime) -> bool:
    """A worker took a run of the vantage point since its regression opened."""
    taken = Run.objects.filter(
        vantage_point_id=vantage_point_id,
        started_at__gt=regression.opened_at,
        started_at__lte=now,
    )
    return taken.exclude(q_lost()).exists()


def _alive_all_along(health: VantagePointHealth, runs: NotTaken) -> bool:
    """A worker listened on the queue while the resend pass failed runs as never taken (from
    before the oldest was created): alive, yet it takes no work (its consumer hung, say)."""
    return runs.never_taken > 0 and any(
        runs.since is not None and worker.started_at <= runs.since for worker in health.live_workers
    )


def _open(
    point: VantagePoint,
    runs: NotTaken,
    command: str,
    now: datetime,
    *,
    worker_alive: bool = False,
) -> Regression:
    counts = [
        f"{runs.queued} runs still queued" if runs.queued else "",
        f"{runs.never_taken} runs never taken (failed by the resend pass)"
        if runs.never_taken
        else "",
        f"{runs.lost} runs lost when its worker stopped reporting" if runs.lost else "",
    ]
    since = f" since {runs.since:%Y-%m-%d %H:%M} UTC" if runs.since else ""
    took = f"vantage point {point.name} took no work: {', '.join(c for c in counts if c)}{since}"
    if worker_alive:
        summary = (
            f"{took}, though a worker of it is alive: it does not take work from its queue; "
            f"restart it on its host: {command}"
        )
    else:
        summary = f"{took}, and no live worker; start one on its host: {command}"
    blame = {
        "target": Regression.Blame.VANTAGE_POINT,
        "rule": RULE,
        "queued_runs": runs.queued,
        "never_taken_runs": runs.never_taken,
        "lost_runs": runs.lost,
        "command": command,
        # A worker was alive all along: only a run taken resolves it, not a live worker.
        "worker_alive": worker_alive,
    }
    detector: dict[str, Any] = {
        "name": "not-run",
        "parameters": {
            "not_run_after_s": settings.FEDPROBE_WATCH_NOT_RUN_AFTER_S,
            "not_run_window_s": settings.FEDPROBE_WATCH_NOT_RUN_WINDOW_S,
        },
        # The runs waited (or were failed as never taken) from the oldest one's creation to
        # this pass.
        "baseline_window": None,
        "target_window": [(runs.since or now).isoformat(), now.isoformat()],
    }
    return tester_fault_open(
        key=not_run_key(point),
        summary=summary,
        blame=blame,
        detector=detector,
        at=now,
        vantage_point=point,
    )


def member_blame(parent: Regression) -> dict[str, str]:
    """The blame of a series' tester fault grouped under its vantage point's not-run
    regression (as a blamed group's members say theirs)."""
    return {"target": Regression.Blame.VANTAGE_POINT, "rule": RULE, "group": parent.key}


def members_attach(not_running: dict[int, Regression]) -> None:
    """Make the live tester faults of each not-running vantage point's series members of its
    regression: the ones a pass before it opened (the pass gives new ones their parent). Not
    those that were open before (their subscribers were told: they are told to the end)."""
    for point, parent in not_running.items():
        Regression.objects.filter(
            vantage_point_id=point,
            state=State.TESTER_FAULT,
            key__startswith="series:",
            parent=None,
        ).exclude(events__state__in=TOLD).update(parent=parent, blame=member_blame(parent))


def member_detach(regression: Regression) -> None:
    """A member that is bad by the site's fault again leaves the group (it is told)."""
    Regression.objects.filter(pk=regression.pk).update(parent=None, blame={})
    regression.parent, regression.blame = None, {}
