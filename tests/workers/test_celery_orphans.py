"""A worker killed mid-run: its clients die with it, none goes on measuring beside the next
run (issue 10, item 4; killed as `kill -9` kills it, not its whole session, so orphans would
show), and the clients that had ended are kept (item 3)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.db.models import F

from tests.celery_worker import (
    REAPER_PERIOD_S,
    REAPER_STALE_S,
    REPO,
    WorkerProcess,
    session_members,
    wait_until,
)
from tests.webapp.dashboards.status_runs import watch_pass
from tests.webapp.factories import CampaignFactory
from tests.workers.test_celery import lab_endpoint
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import campaign_launch, runs_reap
from webapp.dashboards.selectors import tester_faults as tester_fault_runs
from webapp.dashboards.selectors.alerts import alerts_failing
from webapp.dashboards.selectors.site_summary import site_summary
from webapp.sites.models import Endpoint, VantagePoint
from workers.lab.relay import RelayHost, RelaySpec

pytestmark = [pytest.mark.lab, pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def measuring_run(lab: Any, vantage: str) -> Run:
    """16 clients of 1 KiB reads 2 ms away: ~30 s of measuring."""
    campaign = CampaignFactory(
        endpoints=[lab_endpoint(lab, "near-root")],
        vantage_points=[VantagePoint.objects.create(name=vantage)],
        read_sizes=[1024],
        fractions=[1.0],
        clients=[16],
    )
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    return run


def clients_of(worker: WorkerProcess) -> tuple[int, list[int]]:
    """(the pool process, the processes it started: the fork server and the clients)."""
    assert worker.process is not None
    members = session_members(worker.process.pid)
    pool = next(pid for pid in members if parent(pid) == worker.process.pid)
    return pool, [pid for pid in members if "forkserver" in cmdline(pid)]


@pytest.mark.parametrize("victim", ["pool process", "worker"])
def test_clients_die_with_their_worker_and_its_pool_process(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess], victim: str
) -> None:
    vantage = "orphans-" + victim.split(maxsplit=1)[0]
    worker = start_celery_worker(vantage)
    run = measuring_run(lab, vantage)
    wait_until(
        lambda: run.attempts.filter(heartbeat_at__gt=F("run__started_at")).exists(),
        30,
        "clients measuring",
        worker,
    )
    # The first beat may come before every client has started (a loaded host forks slowly).
    wait_until(lambda: len(clients_of(worker)[1]) >= 17, 30, "the fork server and 16 clients")
    pool, measuring = clients_of(worker)
    assert worker.process is not None
    os.kill(pool if victim == "pool process" else worker.process.pid, signal.SIGKILL)
    if victim == "worker":
        os.kill(pool, signal.SIGKILL)  # kill -9 of the worker's main and pool processes
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in measuring) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in measuring if alive(pid)] == []


def test_clients_that_ended_before_their_worker_died_are_kept_and_the_run_is_partial(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess]
) -> None:
    """8 clients read 16 MiB each through a relay (2 ms) that, mid-read, hangs for all but
    the one furthest ahead: it ends, the others hang; the worker is killed; the reaper ends
    the run partial with the record of the one that ended (issue 10, item 3)."""
    clients = 8
    with relayed_local_root(lab, rtt_ms=2.0) as (relay, endpoint):
        vantage = "partial"
        worker = start_celery_worker(vantage)
        campaign = CampaignFactory(
            endpoints=[endpoint],
            vantage_points=[VantagePoint.objects.create(name=vantage)],
            methods=["direct"],
            patterns=["sequential"],
            read_sizes=[64 * 1024],
            fractions=[1.0],
            clients=[clients],
            deadline_s=600.0,
        )
        campaign.test_files.set([endpoint.files.get(path="/fedprobe/file-16M")])
        hang_all_but_one_mid_read(relay, clients, 16 * 1024 * 1024)
        (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)

        def some_ended_while_running() -> bool:
            ended = run.attempts.filter(status=ClientAttempt.Status.OK).exists()
            return ended and Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).exists()

        wait_until(some_ended_while_running, 60, "a client's record stored as it ended", worker)
        worker.kill_host()
        wait_until(lambda: runs_reap(stale_after_s=3), 30, "reaped")
    run.refresh_from_db()
    assert run.status == Run.Status.PARTIAL
    kept = run.attempts.filter(status=ClientAttempt.Status.OK)
    assert 1 <= kept.count() < clients
    assert all(a.record["bytes_read"] == 16 * 1024 * 1024 for a in kept)
    lost = run.attempts.filter(status=ClientAttempt.Status.LOST).count()
    assert lost == clients - kept.count()
    assert_tester_fault_only(run)


def test_after_kill_9_of_a_worker_or_its_pool_process_no_client_measures_on_and_beat_reaps(
    lab: Any,
    start_celery_worker: Callable[..., WorkerProcess],
    celery_worker_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """As in production: one `kill -9` of a worker's main process (its pool process dies
    by the pdeathsig Celery gives it), one of another worker's pool process only, each
    mid-run. No client goes on measuring; the real beat and reaper (with the test workers'
    period and staleness, REAPER_ENV) end the runs, `failed` (no client had ended) and
    `partial` (some had, their records kept); the killed worker started again and the other
    one then measure again."""
    near = lab_endpoint(lab, "near-root")  # registers the lab: before relayed_local_root
    with relayed_local_root(lab, rtt_ms=2.0) as (relay, relayed):
        workers = {
            vantage: start_celery_worker(vantage, control=vantage == "reaper", wait=False)
            for vantage in ("main-killed", "pool-killed", "reaper")
        }
        with celery_beat(celery_worker_env, tmp_path) as beat_log:
            for worker in workers.values():
                worker.wait_ready()
            # 16 clients of 1 KiB reads 2 ms away (~50 s): none ends before the kill. 8
            # clients through a relay that hangs mid-read for all but one: it ends.
            failing = launch(near, "main-killed", clients=16, read=1024)
            hang_all_but_one_mid_read(relay, 8, 16 * 1024 * 1024)
            partial = launch(
                relayed, "pool-killed", clients=8, read=64 * 1024, pattern="sequential"
            )
            runs = [failing, partial]

            def both_mid_run() -> bool:
                beating = failing.attempts.filter(heartbeat_at__gt=F("run__started_at")).exists()
                ended = partial.attempts.filter(status=ClientAttempt.Status.OK).exists()
                return beating and ended and count(runs, Run.FINAL) == 0

            wait_until(both_mid_run, 60, "clients measuring and one ended", *workers.values())
            wait_until(lambda: near_connections(lab) >= 16, 10, "16 clients connected")
            killed_at = time.monotonic()
            measuring = kill_9(workers["main-killed"], workers["pool-killed"])

            # (a) No orphan: the clients and the fork servers are gone within seconds, and
            # so are their connections to the endpoint that was being read from.
            wait_until(lambda: not any(map(alive, measuring)), 5, "clients gone")
            wait_until(lambda: near_connections(lab) == 0, 5, "their connections closed")
            assert count(runs, {Run.Status.RUNNING}) == 2

            # (b) The beat's reaper ends both, unaided, by its next pass after the staleness.
            reaper = workers["reaper"]
            reaped_within = REAPER_STALE_S + REAPER_PERIOD_S + 10
            wait_until(lambda: count(runs, Run.FINAL) == 2, reaped_within + 20, "reaped", reaper)
            assert time.monotonic() - killed_at <= reaped_within
        # The beat sent the reaper, and the runs carry its message (assert_reaped). Which
        # worker of the control queue ran it is not asserted: the suite's shared worker
        # consumes that queue too when an earlier test started it.
        assert "Sending due task reap-runs (fedprobe.reap_runs)" in beat_log.read_text()
        assert_reaped(failing, Run.Status.FAILED)
        assert_reaped(partial, Run.Status.PARTIAL)

        # (c) The killed worker, started again, and the one whose pool process died measure.
        workers["main-killed-again"] = start_celery_worker("main-killed")
        relay.set_mode("test", "normal")
        after = [
            launch(relayed, vantage, clients=2, read=4096, fraction=0.01)
            for vantage in ("main-killed", "pool-killed")
        ]
        wait_until(lambda: count(after, Run.FINAL) == 2, 60, "runs after", *workers.values())
    for run in after:
        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED, run.errors
    assert [run.worker for run in after] == [
        workers["main-killed-again"].hostname,
        workers["pool-killed"].hostname,
    ]


def kill_9(main_killed: WorkerProcess, pool_killed: WorkerProcess) -> list[int]:
    """kill -9 the first worker's main process and the second's pool process; return the
    processes that were measuring for them (their pool processes, fork servers and clients)."""
    assert main_killed.process is not None
    first_pool, first_clients = clients_of(main_killed)
    second_pool, second_clients = clients_of(pool_killed)
    assert len(first_clients) >= 17 and len(second_clients) >= 2  # fork server and clients
    os.kill(main_killed.process.pid, signal.SIGKILL)
    os.kill(second_pool, signal.SIGKILL)
    return [first_pool, *first_clients, second_pool, *second_clients]


def near_connections(lab: Any) -> int:
    return int(lab.relay_stats()["near-root"]["connections_open"])


def count(runs: list[Run], statuses: Collection[str]) -> int:
    return Run.objects.filter(pk__in=[run.pk for run in runs], status__in=statuses).count()


def assert_tester_fault_only(run: Run) -> None:
    """The reaped run is the tester's fault (class lost), and no endpoint figure counts it."""
    assert run.errors[0]["class"] == "lost" and run.is_tester_fault
    lost = run.attempts.filter(status=ClientAttempt.Status.LOST)
    assert set(lost.values_list("error_class", flat=True)) == {"lost"}
    summary = site_summary(site=run.endpoint.site)
    assert run.pk not in [failure["run"] for failure in summary["recent_failures"]]
    assert all(cell["failed"] == cell["partial"] == 0 for cell in summary["site_days"])
    watch_pass()  # the alerts read what the watch stored of the night
    failing = alerts_failing(since=(run.created_at - timedelta(days=1)).date(), filters={})
    assert run.pk not in [row["run"] for row in failing]
    since = (run.created_at - timedelta(days=1)).date()
    faults = tester_fault_runs.tester_faults(since=since, filters={})
    assert (run.vantage_point.name, "lost") in [
        (f["vantage_point"], f["error_class"]) for f in faults
    ]


