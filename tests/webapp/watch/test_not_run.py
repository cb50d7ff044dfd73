"""Scheduled but not run: runs waiting on a vantage point with no live worker (still queued,
failed by the resend pass as never taken, or lost) raise one tester fault naming it and the
command that starts its worker, with its series' tester faults as members; resolved once
runs flow."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.webapp.factories import EndpointFactory, SiteFactory, user
from tests.webapp.watch.nights import NIGHT_ONE, Series, at, measure, night, run, series, watch
from webapp.campaigns.agents import vantage_point_revoke
from webapp.campaigns.models import Run
from webapp.campaigns.services import runs_resend_stale
from webapp.sites.models import VantagePoint, WorkerHeartbeat
from webapp.watch import notrun
from webapp.watch.actions import regression_resolve
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.models import Regression
from webapp.watch.selectors import regression_tester_faults

pytestmark = pytest.mark.django_db


def queued(vantage_point: str, hours_ago: float) -> Run:
    return run(
        series(vantage_point=vantage_point),
        NIGHT_ONE,
        status=Run.Status.QUEUED,
        trigger=Run.Trigger.SCHEDULE,
        created=NOW - timedelta(hours=hours_ago),
    )


NOW = at(NIGHT_ONE, 6)


def test_runs_waiting_without_a_live_worker_raise_a_tester_fault_with_the_command() -> None:
    queued("remote", hours_ago=3)
    watch_evaluate(now=NOW)
    regression = Regression.objects.get(key="vp:remote:not-run")
    assert regression.state == Regression.State.TESTER_FAULT
    assert regression.vantage_point is not None and regression.vantage_point.name == "remote"
    assert "celery -A webapp worker -Q vantage.remote" in regression.summary
    assert regression.blame["target"] == "vantage-point"


def test_runs_waiting_briefly_or_with_a_live_worker_raise_nothing() -> None:
    queued("remote", hours_ago=1)
    waiting = queued("busy", hours_ago=3)
    WorkerHeartbeat.objects.create(
        hostname="busy@host",
        queue=waiting.vantage_point.queue,
        pid=1,
        started_at=NOW - timedelta(hours=5),
        last_seen=NOW - timedelta(seconds=10),
    )
    watch_evaluate(now=NOW)
    assert not Regression.objects.exists()


def test_not_run_is_resolved_once_runs_flow_again() -> None:
    waiting = queued("remote", hours_ago=3)
    watch_evaluate(now=NOW)
    taken = NOW + timedelta(minutes=30)  # a worker took it after the alert opened
    Run.objects.filter(pk=waiting.pk).update(status=Run.Status.SUCCEEDED, started_at=taken)
    watch_evaluate(now=NOW + timedelta(hours=1))
    regression = Regression.objects.get(key="vp:remote:not-run")
    assert regression.state == Regression.State.RESOLVED
    watch_evaluate(now=NOW + timedelta(hours=2))
    assert Regression.objects.count() == 1


def scheduled(
    vantage_point: str, sites: int, n: int = 0, also: tuple[Series, ...] = ()
) -> list[Series]:
    """Night `n`'s scheduled runs of `sites` new endpoints (and of the series `also`) from the
    vantage point, queued at 02:00 and left to beat's resend pass for half an hour (no worker
    takes them)."""
    made = [
        series(endpoint=EndpointFactory(site=SiteFactory()), vantage_point=vantage_point)
        for _ in range(sites)
    ]
    made += also
    for one in made:
        run(one, night(n), status=Run.Status.QUEUED, created=at(night(n)))
    for minutes in range(1, 31):
        runs_resend_stale(now=at(night(n)) + timedelta(minutes=minutes))
    return made


def heartbeat(vantage_point: str, seen: timedelta) -> None:
    WorkerHeartbeat.objects.create(
        hostname=f"{vantage_point}@host",
        queue=VantagePoint.objects.get(name=vantage_point).queue,
        pid=1,
        started_at=NOW - timedelta(hours=5),
        last_seen=NOW + seen,
    )


def members(key: str) -> list[Regression]:
    return list(Regression.objects.filter(parent__key=key))


def test_runs_the_resend_pass_failed_as_never_taken_are_one_alert_with_their_series_in_it() -> None:
    scheduled("remote", sites=3)
    watch(0)
    alert = Regression.objects.get(key="vp:remote:not-run")
    assert alert.state == Regression.State.TESTER_FAULT
    assert "3 runs never taken" in alert.summary
    assert "celery -A webapp worker -Q vantage.remote" in alert.summary
    assert alert.blame["never_taken_runs"] == 3
    grouped = members("vp:remote:not-run")
    assert [r.state for r in grouped] == [Regression.State.TESTER_FAULT] * 3
    assert {r.blame["group"] for r in grouped} == {"vp:remote:not-run"}
    assert Regression.objects.count() == 4
    assert regression_tester_faults(limit=5) == ([alert], 1)  # home lists the group alone


def test_a_killed_workers_lost_runs_are_not_run_only_while_no_worker_is_alive() -> None:
    dead, restarted = series(vantage_point="dead"), series(vantage_point="restarted")
    measure(dead, 0, "lost")
    measure(restarted, 0, "lost")
    heartbeat("restarted", seen=-timedelta(seconds=10))
    watch(0)
    alert = Regression.objects.get(key="vp:dead:not-run")
    assert "1 runs lost when its worker stopped reporting" in alert.summary
    assert members("vp:dead:not-run")[0].endpoint == dead.endpoint
    assert not Regression.objects.filter(key="vp:restarted:not-run").exists()
    assert Regression.objects.get(endpoint=restarted.endpoint).parent is None


def test_a_worker_alive_all_along_that_takes_no_work_is_one_alert_until_it_takes_a_run() -> None:
    """Its heartbeats go on (say, an agent whose health thread outlives its hung consumer)
    while the resend pass ends the runs as never taken: the vantage point stopped taking
    work all the same. A live worker does not resolve it; a run taken does."""
    waiting = scheduled("hung", sites=2)
    heartbeat("hung", seen=-timedelta(seconds=10))  # started at 01:00, before the runs
    watch(0)
    alert = Regression.objects.get(key="vp:hung:not-run")
    assert alert.state == Regression.State.TESTER_FAULT
    assert "2 runs never taken" in alert.summary
    assert "though a worker of it is alive: it does not take work" in alert.summary
    assert alert.blame["worker_alive"] is True
    assert len(members("vp:hung:not-run")) == 2
    WorkerHeartbeat.objects.filter(hostname="hung@host").update(last_seen=at(night(0), 7))
    watch_evaluate(now=at(night(0), 7))
    alert.refresh_from_db()
    assert alert.state == Regression.State.TESTER_FAULT  # alive, still taking nothing
    run(waiting[0], night(0), created=at(night(0), 7))  # taken at 07:00, ended at 07:01
    WorkerHeartbeat.objects.filter(hostname="hung@host").update(last_seen=at(night(0), 8))
    watch_evaluate(now=at(night(0), 8))
    alert.refresh_from_db()
    assert alert.state == Regression.State.RESOLVED
    assert "a worker took a run" in alert.events.latest("at").note


def test_a_worker_started_after_the_runs_were_sent_is_no_evidence_of_a_hung_one() -> None:
    """Runs failed as never taken while no worker ran, and a worker started since (not yet
    given work): nothing says it takes no work, so nothing opens."""
    scheduled("restarted", sites=2)
    WorkerHeartbeat.objects.create(
        hostname="restarted@host",
        queue=VantagePoint.objects.get(name="restarted").queue,
        pid=1,
        started_at=at(night(0), 3),
        last_seen=at(night(0), 6) - timedelta(seconds=10),
    )
    watch(0)
    assert not Regression.objects.filter(key="vp:restarted:not-run").exists()


def test_a_revoked_vantage_point_is_not_one_that_stopped_taking_work() -> None:
    """Revocation ends its runs as the tester's (never started, class harness), as the
    resend pass ends those no worker took: they are no evidence, and an open alert ends."""
    queued("retired", hours_ago=3)
    watch_evaluate(now=NOW)
    alert = Regression.objects.get(key="vp:retired:not-run")
    queued("retired", hours_ago=0.5)
    retired = VantagePoint.objects.get(name="retired")
    assert vantage_point_revoke(vantage_point=retired, now=NOW + timedelta(minutes=10)) == 2
    watch_evaluate(now=NOW + timedelta(hours=1))
    alert.refresh_from_db()
    assert alert.state == Regression.State.RESOLVED
    assert "retired was revoked" in alert.events.latest("at").note
    watch_evaluate(now=NOW + timedelta(hours=2))
    assert Regression.objects.filter(key="vp:retired:not-run").count() == 1


def test_not_taken_runs_before_the_last_run_a_worker_took_are_not_evidence() -> None:
    scheduled("remote", sites=1)
    later = series(vantage_point="remote")
    run(later, night(0), created=at(night(0), 3))  # a worker came, took it, and left
    watch(0)
    assert not Regression.objects.filter(key="vp:remote:not-run").exists()


def test_not_run_is_resolved_once_a_worker_is_alive_and_its_members_quietly_on_good_nights() -> (
    None
):
    made = scheduled("remote", sites=2)
    watch(0)
    heartbeat("remote", seen=timedelta(days=1))
    for one in made:
        measure(one, 1, "ok")
    watch(1)
    assert Regression.objects.get(key="vp:remote:not-run").state == Regression.State.RESOLVED
    grouped = members("vp:remote:not-run")
    assert [r.state for r in grouped] == [Regression.State.RESOLVED] * 2


def test_a_member_bad_by_the_sites_fault_again_leaves_the_group() -> None:
    made = scheduled("remote", sites=2)
    watch(0)
    heartbeat("remote", seen=timedelta(days=1))
    measure(made[0], 1, "auth")
    measure(made[1], 1, "ok")
    watch(1)
    broken = Regression.objects.get(endpoint=made[0].endpoint, metric="availability")
    assert (broken.state, broken.parent, broken.blame) == (Regression.State.OPEN, None, {})


def test_resolved_by_hand_it_stays_resolved_until_runs_wait_again() -> None:
    scheduled("remote", sites=1)
    watch(0)
    alert = Regression.objects.get(key="vp:remote:not-run")
    regression_resolve(regression=alert, user=user("ana"), note="retired", now=NOW)
    watch_evaluate(now=NOW + timedelta(hours=1))
    assert Regression.objects.filter(key="vp:remote:not-run").count() == 1
    scheduled("remote", sites=1, n=1)
    watch(1)
    again = Regression.objects.filter(key="vp:remote:not-run", state=Regression.State.TESTER_FAULT)
    assert again.count() == 1


def test_series_tester_faults_are_members_from_their_first_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A notification pump running during the pass never sees them without their group."""
    monkeypatch.setattr(notrun, "members_attach", lambda not_running: None)
    scheduled("remote", sites=2)
    watch(0)
    grouped = members("vp:remote:not-run")
    assert len(grouped) == 2
    assert all(r.events.get().state == Regression.State.TESTER_FAULT for r in grouped)


