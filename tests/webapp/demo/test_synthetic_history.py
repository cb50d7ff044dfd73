"""`manage.py history synthesize|clear`: synthetic nightly history in PostgreSQL (and SQLite)."""

from __future__ import annotations

import io
from datetime import date, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count, F, Max, Min
from django.db.models.functions import TruncDay

from tests.webapp.factories import RunFactory
from webapp.campaigns.models import Campaign, Run, ScheduledLaunch
from webapp.demo.synthetic import FILE_SIZE, SYNTHETIC_PREFIX
from webapp.sites.models import Endpoint, Site, VantagePoint
from workers.engine.params import needed_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]
LAST = date(2026, 3, 31)


def synthesize(*extra: str, nights: int = 20, endpoints: int = 6, sets: int = 3) -> None:
    call_command(
        "history",
        "synthesize",
        f"--endpoints={endpoints}",
        f"--parameter-sets={sets}",
        f"--nights={nights}",
        f"--last-night={LAST}",
        *extra,
    )


def test_one_scheduled_run_per_night_endpoint_parameter_set_and_vantage_point() -> None:
    synthesize("--vantage-points=2")
    runs = Run.objects.all()
    assert runs.count() == 20 * 6 * 3 * 2
    assert set(runs.values_list("trigger", flat=True)) == {Run.Trigger.SCHEDULE}
    assert Campaign.objects.filter(name__startswith=SYNTHETIC_PREFIX).count() == 3
    assert ScheduledLaunch.objects.count() == 3 * 20
    cells = runs.values(
        "endpoint", "vantage_point", "method", "pattern", "read_size", "fraction", "clients"
    )
    per_night = cells.annotate(day=TruncDay("created_at")).annotate(n=Count("id"))
    assert {row["n"] for row in per_night} == {1}
    span = runs.aggregate(first=Min("created_at"), last=Max("created_at"))
    assert span["first"].date() == LAST - timedelta(days=19)
    assert span["last"].date() == LAST
    assert not runs.exclude(status__in=Run.FINAL).exists()


def test_figures_are_consistent_with_each_other() -> None:
    synthesize(nights=30)
    measured = Run.objects.filter(status__in=["succeeded", "partial"])
    assert measured.count() > 0.9 * Run.objects.count()
    for run in measured:
        needed = run.clients * needed_bytes(run.fraction, FILE_SIZE)
        assert run.bytes_requested == needed
        assert run.bytes_read == needed or run.status == "partial"
        assert run.bytes_wire >= run.bytes_read
        if run.method != "direct":
            assert run.bytes_wire >= FILE_SIZE
        assert run.latency_p50_us <= run.latency_p90_us <= run.latency_p99_us
        assert run.latency_p99_us <= run.latency_max_us
        assert run.throughput_mbps == pytest.approx(
            run.bytes_read / run.wall_s / 1e6, rel=1e-3, abs=1e-3
        )
        assert 0 < run.open_s < run.wall_s
        assert run.started_at <= run.finished_at
        assert run.served_by


def test_failures_have_error_classes_and_no_figures() -> None:
    synthesize(nights=60, endpoints=12)
    failed = Run.objects.filter(status__in=["failed", "timeout"])
    assert failed.exists()
    assert failed.filter(status="timeout").exists()
    assert not failed.filter(throughput_mbps__isnull=False).exists()
    for run in failed:
        assert run.errors
        classes = {error["class"] for error in run.errors}
        assert classes == {"timeout"} if run.status == "timeout" else "timeout" not in classes


def test_throughput_differs_by_site_and_moves_from_night_to_night() -> None:
    synthesize(nights=30, sets=1)
    runs = Run.objects.filter(status="succeeded")
    by_endpoint = runs.values("endpoint").annotate(low=Min("throughput_mbps"))
    assert len({round(row["low"], 1) for row in by_endpoint}) == 6
    one = runs.filter(endpoint=by_endpoint[0]["endpoint"]).values_list("throughput_mbps", flat=True)
    assert len(set(one)) > 20


def test_sites_have_tiers_storage_and_several_protocols() -> None:
    synthesize(endpoints=8)
    sites = Site.objects.filter(name__startswith=SYNTHETIC_PREFIX)
    assert sites.count() == 2
    assert all(site.tier and site.storage_system for site in sites)
    endpoints = Endpoint.objects.filter(site__in=sites)
    assert set(endpoints.values_list("protocol", flat=True)) == {"root", "https", "davs", "http"}
    assert not endpoints.filter(enabled=True).exists()  # their schedules launch nothing
    assert all(endpoint.default_file is not None for endpoint in endpoints)


def test_repetitions_measure_each_cell_again_each_night() -> None:
    synthesize("--repetitions=3", nights=4, endpoints=2, sets=1)
    runs = Run.objects.all()
    assert runs.count() == 4 * 2 * 3
    per_cell = runs.values("endpoint", "created_at").annotate(n=Count("id"), last=Max("repetition"))
    assert {(row["n"], row["last"]) for row in per_cell} == {(3, 2)}
    assert Campaign.objects.get().repetitions == 3
    assert len(set(runs.values_list("throughput_mbps", flat=True))) > 20


def test_one_site_is_enough() -> None:
    synthesize(endpoints=3, nights=12, sets=1)
    assert Site.objects.count() == 1
    assert Run.objects.count() == 3 * 12


def test_refuses_to_add_twice_and_clear_replaces() -> None:
    synthesize(nights=5)
    with pytest.raises(CommandError, match="--clear"):
        synthesize(nights=5)
    synthesize("--clear", nights=4)
    assert Run.objects.count() == 4 * 6 * 3


def test_clear_removes_only_synthetic_rows() -> None:
    kept = RunFactory(status="succeeded")
    synthesize(nights=5)
    call_command("history", "clear")
    assert list(Run.objects.all()) == [kept]
    assert not Site.objects.filter(name__startswith=SYNTHETIC_PREFIX).exists()
    assert not VantagePoint.objects.filter(name__startswith=SYNTHETIC_PREFIX).exists()
    assert Endpoint.objects.filter(pk=kept.endpoint_id).exists()


def test_same_seed_same_history() -> None:
    synthesize(nights=5, endpoints=2, sets=1)
    first = list(
        Run.objects.order_by("created_at", "endpoint__name").values_list("throughput_mbps")
    )
    synthesize("--clear", nights=5, endpoints=2, sets=1)
    again = list(
        Run.objects.order_by("created_at", "endpoint__name").values_list("throughput_mbps")
    )
    assert first == again
    assert Run.objects.filter(wall_s__gt=F("deadline_s")).count() == 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(CommandError, match="between 1 and"):
        call_command("history", "synthesize", "--endpoints=0")
    assert not Run.objects.exists()


def test_progress_in_a_log_is_whole_lines() -> None:
    """Not on a terminal (a log, a CI job): lines, not carriage returns rewriting one line."""
    log = io.StringIO()
    call_command(
        "history", "synthesize", "--endpoints=2", "--parameter-sets=1", "--nights=2",
        f"--last-night={LAST}", stderr=log,
    )  # fmt: skip
    text = log.getvalue()
    assert "\r" not in text
    assert text.endswith("\n")
    assert "4 of 4 runs" in text.splitlines()[-1]