def assert_reaped(run: Run, status: str) -> None:
    """Ended by the reaper as `status`, no sooner than REAPER_STALE_S after its last beat,
    with its ended clients' records kept and the others lost."""
    run.refresh_from_db()
    assert run.status == status
    assert run.errors[0]["message"] == "the worker stopped reporting (lost)"
    assert_tester_fault_only(run)
    lost = run.attempts.filter(status=ClientAttempt.Status.LOST)
    kept = run.attempts.exclude(status=ClientAttempt.Status.LOST)
    assert lost.count() >= 1
    assert (kept.count() >= 1) == (status == Run.Status.PARTIAL)
    assert all(a.status == ClientAttempt.Status.OK for a in kept)
    assert all(a.record["bytes_read"] == 16 * 1024 * 1024 for a in kept)
    assert run.finished_at is not None
    last_beat = max(lost.values_list("heartbeat_at", flat=True))
    assert (run.finished_at - last_beat).total_seconds() >= REAPER_STALE_S


def launch(
    endpoint: Endpoint,
    vantage: str,
    *,
    clients: int,
    read: int,
    pattern: str = "random",
    fraction: float = 1.0,
) -> Run:
    """One run of 16 MiB from `vantage` (made on first use), `clients` reading `read` bytes."""
    campaign = CampaignFactory(
        endpoints=[endpoint],
        vantage_points=[VantagePoint.objects.get_or_create(name=vantage)[0]],
        methods=["direct"],
        patterns=[pattern],
        read_sizes=[read],
        fractions=[fraction],
        clients=[clients],
        deadline_s=600.0,
    )
    campaign.test_files.set([endpoint.files.get(path="/fedprobe/file-16M")])
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    return run


