"""The first pass over a history rolls up the nights the watch evaluates from and leaves the
older ones to the passes after it, which backfill them newest first until none is left; a
pass during the backfill evaluates its new night as any pass would, and the watermark finds
the runs that ended since the last pass from the index on their end."""

from __future__ import annotations

import random
from datetime import date, timedelta

import pytest
from django.db import connection
from django.test import override_settings

from tests.webapp.sqlite import only_on_postgresql
from tests.webapp.watch.nights import at, night, run, series
from webapp.campaigns.models import Run
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.models import Regression, SeriesNight, WatchPass
from webapp.watch.rollups import ENDED, rollups_backfill_before

pytestmark = pytest.mark.django_db


def rolled_up() -> list[date]:
    return sorted(SeriesNight.objects.values_list("night", flat=True))


@pytest.mark.sqlite
@override_settings(FEDPROBE_WATCH_LOOKBACK_NIGHTS=3, FEDPROBE_WATCH_BACKFILL_NIGHTS=2)
def test_backfill_goes_on_across_passes_newest_first_and_finishes() -> None:
    one = series()
    for n in range(8):
        run(one, night(n), throughput_mbps=10.0 + n)
        run(one, night(n), throughput_mbps=20.0 + n)
    first = watch_evaluate(now=at(night(8)))
    assert first.nights == [night(5), night(6), night(7)]
    assert first.evaluated == [night(7)]
    assert rolled_up() == [night(5), night(6), night(7)]
    assert first.backfill_before == night(5) == rollups_backfill_before()

    progress = []
    for hour in range(1, 6):
        outcome = watch_evaluate(now=at(night(8), 2 + hour))
        progress.append((outcome.backfilled, outcome.backfill_before, outcome.evaluated))
    assert progress == [
        ([night(3), night(4)], night(3), []),
        ([night(1), night(2)], night(1), []),
        ([night(0)], None, []),
        ([], None, []),
        ([], None, []),
    ]
    assert rolled_up() == [night(n) for n in range(8)]
    assert rollups_backfill_before() is None
    oldest = SeriesNight.objects.get(night=night(0))
    assert (oldest.runs, oldest.metrics["throughput_mbps"]["median"]) == (2, 15.0)
    assert WatchPass.objects.order_by("id")[1].nights == ["2026-10-04", "2026-10-05"]


@pytest.mark.sqlite
@override_settings(FEDPROBE_WATCH_LOOKBACK_NIGHTS=30, FEDPROBE_WATCH_BACKFILL_NIGHTS=5)
def test_pass_during_the_backfill_evaluates_its_night_from_the_lookback() -> None:
    one = series()
    rng = random.Random(3)
    for n in range(40):
        run(one, night(n), throughput_mbps=100.0 * (1 + rng.gauss(0, 0.03)))
    assert watch_evaluate(now=at(night(40))).backfill_before == night(10)
    run(one, night(40), throughput_mbps=55.0)
    outcome = watch_evaluate(now=at(night(41)))
    assert (outcome.nights, outcome.evaluated) == ([night(40)], [night(40)])
    assert outcome.backfilled == [night(n) for n in range(5, 10)]
    assert outcome.backfill_before == night(5)
    regression = Regression.objects.get(endpoint=one.endpoint, metric="throughput_mbps")
    assert regression.state == Regression.State.PENDING
    assert regression.change_night == night(40)


@pytest.mark.sqlite
@override_settings(FEDPROBE_WATCH_LOOKBACK_NIGHTS=3, FEDPROBE_WATCH_BACKFILL_NIGHTS=2)
def test_late_run_of_a_night_not_yet_backfilled_rolls_that_night_up() -> None:
    one = series()
    for n in range(8):
        run(one, night(n), throughput_mbps=10.0)
    watch_evaluate(now=at(night(8)))
    late = at(night(8), 3)
    run(one, night(0), throughput_mbps=30.0, finished=late)
    outcome = watch_evaluate(now=late + timedelta(minutes=10))
    assert outcome.nights == [night(0)]
    assert outcome.backfilled == [night(3), night(4)]
    assert SeriesNight.objects.get(night=night(0)).runs == 2


@only_on_postgresql
def test_watermark_query_is_answered_from_the_index_on_the_runs_end() -> None:
    one = series()
    run(one, night(0), throughput_mbps=10.0)
    since, cutoff = at(night(0)), at(night(1))
    changed = Run.objects.filter(
        status__in=ENDED, finished_at__lte=cutoff, finished_at__gt=since
    ).order_by("-finished_at")[:1]
    with connection.cursor() as cursor:
        # A table of a few rows is read whole; a year of runs is not: ask for the plan the
        # planner would choose at that size.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        plan = changed.explain()
    assert "run_finished_idx" in plan
