"""The Celery side: configuration, routing, and real worker processes over the test Redis."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.db import OperationalError, transaction
from django.db.models import F
from django.utils import timezone

from tests.celery_worker import REPO, WorkerProcess, wait_until
from tests.webapp.factories import (
    CampaignFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
)
from webapp.archivers.tasks import ARCHIVE_PUMP
from webapp.campaigns.dispatch import (
    LAUNCH_DUE_CAMPAIGNS,
    MEASURE_RUN,
    REAP_RUNS,
    RESEND_RUNS,
    enqueue_run,
)
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import campaign_launch, run_claim, runs_reap
from webapp.campaigns.tasks import launch_due_campaigns, measure_run, reap_runs, resend_runs
from webapp.celery import app
from webapp.demo.services import lab_register
from webapp.notifications.tasks import NOTIFY_PUMP
from webapp.sites.models import Endpoint, VantagePoint

FINAL = {s.value for s in Run.FINAL}


def lab_endpoint(lab: Any, name: str) -> Endpoint:
    lab_register(lab=lab)
    return Endpoint.objects.get(name=name)


def wait_for_final(runs: list[Run], *workers: WorkerProcess, timeout_s: float = 90) -> list[Run]:
    """The runs, reloaded once all are final; on a timeout, what the workers are doing."""
    ids = [run.pk for run in runs]

    def final() -> list[Run] | None:
        fresh = list(Run.objects.filter(pk__in=ids).select_related("vantage_point"))
        return fresh if all(run.status in FINAL for run in fresh) else None

    wait_until(final, timeout_s, f"runs {ids} final", *workers)
    return final() or []


def queued_messages(broker_url: str, queue: str) -> list[dict[str, Any]]:
    client = redis.Redis.from_url(broker_url)
    try:
        return [json.loads(raw) for raw in client.lrange(queue, 0, -1)]
    finally:
        client.close()


# -- configuration ------------------------------------------------------------------------


def test_measurements_are_acked_late_one_at_a_time_and_never_retried() -> None:
    assert measure_run.name == MEASURE_RUN
    assert measure_run.acks_late is True
    assert measure_run.reject_on_worker_lost is False
    assert not getattr(measure_run, "autoretry_for", ())
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is False
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.worker_concurrency == 1
    assert app.conf.result_backend is None


def test_control_tasks_go_to_the_control_queue_on_beat_s_schedule() -> None:
    """The reaper every 30 s; due schedules and runs to send again every minute."""
    control_tasks = [
        (REAP_RUNS, reap_runs),
        (LAUNCH_DUE_CAMPAIGNS, launch_due_campaigns),
        (RESEND_RUNS, resend_runs),
    ]
    for name, task in control_tasks:
        assert app.amqp.router.route({}, name)["queue"].name == "control"
        assert task.name == name
        assert OperationalError in task.autoretry_for
        assert task.retry_backoff and task.retry_jitter
    beat = {entry["task"]: entry["schedule"] for entry in app.conf.beat_schedule.values()}
    assert {name: beat[name] for name, _ in control_tasks} == {
        REAP_RUNS: 30.0,
        LAUNCH_DUE_CAMPAIGNS: 60.0,
        RESEND_RUNS: 60.0,
    }
    # The watch's pass hourly (tests/webapp/watch); notifications and archivers on the
    # notify queue (GOCDB's downtime refresh only when a feed is set: tests/webapp/sites).
    assert set(beat) == {
        *(name for name, _ in control_tasks),
        "fedprobe.watch",
        NOTIFY_PUMP,
        ARCHIVE_PUMP,
    }
    for pump in (NOTIFY_PUMP, ARCHIVE_PUMP):
        assert app.amqp.router.route({}, pump)["queue"].name == "notify"
        assert beat[pump] == 15.0


def test_scheduled_tasks_are_all_registered() -> None:
    # What a worker or beat does as it starts: import the app's `include` modules (without
    # this, the test depended on another test module having imported them first).
    app.loader.import_default_modules()
    scheduled = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert scheduled | set(app.conf.task_routes) <= set(app.tasks)


def broker_settings(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """webapp.settings' broker, loaded in a fresh process from `env` alone."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FEDPROBE_")}
    clean |= {"DJANGO_SETTINGS_MODULE": "webapp.settings", **env}
    code = (
        "import json; from django.conf import settings as s; "
        "print(json.dumps([s.CELERY_BROKER_URL, s.CELERY_BROKER_TRANSPORT_OPTIONS]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=clean, capture_output=True, text=True,
        check=False,
    )  # fmt: skip


