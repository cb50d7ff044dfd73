"""`history synthesize` plants the watch's test changes, and its ground truth is what it did."""

from __future__ import annotations

import json
import statistics
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import QuerySet

from webapp.campaigns.models import Run
from webapp.sites.models import Downtime, Endpoint

pytestmark = pytest.mark.django_db
LAST = date(2026, 3, 31)


@pytest.fixture
def truth(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "truth.json"
    call_command(
        "history",
        "synthesize",
        "--endpoints=30",
        "--parameter-sets=3",  # the third copies: its throughput follows the stream rate
        "--nights=60",
        "--vantage-points=2",
        f"--last-night={LAST}",
        f"--truth={path}",
    )
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def planted(truth: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [c for c in truth["changes"] if c["kind"] == kind]


def night_of(run: Run) -> date:
    return run.created_at.date()


def copies(endpoint: str) -> QuerySet[Run]:
    return Run.objects.filter(endpoint__name=endpoint, method="copy", throughput_mbps__isnull=False)


def throughput(endpoint: str, *, before: date | None = None, since: date | None = None) -> float:
    runs = copies(endpoint)
    if before:
        runs = runs.filter(created_at__date__lt=before)
    if since:
        runs = runs.filter(created_at__date__gte=since)
    return statistics.median(runs.values_list("throughput_mbps", flat=True))


def test_truth_lists_every_kind_of_change(truth: dict[str, Any]) -> None:
    kinds = {c["kind"] for c in truth["changes"]}
    expected = {
        "step",
        "drift",
        "bad-night",
        "recovery",
        "version-change",
        "vantage-point-outage",
        "credential-expiry",
        "downtime",
    }
    assert expected <= kinds
    sizes = {c["change_pct"] for c in planted(truth, "step")}
    assert {-10.0, -20.0, -50.0, 10.0, 20.0, 50.0} <= sizes
    assert truth["last_night"] == LAST.isoformat()


def test_a_planted_step_is_in_the_runs(truth: dict[str, Any]) -> None:
    (step,) = [c for c in planted(truth, "step") if c["change_pct"] == -50.0]
    start = date.fromisoformat(step["start"])
    ratio = throughput(step["endpoint"], since=start) / throughput(step["endpoint"], before=start)
    assert 0.3 < ratio < 0.7  # half, give or take the weather of the nights around


def test_a_single_bad_night_is_bad_only_that_night(truth: dict[str, Any]) -> None:
    (bad,) = planted(truth, "bad-night")
    night = date.fromisoformat(bad["start"])
    that_night = (
        copies(bad["endpoint"])
        .filter(created_at__date=night)
        .values_list("throughput_mbps", flat=True)
    )
    usual = throughput(bad["endpoint"], before=night)
    assert that_night and max(that_night) < 0.5 * usual
    assert throughput(bad["endpoint"], since=night + timedelta(days=1)) > 0.8 * usual


def test_the_server_version_changes_on_the_night_of_the_version_change(
    truth: dict[str, Any],
) -> None:
    (change,) = planted(truth, "version-change")
    before, after = change["server_version"]
    start = date.fromisoformat(change["start"])
    versions = {
        (night_of(run) >= start, run.server_version)
        for run in Run.objects.filter(endpoint__name=change["endpoint"], status="succeeded")
    }
    assert versions == {(False, before), (True, after)}


def test_a_credential_expiry_fails_one_protocol_everywhere_with_auth(
    truth: dict[str, Any],
) -> None:
    (expiry,) = planted(truth, "credential-expiry")
    nights = [date.fromisoformat(expiry["start"]), date.fromisoformat(expiry["end"])]
    runs = Run.objects.filter(created_at__date__gte=nights[0], created_at__date__lt=nights[1])
    covered = runs.filter(endpoint__protocol=expiry["protocol"])
    assert covered.exists()
    assert {r.errors[0]["class"] for r in covered} == {"auth"}
    assert covered.values("vantage_point").distinct().count() == 2
    others = runs.exclude(endpoint__protocol=expiry["protocol"])
    assert others.filter(status="succeeded").exists()


def test_a_vantage_point_outage_fails_every_run_from_it_that_night(
    truth: dict[str, Any],
) -> None:
    (outage,) = planted(truth, "vantage-point-outage")
    night = date.fromisoformat(outage["start"])
    runs = Run.objects.filter(created_at__date=night)
    from_it = runs.filter(vantage_point__name=outage["vantage_point"])
    assert from_it.count() == 3 * Endpoint.objects.count()
    assert set(from_it.values_list("status", flat=True)) == {"timeout"}
    assert (
        runs.exclude(vantage_point__name=outage["vantage_point"])
        .filter(status="succeeded")
        .exists()
    )


def test_a_planted_downtime_is_declared_and_its_site_fails_during_it(
    truth: dict[str, Any],
) -> None:
    (downtime,) = planted(truth, "downtime")
    row = Downtime.objects.get(site__name=downtime["site"])
    assert row.start.date().isoformat() == downtime["start"]
    assert row.end.date().isoformat() == downtime["end"]
    assert row.severity == "outage" and row.scheduled
    during = Run.objects.filter(
        endpoint__site__name=downtime["site"], created_at__gte=row.start, created_at__lt=row.end
    )
    assert during.exists()
    assert set(during.values_list("status", flat=True)) == {"failed"}


def test_no_plant_plants_nothing(tmp_path: Path) -> None:
    path = tmp_path / "truth.json"
    call_command(
        "history",
        "synthesize",
        "--endpoints=30",
        "--parameter-sets=1",
        "--nights=60",
        f"--last-night={LAST}",
        f"--truth={path}",
        "--no-plant",
    )
    kinds = {c["kind"] for c in json.loads(path.read_text())["changes"]}
    assert kinds <= {"random-regression", "site-outage"}
    assert not Downtime.objects.exists()
