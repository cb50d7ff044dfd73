"""No data: a series measured regularly that stopped while its vantage point measured others
gets a regression in state no-data (blamed on nothing), resolved when it is measured again;
never for a campaign stopped on purpose, a series measured once, an endpoint in a downtime or
a series measured weekly that only skipped nights; a vantage point that lost most of its
series is one regression, not one per series; the reads are bounded."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from tests.webapp.watch.nights import Series, at, night, run, series
from webapp.campaigns.models import Campaign
from webapp.campaigns.schedules import campaign_schedule_pause
from webapp.sites.models import Downtime, Endpoint
from webapp.watch.actions import regression_resolve
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.models import Regression, RegressionEvent
from webapp.watch.nodata import series_no_data
from webapp.watch.series import vantage_point_nights

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]
State = Regression.State


def scheduled(**fields: Any) -> Series:
    made = series(**fields)
    Campaign.objects.filter(pk=made.campaign.pk).update(schedule="0 2 * * *")
    made.campaign.refresh_from_db()
    return made


def nights(nights: range | list[int], *measured: Series, watch: bool = True) -> None:
    for n in nights:
        for one in measured:
            run(one, night(n), throughput_mbps=10.0)
        if watch:
            watch_evaluate(now=at(night(n), 6))


def of(one: Series) -> list[Regression]:
    return list(Regression.objects.filter(endpoint=one.endpoint, vantage_point=one.vantage_point))


def test_a_regular_series_that_stopped_has_no_data_until_it_is_measured_again() -> None:
    one, other = scheduled(), scheduled()
    nights(range(4), one, other)
    nights([4], other)
    assert of(one) == []  # one night missed: not yet
    nights([5], other)
    (regression,) = of(one)
    assert (regression.state, regression.metric, regression.severity) == (
        State.NO_DATA,
        "availability",
        "info",
    )
    assert regression.key.endswith(":availability")
    assert regression.blame["target"] == ""  # never the site's
    assert f"not measured since {night(3)}" in regression.summary
    assert list(regression.events.values_list("previous_state", "state")) == [("", "no-data")]
    nights([6], other)
    assert regression.events.count() == 1  # stays, once

    nights([7], one, other)
    regression.refresh_from_db()
    assert regression.state == State.RESOLVED
    assert of(other) == []


def pause(one: Series) -> None:
    campaign_schedule_pause(campaign=one.campaign)


def unschedule(one: Series) -> None:
    Campaign.objects.filter(pk=one.campaign.pk).update(schedule="")


def delete(one: Series) -> None:
    one.campaign.delete()


def disable(one: Series) -> None:
    Endpoint.objects.filter(pk=one.endpoint.pk).update(enabled=False)


def leave_out(one: Series) -> None:
    one.campaign.endpoints.clear()


def other_parameters(one: Series) -> None:
    Campaign.objects.filter(pk=one.campaign.pk).update(clients=[4])


def test_series_stopped_on_purpose_have_no_no_data_regression() -> None:
    """Paused, unscheduled, deleted, endpoint disabled, endpoint left out of the campaign,
    parameter set changed: each stops one series on purpose (one history for all six)."""
    stops = [pause, unschedule, delete, disable, leave_out, other_parameters]
    stopped = [scheduled() for _ in stops]
    other = scheduled()
    nights(range(4), other, *stopped)
    for stop, one in zip(stops, stopped, strict=True):
        stop(one)
    nights(range(4, 7), other)
    assert list(Regression.objects.all()) == []


def test_a_series_measured_once_or_by_hand_is_not_missed() -> None:
    by_hand, once, other = series(), scheduled(), scheduled()
    nights(range(3), by_hand, other)
    nights([3], once, other)
    nights(range(4, 7), other)
    assert of(by_hand) == of(once) == []


def test_an_endpoint_in_a_downtime_is_not_missed() -> None:
    one, other = scheduled(), scheduled()
    nights(range(4), one, other)
    Downtime.objects.create(
        endpoint=one.endpoint,
        start=at(night(4), 0),
        end=at(night(7), 0),
        severity="warning",
        scheduled=True,
    )
    nights(range(4, 7), other)
    assert of(one) == []


def test_a_weekly_series_is_missed_after_two_of_its_weeks_not_two_nights() -> None:
    weekly, nightly = scheduled(), scheduled()
    nights([0, 7, 14], weekly, watch=False)
    nights(range(17), nightly, watch=False)
    watch_evaluate(now=at(night(16), 6))
    assert of(weekly) == []
    nights([27, 28], nightly)
    (regression,) = of(weekly)
    assert regression.state == State.NO_DATA


def test_a_vantage_point_that_lost_most_of_its_series_is_one_regression() -> None:
    lost = [scheduled() for _ in range(3)]
    kept = scheduled()
    nights(range(3), kept, *lost)
    nights(range(3, 5), kept)
    (regression,) = Regression.objects.all()
    assert (regression.key, regression.state) == ("vp:local:no-data", State.NO_DATA)
    assert regression.blame["target"] == "vantage-point"
    assert "stopped measuring 3 series" in regression.summary
    # Missed from night 3 (the night after their last) to night 4, the night it opened.
    assert regression.detector["baseline_window"] is None
    assert regression.detector["target_window"] == [night(3).isoformat(), night(4).isoformat()]
    nights([5], kept, *lost)
    regression.refresh_from_db()
    assert regression.state == State.RESOLVED
    assert Regression.objects.count() == 1


def test_a_no_data_regression_resolved_by_hand_stays_resolved_while_it_is_not_measured() -> None:
    from tests.webapp.factories import user

    one, other = scheduled(), scheduled()
    nights(range(4), one, other)
    nights(range(4, 6), other)
    (regression,) = of(one)
    regression_resolve(regression=regression, user=user("op"), note="moved to tape")
    nights(range(6, 8), other)
    assert [r.state for r in of(one)] == [State.RESOLVED]


@override_settings(FEDPROBE_WATCH_NO_DATA_NIGHTS=2)
def test_the_reads_do_not_grow_with_the_stopped_series(
    django_assert_max_num_queries: Any,
) -> None:
    many = [scheduled() for _ in range(6)]
    kept = [scheduled() for _ in range(7)]
    nights(range(3), *many, *kept, watch=False)
    nights(range(3, 6), *kept)
    assert Regression.objects.filter(state=State.NO_DATA).count() == 6
    events = RegressionEvent.objects.count()
    live = {r.key: r for r in Regression.objects.filter(state__in=Regression.LIVE)}
    measuring = vantage_point_nights(first=night(0), last=night(5))
    with django_assert_max_num_queries(4):
        series_no_data(
            night=night(5),
            now=at(night(5), 7),
            live=live,
            measuring=measuring,
            downtime=frozenset(),
        )
    assert RegressionEvent.objects.count() == events


def test_a_stopped_series_live_regressions_go_to_no_data_its_error_classes_too() -> None:
    one, other = series(), series()
    for n in range(2):
        for outcome in ("ok", "ok", "server-error", "server-error"):
            if outcome == "ok":
                run(one, night(n), throughput_mbps=10.0)
            else:
                run(one, night(n), status="failed", error=outcome)
        nights([n], other)
    assert {r.metric: r.state for r in of(one)} == {
        "availability": State.PENDING,
        "error:server-error": State.OPEN,
    }
    nights(range(2, 4), other)
    assert {r.metric: r.state for r in of(one)} == {
        "availability": State.NO_DATA,
        "error:server-error": State.NO_DATA,
    }
