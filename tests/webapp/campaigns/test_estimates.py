"""How long a campaign takes (webapp/campaigns/estimates.py), on real rows: from earlier runs
with the same parameters, else from the endpoint's throughput, else unknown; bounded by the
engine's deadlines; a running launch's ETA. On PostgreSQL, and on the embedded SQLite database
in bin/test's SQLite stage (marker `sqlite`)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pytest
from django.utils import timezone
from pytest_django.fixtures import DjangoAssertNumQueries

from tests.webapp.factories import (
    CampaignFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
)
from webapp.campaigns.estimates import (
    campaign_duration,
    campaign_eta,
    campaign_planned_runs,
    duration_text,
)
from webapp.campaigns.models import Campaign, Run
from webapp.campaigns.services import campaign_launch
from webapp.sites.models import TestFile, VantagePoint

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

MiB = 1024 * 1024


def campaign_on(test_file: TestFile, **fields: object) -> Campaign:
    fields.setdefault("vantage_points", [VantagePointFactory(name="local")])
    return CampaignFactory(endpoints=[test_file.endpoint], **fields)


def earlier_run(
    test_file: TestFile,
    *,
    took_s: float,
    status: str = Run.Status.SUCCEEDED,
    vantage_point: VantagePoint | None = None,
    **params: object,
) -> Run:
    """A run of the campaign factory's default parameters (direct random 64k, 0.1, 2
    clients) that ended `took_s` after it started."""
    started = timezone.now() - timedelta(hours=1)
    return RunFactory(
        test_file=test_file,
        vantage_point=vantage_point or VantagePointFactory(name="local"),
        status=status,
        started_at=started,
        finished_at=started + timedelta(seconds=took_s),
        **params,
    )


def test_with_no_earlier_runs_the_duration_is_unknown_and_bounded_by_the_deadlines() -> None:
    campaign = campaign_on(TestFileFactory(size=16 * MiB), clients=[1, 2])
    duration = campaign_duration(campaign=campaign)
    assert (duration.runs, duration.seconds, duration.unknown) == (2, None, 2)
    assert duration.text == "unknown: no earlier runs"
    # Each: 60 s + (1.68 MB at 1 MB/s + (10 + 26 reads) x 5 ms) = 61.86 s (docs/engine.md).
    assert duration.upper_s == pytest.approx(2 * 61.857, abs=0.01)
    assert duration.upper_text == "at most 2 min (the runs' deadlines)"


def test_the_median_of_earlier_succeeded_runs_with_the_same_parameters_is_each_runs_time() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    for took_s in (10, 20, 40):
        earlier_run(test_file, took_s=took_s)
    earlier_run(test_file, took_s=500, status=Run.Status.FAILED)
    earlier_run(test_file, took_s=500, clients=4)  # another parameter set
    campaign = campaign_on(test_file, repetitions=3)
    duration = campaign_duration(campaign=campaign)
    assert duration.seconds == pytest.approx(3 * 20)
    assert (duration.same_parameters, duration.throughput, duration.unknown) == (3, 0, 0)
    assert duration.text == "about 1 min"
    assert duration.basis == "3 runs from earlier runs with the same parameters"


def test_without_the_same_parameters_the_endpoints_throughput_gives_the_time() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    for throughput_mbps in (5.0, 10.0, 400.0):
        earlier_run(
            test_file,
            took_s=1,
            read_size=4096,
            throughput_mbps=throughput_mbps,
            wall_s=0.5,  # and 0.5 s of start-up, preflight and ingest around it
        )
    campaign = campaign_on(test_file, fractions=[0.5], clients=[2])
    duration = campaign_duration(campaign=campaign)
    planned_bytes = 2 * 8 * MiB
    assert duration.seconds == pytest.approx(planned_bytes / 10e6 + 0.5)
    assert (duration.same_parameters, duration.throughput) == (0, 1)
    assert duration.basis == "1 run from the endpoints' earlier throughput"


def test_throughput_of_the_same_method_is_preferred_to_the_endpoints_other_runs() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    earlier_run(test_file, took_s=1, method="copy", throughput_mbps=1000.0, open_s=0.0)
    earlier_run(test_file, took_s=1, read_size=4096, throughput_mbps=1.0, open_s=0.0)
    campaign = campaign_on(test_file, methods=["copy"], clients=[1])
    read = campaign_planned_runs(campaign=campaign)[0].read_bytes
    assert campaign_duration(campaign=campaign).seconds == pytest.approx(read / 1e9)


def test_a_copy_s_time_counts_the_bytes_it_reads_as_its_throughput_does() -> None:
    # A copy gets the whole file but its run's bytes_read, and so its throughput, count the
    # fraction it reads: 16 MiB at a throughput of 0.01 of it took 100 times too long.
    test_file = TestFileFactory(size=16 * MiB)
    earlier_run(test_file, took_s=2, method="copy", throughput_mbps=1.0, wall_s=1.0)
    campaign = campaign_on(test_file, methods=["copy"], clients=[4], fractions=[0.01])
    (plan,) = campaign_planned_runs(campaign=campaign)
    assert plan.planned_bytes == 4 * 16 * MiB  # what the preview counts: whole files
    assert plan.read_bytes == 4 * math.ceil(0.01 * 16 * MiB)
    duration = campaign_duration(campaign=campaign)
    assert duration.seconds == pytest.approx(plan.read_bytes / 1e6 + 1.0)


def test_a_copy_is_never_estimated_from_direct_reads_throughput() -> None:
    # The ETA of "about 42 min" for a campaign that took 2 min 44 s: its copies were timed at
    # the throughput of small direct reads (latency-bound, a thousand times slower).
    test_file = TestFileFactory(size=16 * MiB)
    earlier_run(test_file, took_s=1, read_size=4096, throughput_mbps=0.5, wall_s=0.5)
    campaign = campaign_on(test_file, methods=["copy"], clients=[4])
    duration = campaign_duration(campaign=campaign)
    assert (duration.seconds, duration.unknown) == (None, 1)


def test_the_runs_most_alike_give_the_throughput_clients_included() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    earlier_run(test_file, took_s=2, clients=1, throughput_mbps=100.0, wall_s=1.0)
    earlier_run(test_file, took_s=2, clients=4, throughput_mbps=400.0, wall_s=1.0)
    earlier_run(test_file, took_s=2, read_size=4096, clients=4, throughput_mbps=1.0, wall_s=1)
    campaign = campaign_on(test_file, clients=[4], fractions=[0.5])
    planned_bytes = 4 * 8 * MiB
    assert campaign_duration(campaign=campaign).seconds == pytest.approx(
        planned_bytes / 400e6 + 1.0
    )


@pytest.mark.parametrize(("limit", "expected_s"), [(1, 80), (2, 40), (4, 40)])
def test_a_vantage_point_runs_different_endpoints_side_by_side_up_to_its_limit(
    limit: int, expected_s: float
) -> None:
    here = VantagePointFactory(name="local", max_parallel_runs=limit)
    files = [TestFileFactory(size=16 * MiB) for _ in range(2)]
    for test_file in files:
        earlier_run(test_file, took_s=10, vantage_point=here)
    campaign = CampaignFactory(
        endpoints=[f.endpoint for f in files], vantage_points=[here], repetitions=4
    )
    # 8 runs of 10 s: one at a time, 80 s; two at once, 40 s; four at once would be 20 s,
    # but each endpoint's 4 runs still go one after the other: 40 s.
    assert campaign_duration(campaign=campaign).seconds == pytest.approx(expected_s)


def test_a_run_with_no_estimate_makes_the_duration_a_lower_bound() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    earlier_run(test_file, took_s=30)
    campaign = campaign_on(test_file, clients=[2, 8])
    duration = campaign_duration(campaign=campaign)
    assert (duration.seconds, duration.unknown) == (30, 1)
    assert duration.text == "at least 30 s"
    assert "1 run with no earlier run to go by" in duration.basis


def test_vantage_points_measure_side_by_side_so_the_busiest_one_sets_the_duration() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    here, there = VantagePointFactory(name="local"), VantagePointFactory(name="cern")
    earlier_run(test_file, took_s=10, vantage_point=here)
    earlier_run(test_file, took_s=50, vantage_point=there)
    campaign = campaign_on(test_file, vantage_points=[here, there], repetitions=2)
    assert campaign_duration(campaign=campaign).seconds == pytest.approx(2 * 50)


def test_a_deadline_set_on_the_campaign_caps_each_run() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    earlier_run(test_file, took_s=900)
    campaign = campaign_on(test_file, deadline_s=60)
    duration = campaign_duration(campaign=campaign)
    assert (duration.seconds, duration.upper_s) == (60, 60)


def test_the_duration_is_read_in_a_bounded_number_of_queries(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    files = [TestFileFactory(size=16 * MiB) for _ in range(3)]
    for test_file in files:
        earlier_run(test_file, took_s=5, throughput_mbps=10.0)
    campaign = CampaignFactory(
        endpoints=[f.endpoint for f in files], clients=[1, 2, 4], repetitions=2
    )
    rows = campaign.matrix_rows()
    plans = campaign_planned_runs(campaign=campaign, rows=rows)
    assert len(plans) == 18
    with django_assert_num_queries(3):  # two of history, one of the vantage points' limits
        campaign_duration(campaign=campaign, rows=rows)


def launched(campaign: Campaign, now: datetime) -> list[Run]:
    runs = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(created_at=now - timedelta(minutes=5))
    return runs


def end(run: Run, *, now: datetime, took_s: float, ago_s: float = 0) -> None:
    finished = now - timedelta(seconds=ago_s)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.SUCCEEDED,
        started_at=finished - timedelta(seconds=took_s),
        finished_at=finished,
    )


def test_the_eta_adds_what_is_left_of_the_running_run_to_the_runs_still_to_come() -> None:
    now = timezone.now()
    test_file = TestFileFactory(size=16 * MiB)
    earlier_run(test_file, took_s=20)
    campaign = campaign_on(test_file, repetitions=4)
    first, second, running, _queued = launched(campaign, now)
    end(first, now=now, took_s=20, ago_s=30)
    end(second, now=now, took_s=20, ago_s=10)
    Run.objects.filter(pk=running.pk).update(
        status=Run.Status.RUNNING, started_at=now - timedelta(seconds=5)
    )
    eta = campaign_eta(campaign=campaign, now=now)
    assert eta is not None
    assert (eta.launch_runs, eta.done, eta.active) == (4, 2, 2)
    assert eta.remaining_s == pytest.approx(15 + 20)
    assert eta.finish_at == now + timedelta(seconds=35)
    assert eta.text == "about 35 s left"


def test_with_no_earlier_runs_the_eta_goes_by_the_runs_of_this_launch_that_ended() -> None:
    now = timezone.now()
    test_file = TestFileFactory(size=16 * MiB)
    campaign = campaign_on(test_file, clients=[1, 2, 4])
    one, _two, _four = launched(campaign, now)
    Run.objects.filter(pk=one.pk).update(
        status=Run.Status.FAILED, started_at=now - timedelta(seconds=70), finished_at=now
    )
    eta = campaign_eta(campaign=campaign, now=now)
    assert eta is not None
    assert (eta.done, eta.active, eta.remaining_s) == (1, 2, 140)


def test_the_eta_is_unknown_before_any_run_of_a_campaign_with_no_history_ends() -> None:
    campaign = campaign_on(TestFileFactory(size=16 * MiB))
    campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    eta = campaign_eta(campaign=campaign)
    assert eta is not None
    assert (eta.remaining_s, eta.finish_at) == (None, None)
    assert eta.text == "unknown: no earlier runs to go by"


def test_a_campaign_with_nothing_queued_or_running_has_no_eta() -> None:
    test_file = TestFileFactory(size=16 * MiB)
    campaign = campaign_on(test_file)
    assert campaign_eta(campaign=campaign) is None
    (run,) = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    end(run, now=timezone.now(), took_s=3)
    assert campaign_eta(campaign=campaign) is None


def test_the_eta_counts_only_the_runs_of_the_current_launch() -> None:
    now = timezone.now()
    test_file = TestFileFactory(size=16 * MiB)
    campaign = campaign_on(test_file, clients=[1, 2])
    for run in campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL):
        end(run, now=now, took_s=3, ago_s=3600)
    Run.objects.filter(campaign=campaign).update(created_at=now - timedelta(days=1))
    launched(campaign, now)
    eta = campaign_eta(campaign=campaign, now=now)
    assert eta is not None
    assert (eta.launch_runs, eta.done, eta.active) == (2, 0, 2)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.2, "1 s"), (42.4, "42 s"), (59.6, "60 s"), (600, "10 min"), (3 * 3600 + 300, "3 h 05 min")],
)
def test_durations_read_as_people_say_them(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text
