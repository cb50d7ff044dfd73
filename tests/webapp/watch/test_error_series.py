"""Each error class is a series: a class whose share of a night's site runs rises beyond its
usual band opens a regression `series:...:error:<class>` (pending, open when the night before
was bad too), with the usual hysteresis; a night whose availability is a breakage at once is
that one alert; tester faults never count; the page's API plots the class's share."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from tests.webapp.factories import api_for, page_for, user
from tests.webapp.watch.nights import Series, measure, night, series, watch
from webapp.watch.models import Regression

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]
State = Regression.State


def regressions(of: Series) -> dict[str, list[str]]:
    """{metric: the states its regressions went through}."""
    found: dict[str, list[str]] = {}
    rows = Regression.objects.filter(endpoint=of.endpoint, vantage_point=of.vantage_point)
    for regression in rows.order_by("id"):
        states = list(regression.events.values_list("state", flat=True))
        found.setdefault(regression.metric, []).extend(states)
    return found


def quiet_nights(of: Series, nights: range, *outcomes: str) -> None:
    for n in nights:
        measure(of, n, *outcomes)
        watch(n)


def test_a_class_that_never_appeared_is_pending_then_open_on_its_second_night() -> None:
    one = series()
    quiet_nights(one, range(3), "ok", "ok", "ok", "ok")
    measure(one, 3, "ok", "ok", "server-error", "server-error")
    watch(3)
    key = Regression.objects.get(metric="error:server-error").key
    assert key.startswith(f"series:{one.endpoint.pk}:{one.vantage_point.pk}:")
    assert key.endswith(":error:server-error")
    assert regressions(one) == {"availability": ["pending"], "error:server-error": ["pending"]}
    measure(one, 4, "ok", "ok", "server-error", "server-error")
    watch(4)
    regression = Regression.objects.get(metric="error:server-error")
    # Availability's rule only ever calls some failing runs suspicious; the class's band
    # says this is new, and confirms it.
    assert regressions(one) == {
        "availability": ["pending"],
        "error:server-error": ["pending", "open"],
    }
    assert (regression.current, regression.baseline, regression.change_night) == (
        0.5,
        0.0,
        night(3),
    )
    assert "server-error: 2 of 4 runs (50%)" in regression.summary
    assert regression.detector["name"] == "error-share"
    assert regression.detector["target_window"] == [night(3).isoformat(), night(4).isoformat()]


def test_a_class_within_its_usual_band_opens_nothing_and_a_rise_beyond_it_does() -> None:
    one = series()
    quiet_nights(one, range(6), "ok", "ok", "ok", "short-read")  # 25 % every night
    assert "error:short-read" not in regressions(one)
    measure(one, 6, "ok", "ok", "short-read", "short-read")  # 50 %: above 25 % + 10 points
    watch(6)
    assert regressions(one)["error:short-read"] == ["pending"]
    assert Regression.objects.get(metric="error:short-read").baseline == 0.25


@override_settings(FEDPROBE_WATCH_ERROR_MIN_RUNS=3)
def test_fewer_runs_than_the_minimum_open_nothing() -> None:
    one = series()
    quiet_nights(one, range(3), "ok", "ok")
    quiet_nights(one, range(3, 5), "ok", "server-error", "server-error")
    assert "error:server-error" not in regressions(one)


def test_a_functional_class_is_the_availability_alert_only_never_a_second_one() -> None:
    one = series()
    quiet_nights(one, range(3), "ok", "ok", "ok", "ok")
    quiet_nights(one, range(3, 5), "ok", "ok", "auth", "auth")
    assert regressions(one) == {"availability": ["open"]}


def test_every_run_failing_is_the_availability_alert_only() -> None:
    one = series()
    quiet_nights(one, range(3), "ok", "ok", "ok", "ok")
    quiet_nights(one, range(3, 5), "server-error", "server-error")
    regression = Regression.objects.get(metric="availability")
    assert (regression.state, regression.severity) == (State.OPEN, "critical")
    assert list(regressions(one)) == ["availability"]


@override_settings(FEDPROBE_WATCH_RESOLVE_AFTER_NIGHTS=2)
def test_an_open_class_recovers_then_resolves_and_a_high_level_is_not_the_new_normal() -> None:
    one = series()
    quiet_nights(one, range(3), "ok", "ok", "ok", "ok")
    quiet_nights(one, range(3, 10), "ok", "ok", "server-error", "server-error")
    # Seven bad nights: the band would take them in, the open regression keeps its baseline.
    assert regressions(one)["error:server-error"] == ["pending", "open"]
    quiet_nights(one, range(10, 12), "ok", "ok", "ok", "ok")
    assert regressions(one)["error:server-error"] == ["pending", "open", "recovering", "resolved"]


def test_tester_faults_never_count_and_move_a_live_class_to_tester_fault() -> None:
    one = series()
    quiet_nights(one, range(3), "ok", "ok", "ok", "ok")
    # Harness and lost runs are the tester's: 2 server errors of 2 site runs would be new,
    # but a night of tester faults alone says nothing of the site.
    quiet_nights(one, range(3, 5), "ok", "ok", "harness", "lost")
    assert regressions(one) == {}
    quiet_nights(one, range(5, 7), "ok", "ok", "server-error", "server-error", "lost")
    assert Regression.objects.get(metric="error:server-error").current == 0.5
    measure(one, 7, "harness", "lost")
    watch(7)
    assert regressions(one)["error:server-error"] == ["pending", "open", "tester-fault"]


def test_the_api_shows_an_error_class_and_plots_its_share_per_night() -> None:
    one = series()
    quiet_nights(one, range(3), "ok", "ok", "ok", "ok")
    quiet_nights(one, range(3, 5), "ok", "ok", "ok", "server-error")
    quiet_nights(one, range(5, 7), "ok", "ok", "server-error", "server-error")
    regression = Regression.objects.get(metric="error:server-error")
    api = api_for(user("viewer"))
    listed = api.get("/api/v1/regressions/", {"metric": "error:server-error"}).json()
    assert [r["id"] for r in listed["results"]] == [regression.pk]
    detail = api.get(f"/api/v1/regressions/{regression.pk}/").json()
    assert detail["metric"] == "error:server-error"
    shares = {n["night"]: n["value"] for n in detail["series"]["nights"]}
    assert [shares[night(n).isoformat()] for n in range(7)] == [0, 0, 0, 0.25, 0.25, 0.5, 0.5]
    assert detail["series"]["unit"] == "share of runs"


def test_a_class_of_series_blamed_on_their_site_is_a_member_of_the_sites_group() -> None:
    one = series(vantage_point="vp-a")
    two = series(endpoint=one.endpoint, vantage_point="vp-b")
    for n in range(5):
        outcomes = ("ok", "ok", "server-error", "server-error") if n >= 3 else ("ok",) * 4
        measure(one, n, *outcomes)
        measure(two, n, *outcomes)
        watch(n)
    group = Regression.objects.get(key=f"site:{one.endpoint.site.name}:availability")
    members = Regression.objects.filter(parent=group)
    assert sorted(members.values_list("metric", "vantage_point__name")) == [
        ("availability", "vp-a"),
        ("availability", "vp-b"),
        ("error:server-error", "vp-a"),
        ("error:server-error", "vp-b"),
    ]
    # Still the group's word after a second bad night of the series (not wiped by it).
    assert {m.blame.get("group") for m in members} == {group.key}


def test_the_detail_page_plots_the_class_share_with_its_band_and_windows() -> None:
    one = series()
    quiet_nights(one, range(5), "ok", "ok", "ok", "ok")
    quiet_nights(one, range(5, 7), "ok", "ok", "ok", "short-read", "short-read")
    regression = Regression.objects.get(metric="error:short-read")
    html = page_for(user("v", "viewer")).get(f"/regressions/{regression.pk}/").content.decode()
    assert "error-share" in html and "error class short-read: 2 of 5 runs (40%)" in html
    plot = json.loads(html.split('id="regression-data" type="application/json">')[1].split("<")[0])
    assert [n["value"] for n in plot["nights"]] == [0, 0, 0, 0, 0, 0.4, 0.4]
    assert plot["change_night"] == night(5).isoformat()
    assert (plot["band"]["median"], plot["band"]["k"]) == (0, 4.0)
