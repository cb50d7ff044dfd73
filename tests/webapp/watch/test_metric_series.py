"""A metric's series through the pass: a step worse is suspicious the first night, a
regression once confirmed, names the server (or client) version that came with it, and
resolves after the good nights; the pass command and the task run the same pass."""

from __future__ import annotations

import os
import random
import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from tests.celery_worker import WorkerProcess, wait_until
from tests.webapp.sqlite import only_on_postgresql
from tests.webapp.watch.nights import Series, at, night, run, series
from webapp.celery import app
from webapp.notifications.messages import event_message
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.models import Regression, WatchPass
from webapp.watch.tasks import WATCH

pytestmark = pytest.mark.django_db
State = Regression.State
BEFORE = 30


def measure(
    of: Series, nights: range, *, level: float, version: str, client: str = "", seed: int = 1
) -> None:
    rng = random.Random(seed)
    for n in nights:
        value = level * (1 + rng.gauss(0, 0.03))
        run(of, night(n), throughput_mbps=value, server_version=version, client_version=client)


def throughput(of: Series) -> Regression:
    return Regression.objects.get(endpoint=of.endpoint, metric="throughput_mbps")


@pytest.mark.sqlite
def test_step_is_pending_then_a_confirmed_regression_naming_the_new_version() -> None:
    one = series()
    measure(one, range(BEFORE), level=100.0, version="5.6.1")
    watch_evaluate(now=at(night(BEFORE - 1), 6))
    assert not Regression.objects.exists()
    measure(one, range(BEFORE, BEFORE + 6), level=55.0, version="5.6.2", seed=2)
    watch_evaluate(now=at(night(BEFORE), 6))
    assert throughput(one).state == State.PENDING
    for n in range(BEFORE + 1, BEFORE + 6):
        watch_evaluate(now=at(night(n), 6))
    regression = throughput(one)
    assert regression.state == State.OPEN
    assert (regression.tier, regression.verdict) == ("shift", "regression")
    assert regression.change_night == night(BEFORE)
    assert regression.versions[0]["version"] == "5.6.2"
    assert regression.versions[0]["first_seen"] == night(BEFORE).isoformat()
    assert "began with server version 5.6.2, first seen" in regression.summary
    assert regression.detector["name"]
    assert regression.change_pct is not None and regression.change_pct < -30


@pytest.mark.sqlite
def test_a_step_that_starts_with_a_client_version_change_names_the_client_version() -> None:
    one = series()
    old, new = "xrootd 5.6.1 (Python bindings)", "xrootd 5.6.2 (Python bindings)"
    measure(one, range(BEFORE), level=100.0, version="5.6.1", client=old)
    measure(one, range(BEFORE, BEFORE + 6), level=55.0, version="5.6.1", client=new, seed=2)
    for n in range(BEFORE - 1, BEFORE + 6):
        watch_evaluate(now=at(night(n), 6))
    regression = throughput(one)
    assert (regression.state, regression.verdict) == (State.OPEN, "regression")
    assert regression.versions == [
        {"kind": "client", "version": new, "first_seen": night(BEFORE).isoformat(), "previous": old}
    ]
    assert f"began with client version {new}, first seen {night(BEFORE)}" in regression.summary
    assert "server version" not in regression.summary
    opened = regression.events.get(state=State.OPEN)  # what subscribers are sent
    message = event_message(event=opened, kind="confirmed", key="test")
    assert f"began with client version {new}" in message.text


def test_confirmed_regression_resolves_after_good_nights_at_its_old_level() -> None:
    one = series()
    measure(one, range(BEFORE), level=100.0, version="5.6.1")
    measure(one, range(BEFORE, BEFORE + 5), level=55.0, version="5.6.1", seed=2)
    for n in range(BEFORE - 1, BEFORE + 5):
        watch_evaluate(now=at(night(n), 6))
    assert throughput(one).state == State.OPEN
    assert throughput(one).versions == []
    measure(one, range(BEFORE + 5, BEFORE + 5 + 3), level=100.0, version="5.6.1", seed=3)
    for n in range(BEFORE + 5, BEFORE + 5 + 3):
        watch_evaluate(now=at(night(n), 6))
    states = list(throughput(one).events.values_list("state", flat=True))
    assert states[-2:] == ["recovering", "resolved"]


def test_watch_command_runs_one_pass_and_prints_what_changed() -> None:
    from io import StringIO

    one = series()
    run(one, night(0), status="timeout")
    output = StringIO()
    call_command("watch", "--now", at(night(0), 6).isoformat(), stdout=output)
    assert "new -> open" in output.getvalue()
    assert WatchPass.objects.get().evaluated == [night(0).isoformat()]
    took = re.search(r"took [\d.]+ s \((.*)\)", output.getvalue())
    assert took is not None, output.getvalue()
    assert [p.split()[0] for p in took.group(1).split(", ")] == [
        "rollup",
        "latest",
        "evaluation",
        "tester",
    ]


def test_watch_task_runs_on_the_control_queue_from_beat() -> None:
    assert WATCH in app.tasks
    assert settings.CELERY_TASK_ROUTES[WATCH] == {"queue": "control"}
    assert settings.CELERY_BEAT_SCHEDULE["watch"]["task"] == WATCH


@only_on_postgresql
def test_pass_while_another_runs_does_nothing() -> None:
    import psycopg

    from webapp.watch.evaluate import PASS_LOCK

    one = series()
    run(one, night(0), status="timeout")
    url = os.environ["DATABASE_URL"].replace("postgres://", "postgresql://", 1)
    with psycopg.connect(url.rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [PASS_LOCK])
        assert watch_evaluate(now=at(night(0), 6)).skipped
        assert not Regression.objects.exists()
        other.execute("SELECT pg_advisory_unlock(%s)", [PASS_LOCK])  # closing is not waited for
    assert not watch_evaluate(now=at(night(0), 6)).skipped
    assert Regression.objects.exists()


def test_beat_s_watch_task_runs_a_pass_on_the_control_worker(celery_worker: WorkerProcess) -> None:
    one = series()
    run(one, (timezone.now() - timedelta(days=1)).date(), status="timeout")
    app.send_task(WATCH)
    wait_until(Regression.objects.exists, 60, "a pass opened a regression", celery_worker)
    assert availability_state(one) == State.OPEN


def availability_state(of: Series) -> str:
    return str(Regression.objects.get(endpoint=of.endpoint, metric="availability").state)
