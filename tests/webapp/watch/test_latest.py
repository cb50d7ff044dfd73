"""Each series' latest state, kept by the watch's pass for the alerts (webapp/watch/latest.py):
a failing streak carried from one pass to the next, and read further back than the window
when the backfill rolls up older nights."""

from __future__ import annotations

from datetime import UTC, date

import pytest

from tests.webapp.dashboards.status_runs import RunMaker, night, watch_pass
from tests.webapp.factories import VantagePointFactory
from webapp.campaigns.models import Run
from webapp.watch.latest import WINDOW_NIGHTS
from webapp.watch.models import SeriesLatest, WatchPass

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

S = Run.Status


def day(days_ago: int) -> date:
    return night(days_ago).astimezone(UTC).date()


def test_a_streak_is_carried_from_the_previous_pass_with_its_failures() -> None:
    make = RunMaker()
    endpoint, cern = make.endpoint("broken"), VantagePointFactory(name="cern")
    make.add(endpoint, cern, S.SUCCEEDED, night(20), throughput_mbps=10)
    for days_ago in range(19, 11, -1):
        make.add(endpoint, cern, S.FAILED, night(days_ago), errors=[{"class": "refused"}])
    watch_pass()
    # The next pass reads from 8 nights before its first night: not back to night 19.
    for days_ago in (3, 2):
        make.add(endpoint, cern, S.TIMEOUT, night(days_ago), errors=[{"class": "timeout"}])
    watch_pass()
    state = SeriesLatest.objects.get(endpoint=endpoint)
    assert (state.failing, state.site_night, state.failing_since) == (True, day(2), day(19))
    assert (state.failures, state.last_good) == (10, day(20))
    assert state.failed_run is not None and state.failed_run["error_class"] == "timeout"


def test_a_streak_reaches_back_into_the_nights_the_backfill_rolls_up() -> None:
    make = RunMaker()
    endpoint, cern = make.endpoint("long-broken"), VantagePointFactory(name="cern")
    make.add(endpoint, cern, S.SUCCEEDED, night(WINDOW_NIGHTS + 20), throughput_mbps=10)
    make.add(endpoint, cern, S.FAILED, night(WINDOW_NIGHTS + 10), errors=[{"class": "auth"}])
    make.add(endpoint, cern, S.FAILED, night(1), errors=[{"class": "auth"}])
    other = make.endpoint("fine")
    make.add(other, cern, S.SUCCEEDED, night(1), throughput_mbps=10)
    watch_pass()
    # The first pass rolls up its lookback only: the streak is known from its first night.
    state = SeriesLatest.objects.get(endpoint=endpoint)
    assert (state.failing, state.failing_since, state.failures) == (True, day(1), 1)
    assert state.last_good is None
    while WatchPass.objects.latest("id").backfill_before is not None:
        watch_pass()  # the older nights are backfilled; the streak reaches into them
    state = SeriesLatest.objects.get(endpoint=endpoint)
    assert (state.failing, state.failing_since, state.failures) == (
        True,
        day(WINDOW_NIGHTS + 10),
        2,
    )
    assert state.last_good == day(WINDOW_NIGHTS + 20)
    fine = SeriesLatest.objects.get(endpoint=other)
    assert (fine.failing, fine.measured_night) == (False, day(1))
