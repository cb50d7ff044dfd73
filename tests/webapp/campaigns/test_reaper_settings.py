"""The reaper's staleness and the beat periods of the reaper and the resend pass are settings
read from the environment: production's 60 s, 30 s and 60 s by default, as the docs say, used
by runs_reap and the beat schedule, and a malformed value stops start-up naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.celery_worker import REPO
from tests.webapp.factories import CampaignFactory, TestFileFactory
from webapp.campaigns.models import ClientAttempt, Run
from webapp.campaigns.services import HEARTBEAT_S, campaign_launch, run_claim, runs_reap

NAMES = ("FEDPROBE_REAPER_STALE_S", "FEDPROBE_REAPER_PERIOD_S", "FEDPROBE_RESEND_PERIOD_S")


def settings_in_a_fresh_process(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The three settings and the beat's periods (by task), loaded from `env` alone."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FEDPROBE_")}
    clean |= {"DJANGO_SETTINGS_MODULE": "webapp.settings", **env}
    code = (
        "import json; from django.conf import settings as s; print(json.dumps(["
        f"[getattr(s, n) for n in {list(NAMES)!r}], "
        "{e['task']: e['schedule'] for e in s.CELERY_BEAT_SCHEDULE.values()}], default=str))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=clean, capture_output=True, text=True,
        check=False,
    )  # fmt: skip


def test_production_defaults_are_a_minute_stale_reaped_every_30_s_resent_every_minute() -> None:
    done = settings_in_a_fresh_process({})
    values, beat = json.loads(done.stdout)
    assert values == [60, 30, 60], done.stderr
    assert beat["fedprobe.reap_runs"] == 30.0
    assert beat["fedprobe.resend_runs"] == 60.0
    docs = " ".join((REPO / "docs" / "deployment.md").read_text().split())
    for name, default in zip(NAMES, values, strict=True):
        assert f"`{name}` ({default}," in docs


def test_the_beat_schedule_follows_the_environment() -> None:
    env = dict(zip(NAMES, ("9", "2", "7"), strict=True))
    done = settings_in_a_fresh_process(env)
    values, beat = json.loads(done.stdout)
    assert values == [9, 2, 7], done.stderr
    assert beat["fedprobe.reap_runs"] == 2.0
    assert beat["fedprobe.resend_runs"] == 7.0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        # Not more than how often a live client beats: it would be reaped between beats.
        ("FEDPROBE_REAPER_STALE_S", str(int(HEARTBEAT_S))),
        ("FEDPROBE_REAPER_STALE_S", "1m"),
        ("FEDPROBE_REAPER_PERIOD_S", "0"),
        ("FEDPROBE_RESEND_PERIOD_S", "-60"),
    ],
)
def test_a_malformed_reaper_setting_stops_start_up_naming_it(name: str, value: str) -> None:
    done = settings_in_a_fresh_process({name: value})
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and name in done.stderr


@pytest.mark.django_db
def test_the_reaper_ends_runs_stale_for_the_configured_time_only(settings: Any) -> None:
    (run,) = campaign_launch(
        campaign=CampaignFactory(endpoints=[TestFileFactory().endpoint]), trigger=Run.Trigger.MANUAL
    )
    run_claim(run_id=run.pk, worker="gone")
    ClientAttempt.objects.filter(run=run).update(
        heartbeat_at=timezone.now() - timedelta(seconds=20)
    )
    settings.FEDPROBE_REAPER_STALE_S = 60
    assert runs_reap() == 0
    settings.FEDPROBE_REAPER_STALE_S = 10
    assert runs_reap() == 1
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