def test_tester_faults_opened_before_the_vantage_point_stopped_join_its_group() -> None:
    earlier = series(vantage_point="remote")
    measure(earlier, 0, "lost")
    heartbeat("remote", seen=-timedelta(seconds=10))  # a worker alive at that pass
    watch(0)
    assert Regression.objects.get(endpoint=earlier.endpoint).parent is None
    scheduled("remote", sites=1, n=1)
    watch(1)
    assert Regression.objects.get(endpoint=earlier.endpoint).parent == Regression.objects.get(
        key="vp:remote:not-run"
    )


def test_a_regression_told_open_before_the_vantage_point_stopped_is_told_on_its_own() -> None:
    broken = series(vantage_point="remote")
    measure(broken, 0, "timeout")
    watch(0)
    scheduled("remote", sites=1, n=1, also=(broken,))
    watch(1)
    regression = Regression.objects.get(endpoint=broken.endpoint, metric="availability")
    assert (regression.state, regression.parent) == (Regression.State.TESTER_FAULT, None)
    assert len(members("vp:remote:not-run")) == 1


def test_a_regression_told_open_is_not_made_a_member_later_either() -> None:
    broken = series(vantage_point="remote")
    measure(broken, 0, "timeout")
    watch(0)
    measure(broken, 1, "lost")
    heartbeat("remote", seen=timedelta(days=1, seconds=-10))  # alive at night 1's pass
    watch(1)
    scheduled("remote", sites=1, n=2)
    watch(2)
    regression = Regression.objects.get(endpoint=broken.endpoint, metric="availability")
    assert (regression.state, regression.parent) == (Regression.State.TESTER_FAULT, None)
    assert len(members("vp:remote:not-run")) == 1