def test_without_a_broker_url_the_broker_is_folders_in_var_dir(tmp_path: Path) -> None:
    done = broker_settings({"FEDPROBE_VAR_DIR": str(tmp_path)})
    url, options = json.loads(done.stdout)
    assert url.startswith("filesystem://")
    queues, control = tmp_path / "broker" / "queues", tmp_path / "broker" / "control"
    assert options["data_folder_in"] == options["data_folder_out"] == str(queues)
    assert options["control_folder"] == str(control)
    assert queues.is_dir() and control.is_dir()


def test_a_redis_broker_url_is_used_with_a_visibility_timeout() -> None:
    done = broker_settings({"FEDPROBE_BROKER_URL": "redis://redis.example:6379/2"})
    url, options = json.loads(done.stdout)
    assert (url, options["visibility_timeout"]) == ("redis://redis.example:6379/2", 900)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FEDPROBE_BROKER_URL", "kafka://broker:9092"),
        ("FEDPROBE_BROKER_URL", "127.0.0.1:6379"),
        ("FEDPROBE_BROKER_VISIBILITY_TIMEOUT_S", "0"),
        ("FEDPROBE_BROKER_VISIBILITY_TIMEOUT_S", "an hour"),
    ],
)
def test_a_malformed_broker_setting_stops_start_up_naming_it(name: str, value: str) -> None:
    done = broker_settings({"FEDPROBE_BROKER_URL": "redis://127.0.0.1:6379/0", name: value})
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and name in done.stderr


# -- sending --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_enqueue_run_sends_the_run_id_to_its_vantage_point_queue(celery_broker_url: str) -> None:
    run = RunFactory(vantage_point=VantagePointFactory(name="nobody-listens"))
    enqueue_run(run)
    (message,) = queued_messages(celery_broker_url, "vantage.nobody-listens")
    assert message["headers"]["task"] == MEASURE_RUN
    args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
    assert (args, kwargs) == ([run.pk], {})


@pytest.mark.django_db(transaction=True)
def test_a_launch_is_enqueued_on_commit_and_a_rolled_back_one_never(
    celery_broker_url: str,
) -> None:
    idle = VantagePointFactory(name="idle")
    campaign = CampaignFactory(
        endpoints=[TestFileFactory().endpoint], vantage_points=[idle], clients=[1, 2]
    )

    def launch_then_fail() -> None:
        with transaction.atomic():
            campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        launch_then_fail()
    assert queued_messages(celery_broker_url, "vantage.idle") == []
    runs = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    sent = queued_messages(celery_broker_url, "vantage.idle")
    assert sorted(json.loads(base64.b64decode(m["body"]))[0][0] for m in sent) == sorted(
        run.pk for run in runs
    )


# -- real workers over Redis ---------------------------------------------------------------


def test_a_worker_answers_a_ping_over_redis(celery_worker: WorkerProcess) -> None:
    replies = app.control.ping(destination=[celery_worker.hostname], timeout=5)
    assert replies == [{celery_worker.hostname: {"ok": "pong"}}]


def test_a_worker_measures_a_launched_campaign(lab: Any, celery_worker: WorkerProcess) -> None:
    endpoint = lab_endpoint(lab, "local-root")
    local = VantagePointFactory(name="local")
    campaign = CampaignFactory(endpoints=[endpoint], vantage_points=[local], clients=[1, 3])
    launched = campaign_launch(campaign=campaign, trigger=Run.Trigger.API)
    runs = wait_for_final(launched, celery_worker)
    assert [(r.status, r.worker) for r in runs] == [
        (Run.Status.SUCCEEDED, celery_worker.hostname)
    ] * 2, [r.errors for r in runs]
    for run in runs:
        assert run.throughput_mbps > 0
        statuses = list(run.attempts.values_list("status", flat=True))
        assert statuses == [ClientAttempt.Status.OK] * run.clients


