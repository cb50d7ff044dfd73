"""The regressions' reads: a group's detail lists its members, availability and error
classes are shares of the site's runs (tester faults left out), the band takes the detector's
own width, the nights read are bounded, nights still rolling up are said to be, and the
detail's queries do not grow with them."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.webapp.factories import (
    EndpointFactory,
    RegressionFactory,
    SeriesNightFactory,
    VantagePointFactory,
)
from webapp.watch.models import Regression, WatchPass
from webapp.watch.selectors import MAX_NIGHTS, regression_detail, regression_get

pytestmark = pytest.mark.django_db


def _nights(regression: Regression, first: date, count: int, **fields: Any) -> None:
    for day in range(count):
        SeriesNightFactory(
            endpoint=regression.endpoint,
            vantage_point=regression.vantage_point,
            night=first + timedelta(days=day),
            **fields,
        )


def test_a_groups_detail_lists_its_members_and_has_no_series_of_its_own() -> None:
    far = VantagePointFactory(name="far")
    group = RegressionFactory(
        endpoint=None, vantage_point=far, method="", blame={"target": "vantage-point"}
    )
    members = [RegressionFactory(vantage_point=far, parent=group) for _ in range(3)]
    detail = regression_detail(regression=regression_get(pk=group.pk))
    assert detail["nights"] == [] and detail["band"] is None
    assert sorted(m.pk for m in detail["members"]) == sorted(m.pk for m in members)
    assert detail["members_total"] == 3


def test_availability_is_the_share_of_the_sites_runs_without_tester_faults() -> None:
    regression = RegressionFactory(metric="availability")
    _nights(regression, date(2026, 11, 20), 1, runs=10, succeeded=6, failed=2, tester_faults=2)
    nights = regression_detail(regression=regression)["nights"]
    assert nights[0]["value"] == 6 / 8 and nights[0]["n"] == 8


def test_an_error_class_is_its_share_of_the_sites_runs() -> None:
    regression = RegressionFactory(metric="error:auth")
    _nights(regression, date(2026, 11, 20), 1, runs=4, succeeded=1, failed=3, errors={"auth": 3})
    assert regression_detail(regression=regression)["nights"][0]["value"] == 0.75


def test_the_band_takes_the_detectors_robust_z_threshold_as_its_width() -> None:
    regression = RegressionFactory()
    regression.detector["parameters"]["breakage_z"] = 5.0
    for day, median in enumerate([90.0, 95.0, 100.0, 105.0, 110.0]):
        metrics = {"throughput_mbps": {"median": median, "n": 3}}
        _nights(regression, date(2026, 11, 1 + day), 1, metrics=metrics)
    band = regression_detail(regression=regression)["band"]
    assert band is not None
    assert (band["median"], band["k"], band["nights"]) == (100.0, 5.0, 5)
    mad = 5.0 * 1.4826  # the median of |10, 5, 0, 5, 10|, as a standard deviation
    assert (band["low"], band["high"]) == pytest.approx((100.0 - 5.0 * mad, 100.0 + 5.0 * mad))


def test_the_detail_reads_at_most_max_nights_and_none_after_the_last_night() -> None:
    regression = RegressionFactory(
        detector={"baseline_window": ["2026-01-01", "2026-11-19"]},
        last_night=date(2026, 11, 24),
    )
    _nights(regression, date(2026, 7, 1), 160)  # up to 2026-12-07
    nights = regression_detail(regression=regression)["nights"]
    assert nights[-1]["night"] == "2026-11-24"
    assert len(nights) == MAX_NIGHTS + 1


def test_the_detail_says_which_of_its_nights_are_still_rolling_up() -> None:
    regression = RegressionFactory(
        detector={"baseline_window": ["2026-11-01", "2026-11-19"]},
        last_night=date(2026, 11, 24),
    )
    _nights(regression, date(2026, 11, 10), 15)
    moment = timezone.now()
    WatchPass.objects.create(
        now=moment, started_at=moment, watermark=moment, backfill_before=date(2026, 11, 10)
    )
    assert regression_detail(regression=regression)["rolling_up_before"] == "2026-11-10"
    WatchPass.objects.create(now=moment, started_at=moment, watermark=moment)
    assert regression_detail(regression=regression)["rolling_up_before"] is None


def test_the_details_queries_do_not_grow_with_nights_vantage_points_or_events(
    django_assert_num_queries: Any,
) -> None:
    regression = RegressionFactory()
    _nights(regression, date(2026, 11, 1), 24)
    for name in ("a", "b", "c"):
        other = VantagePointFactory(name=name)
        for day in range(5):
            SeriesNightFactory(
                endpoint=regression.endpoint, vantage_point=other, night=date(2026, 11, 20 + day)
            )
    SeriesNightFactory(endpoint=EndpointFactory(), night=date(2026, 11, 21))  # not its endpoint
    # The regression, its nights, members, events, and how far the rollups' backfill is.
    with django_assert_num_queries(5):
        detail = regression_detail(regression=regression_get(pk=regression.pk))
    assert [o["vantage_point"] for o in detail["others"]] == ["a", "b", "c"]
