"""Worker and queue health from the heartbeat rows: live, gone after the staleness or at once
when stopped, queued runs per vantage point, the broker's count, and the pages and API that
show them. Real workers writing the rows: tests/workers/test_celery_health.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests.celery_worker import REPO
from tests.servers import celery_sends_to, free_port
from tests.webapp.factories import CampaignFactory, RunFactory, VantagePointFactory
from webapp.campaigns.health import (
    broker_message_counts,
    vantage_points_health,
    worker_heartbeat,
    worker_stopped,
)
from webapp.campaigns.models import Run
from webapp.celery import app
from webapp.sites.models import VantagePoint

pytestmark = pytest.mark.django_db

DOCS = REPO / "docs" / "workers.md"


def beat(vantage_point: VantagePoint, *, at: Any = None, hostname: str = "w1@host") -> None:
    now = at or timezone.now()
    worker_heartbeat(
        hostname=hostname,
        queues=[vantage_point.queue, "control"],
        pid=4242,
        version="0.1.0",
        started_at=now - timedelta(minutes=5),
        current_run_id=None,
        now=now,
    )


def test_a_worker_counts_as_live_until_its_last_heartbeat_is_older_than_the_staleness(
    settings: Any,
) -> None:
    settings.FEDPROBE_WORKER_STALE_S = 120
    cern = VantagePointFactory(name="cern")
    seen = timezone.now()
    beat(cern, at=seen)

    def health(after_s: float) -> Any:
        now = seen + timedelta(seconds=after_s)
        return vantage_points_health(vantage_points=[cern], now=now)[cern.pk]

    assert health(119).listening
    assert health(119).live_workers[0].hostname == "w1@host"
    gone = health(121)
    assert not gone.listening
    assert gone.last_seen == seen
    assert gone.workers[0].live is False


def test_a_stopped_worker_is_gone_at_once_and_a_new_heartbeat_brings_it_back() -> None:
    cern = VantagePointFactory(name="cern")
    beat(cern)
    assert worker_stopped(hostname="w1@host", pid=4242, now=timezone.now()) == 2
    health = vantage_points_health(vantage_points=[cern])[cern.pk]
    assert not health.listening
    assert health.workers[0].stopped_at is not None
    beat(cern)
    assert vantage_points_health(vantage_points=[cern])[cern.pk].listening


def test_the_staleness_is_two_minutes_by_default_as_the_docs_say() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"FEDPROBE_WORKER_STALE_S", "FEDPROBE_WORKER_HEARTBEAT_S"}
    }
    env["DJANGO_SETTINGS_MODULE"] = "webapp.settings"
    script = "import webapp.settings as s; print(s.FEDPROBE_WORKER_HEARTBEAT_S, s.FEDPROBE_WORKER_STALE_S)"  # noqa: E501
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.split() == ["30", "120"], done.stderr
    docs = " ".join(DOCS.read_text().split())
    assert "`FEDPROBE_WORKER_HEARTBEAT_S` (default 30 s)" in docs
    assert "`FEDPROBE_WORKER_STALE_S` (default 120 s, 2 minutes" in docs


def test_a_staleness_not_above_the_heartbeat_period_stops_start_up() -> None:
    env = {**os.environ, "FEDPROBE_WORKER_HEARTBEAT_S": "30", "FEDPROBE_WORKER_STALE_S": "30"}
    env["DJANGO_SETTINGS_MODULE"] = "webapp.settings"
    done = subprocess.run(
        [sys.executable, "-c", "import webapp.settings"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "FEDPROBE_WORKER_STALE_S must be more than FEDPROBE_WORKER_HEARTBEAT_S" in done.stderr


def test_health_counts_queued_runs_per_vantage_point_in_two_queries(
    django_assert_num_queries: Any,
) -> None:
    cern, ral = VantagePointFactory(name="cern"), VantagePointFactory(name="ral")
    for _ in range(3):
        RunFactory(vantage_point=cern)
    RunFactory(vantage_point=ral)
    RunFactory(vantage_point=ral, status=Run.Status.RUNNING)
    beat(ral)
    beat(ral, hostname="w2@other")
    with django_assert_num_queries(2):
        health = vantage_points_health(vantage_points=[cern, ral])
    assert (health[cern.pk].queued_runs, health[ral.pk].queued_runs) == (3, 1)
    assert [w.hostname for w in health[ral.pk].live_workers] == ["w2@other", "w1@host"]
    assert health[cern.pk].workers == []
    assert health[cern.pk].broker_messages is None  # not asked


def test_the_broker_count_is_of_messages_no_worker_has_taken(celery_broker_url: str) -> None:
    queue = "vantage.health-nobody"
    with celery_sends_to(celery_broker_url):
        assert broker_message_counts(queues=[queue]) == {queue: 0}
        app.send_task("fedprobe.measure_run", args=[0], queue=queue)
        app.send_task("fedprobe.measure_run", args=[0], queue=queue)
        assert broker_message_counts(queues=[queue, "vantage.health-other"]) == {
            queue: 2,
            "vantage.health-other": 0,
        }


def test_a_broker_that_does_not_answer_costs_only_the_count() -> None:
    with celery_sends_to(f"redis://127.0.0.1:{free_port()}/0"):
        assert broker_message_counts(queues=["vantage.cern"]) == {}
        cern = VantagePointFactory(name="cern")
        health = vantage_points_health(vantage_points=[cern], broker=True)[cern.pk]
    assert health.broker_messages is None
    assert health.queued_runs == 0


# -- pages and API -------------------------------------------------------------------------


def test_the_vantage_points_page_warns_where_no_worker_listens(
    viewer: Client, celery_broker_url: str
) -> None:
    cern, ral = VantagePointFactory(name="cern"), VantagePointFactory(name="ral")
    RunFactory(vantage_point=cern)
    RunFactory(vantage_point=cern)
    beat(ral)
    with celery_sends_to(celery_broker_url):
        text = viewer.get("/vantage-points/").content.decode()
    rows = {name: row for name, row in re.findall(r"<tr>\s*<td>(\w+)(.*?)</tr>", text, re.S)}
    assert "No worker listening: runs will wait." in rows["cern"]
    assert (
        "<code>celery -A webapp worker -Q vantage.cern --concurrency 1 -n cern@%h</code>"
        in (rows["cern"].split("No worker listening", 1)[1])
    )
    assert "2 queued runs" in rows["cern"]
    assert "0 messages in the broker" in rows["cern"]
    assert "No worker listening" not in rows["ral"]
    assert "1 listening" in rows["ral"] and "<code>w1@host</code>" in rows["ral"]
    assert "0 queued runs" in rows["ral"]
    assert "one not heard from for 120 s" in text


def test_the_vantage_points_page_links_the_run_a_worker_is_measuring(viewer: Client) -> None:
    cern = VantagePointFactory(name="cern")
    run = RunFactory(vantage_point=cern, status=Run.Status.RUNNING)
    now = timezone.now()
    worker_heartbeat(
        hostname="w1@host",
        queues=[cern.queue],
        pid=1,
        version="0.1.0",
        started_at=now,
        current_run_id=run.pk,
        now=now,
    )
    text = viewer.get("/vantage-points/").content.decode()
    assert f'measuring <a href="/runs/{run.pk}/">run {run.pk}</a>' in text


def test_the_campaign_page_warns_before_launch_when_a_vantage_point_has_no_worker(
    viewer: Client,
) -> None:
    cern, ral = VantagePointFactory(name="cern"), VantagePointFactory(name="ral")
    campaign = CampaignFactory(vantage_points=[cern, ral])
    beat(ral)
    text = viewer.get(f"/campaigns/{campaign.pk}/").content.decode()
    warning = text.split('<section class="message warning no-worker"', 1)[1].split("</section>")[0]
    assert "Runs of this campaign from <strong>cern</strong> will wait" in warning
    assert "ral" not in warning.split("Start one")[0]
    assert "<code>celery -A webapp worker -Q vantage.cern --concurrency 1 -n cern@%h</code>" in (
        warning
    )
    beat(cern)
    text = viewer.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "no-worker" not in text and "No worker listening" not in text


def test_home_has_a_health_line_per_vantage_point(viewer: Client) -> None:
    cern, ral = VantagePointFactory(name="cern"), VantagePointFactory(name="ral")
    RunFactory(vantage_point=cern)
    beat(ral)
    text = viewer.get("/").content.decode()
    lines = re.findall(r'<li class="worker-health[^"]*">(.*?)</li>', text, re.S)
    by_name = {re.search(r">(\w+)</a>", line).group(1): line for line in lines}  # type: ignore[union-attr]
    assert "no worker listening" in by_name["cern"]
    assert "1 queued run that will wait" in by_name["cern"]
    assert "1 worker listening" in by_name["ral"]
    assert '<li class="worker-health no-worker">' in text


def test_the_api_gives_each_vantage_point_its_health(
    viewer: Client, celery_broker_url: str
) -> None:
    cern, ral = VantagePointFactory(name="cern"), VantagePointFactory(name="ral")
    RunFactory(vantage_point=cern)
    beat(ral)
    api = APIClient()
    api.force_authenticate(viewer.user)  # type: ignore[attr-defined]
    with celery_sends_to(celery_broker_url):
        listed = api.get("/api/v1/vantage-points/").json()
        one = api.get(f"/api/v1/vantage-points/{cern.pk}/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    health = {row["name"]: row["health"] for row in rows}
    assert health["cern"] == one["health"]
    assert health["cern"] | {"stale_after_s": 0} == {
        "listening": False,
        "last_seen": None,
        "workers": [],
        "queued_runs": 1,
        "broker_messages": 0,
        "stale_after_s": 0,
    }
    assert health["ral"]["listening"] is True
    worker = health["ral"]["workers"][0]
    assert set(worker) == {
        "hostname",
        "pid",
        "version",
        "started_at",
        "last_seen",
        "stopped_at",
        "current_run",
        "live",
    }
    assert (worker["hostname"], worker["pid"], worker["live"]) == ("w1@host", 4242, True)
    schema = api.get("/api/schema/?format=json").json()
    fields = schema["components"]["schemas"]["VantagePoint"]["properties"]
    assert fields["health"]["readOnly"] is True
    assert "VantagePointHealth" in schema["components"]["schemas"]