@contextlib.contextmanager
def celery_beat(env: Mapping[str, str], tmp_path: Path) -> Iterator[Path]:
    """`celery -A webapp beat` with the production schedule (its file in a VAR_DIR of the
    test's own), in a session of its own; yields its log."""
    log = tmp_path / "beat.log"
    argv = [sys.executable, "-m", "celery", "-A", "webapp", "beat", "-l", "INFO"]
    with log.open("wb") as out:
        beat = subprocess.Popen(
            argv, cwd=REPO, env={**env, "FEDPROBE_VAR_DIR": str(tmp_path / "beat-var")},
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_until(lambda: "beat: Starting..." in log.read_text(), 30, "beat started")
        yield log
    finally:
        beat.terminate()
        try:
            beat.wait(10)
        except subprocess.TimeoutExpired:
            beat.kill()
            beat.wait()


def hang_all_but_one_mid_read(relay: RelayHost, clients: int, file_size: int) -> None:
    """Once all clients have connected and read one file's worth between them (so none but
    perhaps the one furthest ahead is done), hang the relay for all but the connection that
    has received the most: that client ends, the others hang mid-read, whatever their pace."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            stats = relay.stats()["test"]
            if stats.connections_total >= clients and stats.bytes_down >= file_size:
                relay.set_mode("test", "hang", spare=1)
                return
            time.sleep(0.001)

    threading.Thread(target=watch, daemon=True).start()


def test_after_a_hang_the_same_worker_and_the_web_process_measure_the_endpoint_again(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess]
) -> None:
    """Issue 10, item 1: one XRootD endpoint hangs (a run ends timeout), recovers; the next
    run in the same pool process, and Test connection in this (long-lived) process, succeed.
    The relay keeps its port throughout, as a real endpoint keeps its address."""
    from webapp.sites.services import endpoint_test_connection

    with relayed_local_root(lab) as (relay, endpoint):
        vantage = "recovers"
        worker = start_celery_worker(vantage)
        campaign = CampaignFactory(
            endpoints=[endpoint],
            vantage_points=[VantagePoint.objects.create(name=vantage)],
            methods=["direct"],
            patterns=["random"],
            read_sizes=[4096],
            fractions=[0.01],
            clients=[2],
            deadline_s=5.0,
        )
        relay.set_mode("test", "hang")
        (hung,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
        assert not endpoint_test_connection(endpoint=endpoint).ok
        wait_until(lambda: final(hung), 60, "the hung run ended", worker)
        relay.set_mode("test", "normal")
        (again,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
        wait_until(lambda: final(again), 60, "the run after the hang", worker)
        check = endpoint_test_connection(endpoint=endpoint)
    hung.refresh_from_db()
    again.refresh_from_db()
    assert hung.status in (Run.Status.TIMEOUT, Run.Status.FAILED), hung.errors
    assert again.status == Run.Status.SUCCEEDED, again.errors
    assert again.worker == hung.worker
    assert check.ok, (check.error_class, check.message)


def final(run: Run) -> bool:
    return Run.objects.filter(pk=run.pk, status__in=Run.FINAL).exists()


@contextlib.contextmanager
def relayed_local_root(lab: Any, rtt_ms: float = 0.0) -> Iterator[tuple[RelayHost, Endpoint]]:
    """The lab's local-root endpoint registered behind a relay of the test's own (one port
    throughout, as a real endpoint keeps its address)."""
    target = urlsplit(lab.endpoint("local-root").url)
    assert target.hostname is not None and target.port is not None
    relay = RelayHost([RelaySpec("test", 0, target.hostname, target.port, rtt_ms=rtt_ms)])
    relay.start()
    try:
        endpoint = lab_endpoint(lab, "local-root")
        endpoint.base_url = f"root://127.0.0.1:{relay.relay('test').port}/"
        endpoint.save()
        yield relay, endpoint
    finally:
        relay.stop()