def test_the_reaper_task_runs_on_the_control_queue(celery_worker: WorkerProcess) -> None:
    run = RunFactory()
    run_claim(run_id=run.pk, worker="gone@nowhere")
    ClientAttempt.objects.filter(run=run).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    app.send_task(REAP_RUNS)
    (run,) = wait_for_final([run], celery_worker, timeout_s=30)
    assert run.status == Run.Status.FAILED
    assert set(run.attempts.values_list("status", flat=True)) == {ClientAttempt.Status.LOST}


def test_two_vantage_points_measure_the_same_endpoint(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess]
) -> None:
    workers = {name: start_celery_worker(name, wait=False) for name in ("alpha", "beta")}
    for worker in workers.values():
        worker.wait_ready()
    endpoint = lab_endpoint(lab, "local-root")
    points = [VantagePoint.objects.create(name=name) for name in workers]
    campaign = CampaignFactory(endpoints=[endpoint], vantage_points=points)
    launched = campaign_launch(campaign=campaign, trigger=Run.Trigger.API)
    runs = wait_for_final(launched, *workers.values())
    assert {r.status for r in runs} == {Run.Status.SUCCEEDED}, [r.errors for r in runs]
    measured_from = {run.vantage_point.name: run.worker for run in runs}
    assert measured_from == {name: worker.hostname for name, worker in workers.items()}


@pytest.mark.faults
def test_a_run_whose_worker_host_is_killed_ends_once_and_a_redelivery_adds_nothing(
    lab: Any, start_celery_worker: Callable[..., WorkerProcess]
) -> None:
    victim = start_celery_worker("doomed")
    endpoint = lab_endpoint(lab, "near-root")  # 2 ms away: 1 KiB reads of 16 MiB take ~30 s
    campaign = CampaignFactory(
        endpoints=[endpoint],
        vantage_points=[VantagePoint.objects.create(name="doomed")],
        read_sizes=[1024],
        fractions=[1.0],
        clients=[16],
    )
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)

    def beating() -> bool:
        return run.attempts.filter(heartbeat_at__gt=F("run__started_at")).exists()

    wait_until(beating, 30, "clients measuring", victim)
    victim.kill_host()
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING  # killed mid-run

    wait_until(lambda: runs_reap(stale_after_s=5), 30, "reaped")
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    ended = run.finished_at
    statuses = list(run.attempts.values_list("status", flat=True))
    assert statuses == [ClientAttempt.Status.LOST] * 16

    # The killed worker never acked the message: a worker with a short visibility timeout
    # takes it back from Redis and runs it again, which must change nothing.
    heir = start_celery_worker("doomed", env={"FEDPROBE_BROKER_VISIBILITY_TIMEOUT_S": "1"})
    wait_until(lambda: " succeeded in " in heir.log(), 30, "redelivered", heir)
    run.refresh_from_db()
    assert (run.status, run.finished_at) == (Run.Status.FAILED, ended)
    assert run.attempts.count() == 16


def test_beat_starts_with_its_schedule_in_a_var_dir_it_creates(
    tmp_path: Path, celery_worker_env: dict[str, str]
) -> None:
    var = tmp_path / "not-yet" / "var"
    log = tmp_path / "beat.log"
    env = {**celery_worker_env, "FEDPROBE_VAR_DIR": str(var)}
    with log.open("wb") as out:
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "webapp", "beat", "-l", "INFO"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_until(lambda: "beat: Starting..." in log.read_text(), 30, "beat started")
        wait_until(lambda: list(var.glob("celerybeat-schedule*")), 10, "schedule file")
    finally:
        beat.terminate()
        beat.wait(10)
    assert "ERROR" not in log.read_text()
