"""The watch's pass moves regressions through their states with hysteresis: each transition,
silences, downtimes, and a second pass for the same time changing nothing."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.webapp.factories import user
from tests.webapp.watch.nights import Series, at, measure, night, series, watch
from webapp.sites.models import Downtime
from webapp.watch.actions import regression_acknowledge
from webapp.watch.models import Regression, RegressionEvent

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]
State = Regression.State


def availability(of: Series) -> Regression:
    return Regression.objects.get(
        endpoint=of.endpoint, vantage_point=of.vantage_point, metric="availability"
    )


def states(regression: Regression) -> list[str]:
    return list(regression.events.values_list("state", flat=True))


def test_functional_failure_opens_at_once_and_critical_when_all_runs_failed() -> None:
    one = series()
    measure(one, 0, "auth", "auth")
    watch(0)
    regression = availability(one)
    assert (regression.state, regression.severity, regression.tier) == (
        "open",
        "critical",
        "breakage",
    )
    assert "auth: 2" in regression.summary


def test_suspicious_night_is_pending_then_open_when_confirmed() -> None:
    one = series()
    measure(one, 0, "ok", "server-error")
    watch(0)
    assert availability(one).state == State.PENDING
    measure(one, 1, "ok", "timeout")
    watch(1)
    assert states(availability(one)) == ["pending", "open"]


def test_pending_single_bad_night_is_resolved_by_the_next_good_one() -> None:
    one = series()
    measure(one, 0, "ok", "server-error")
    watch(0)
    measure(one, 1, "ok", "ok")
    watch(1)
    assert states(availability(one)) == ["pending", "resolved"]


@override_settings(FEDPROBE_WATCH_RESOLVE_AFTER_NIGHTS=3)
def test_open_recovers_and_resolves_after_m_good_nights_only() -> None:
    one = series()
    measure(one, 0, "timeout")
    watch(0)
    for n in (1, 2):
        measure(one, n, "ok")
        watch(n)
        assert availability(one).state == State.RECOVERING
    assert availability(one).good_nights == 2
    measure(one, 3, "ok")
    watch(3)
    assert states(availability(one)) == ["open", "recovering", "resolved"]


def acknowledged(of: Series, n: int) -> Regression:
    """The series' availability broken on night `n` (open), acknowledged by ana after it."""
    measure(of, n, "timeout")
    watch(n)
    regression_acknowledge(
        regression=availability(of), user=user("ana"), note="on it", now=at(night(n), 8)
    )
    return availability(of)


@override_settings(FEDPROBE_WATCH_RESOLVE_AFTER_NIGHTS=3)
def test_acknowledged_recovers_on_a_good_night_and_resolves_after_m_keeping_who_acknowledged() -> (
    None
):
    one = series()
    acknowledged(one, 0)
    measure(one, 1, "ok")
    watch(1)
    assert availability(one).state == State.RECOVERING
    measure(one, 2, "ok")
    watch(2)
    assert availability(one).state == State.RECOVERING
    measure(one, 3, "ok")
    watch(3)
    regression = availability(one)
    assert states(regression) == ["open", "acknowledged", "recovering", "resolved"]
    assert regression.acknowledged_by is not None
    assert (regression.acknowledged_by.username, regression.ack_note) == ("ana", "on it")


def test_acknowledged_stays_acknowledged_on_a_bad_night() -> None:
    one = series()
    acknowledged(one, 0)
    for n in (1, 2):
        measure(one, n, "refused")
        watch(n)
    regression = availability(one)
    assert states(regression) == ["open", "acknowledged"]
    assert regression.good_nights == 0
    assert regression.acknowledged_by is not None


def test_acknowledged_then_recovering_opens_again_on_a_bad_night() -> None:
    one = series()
    acknowledged(one, 0)
    measure(one, 1, "ok")
    watch(1)
    measure(one, 2, "timeout")
    watch(2)
    assert states(availability(one)) == ["open", "acknowledged", "recovering", "open"]


def test_recovering_opens_again_on_a_bad_night() -> None:
    one = series()
    measure(one, 0, "timeout")
    watch(0)
    measure(one, 1, "ok")
    watch(1)
    measure(one, 2, "refused")
    watch(2)
    regression = availability(one)
    assert states(regression) == ["open", "recovering", "open"]
    assert regression.good_nights == 0


def test_recovering_opens_again_on_a_merely_suspicious_night_too() -> None:
    one = series()
    measure(one, 0, "timeout")
    watch(0)
    measure(one, 1, "ok")
    watch(1)
    measure(one, 2, "ok", "server-error")  # not confirmed by itself: it was, before
    watch(2)
    assert states(availability(one)) == ["open", "recovering", "open"]


@override_settings(FEDPROBE_WATCH_NO_DATA_NIGHTS=2)
def test_series_not_measured_while_its_vantage_point_measures_others_has_no_data() -> None:
    one, other = series(), series()
    measure(one, 0, "timeout")
    measure(other, 0, "ok")
    watch(0)
    measure(other, 1, "ok")
    watch(1)
    assert availability(one).state == State.OPEN
    measure(other, 2, "ok")
    watch(2)
    assert states(availability(one)) == ["open", "no-data"]


def test_night_of_tester_faults_only_is_a_tester_fault_not_the_sites() -> None:
    one = series()
    measure(one, 0, "timeout")
    watch(0)
    measure(one, 1, "lost", "harness")
    watch(1)
    regression = availability(one)
    assert states(regression) == ["open", "tester-fault"]
    measure(one, 2, "ok")
    watch(2)
    assert states(availability(one))[-1] == "resolved"


def test_tester_faults_alone_open_a_tester_fault_never_an_open_regression() -> None:
    one = series()
    measure(one, 0, "egress")
    watch(0)
    assert states(availability(one)) == ["tester-fault"]


def test_silenced_regression_still_changes_state_and_its_events_say_so() -> None:
    one = series()
    measure(one, 0, "timeout")
    watch(0)
    Regression.objects.update(silenced_until=at(night(10)))
    measure(one, 1, "ok")
    watch(1)
    event = availability(one).events.last()
    assert event is not None
    assert event.state == State.RECOVERING
    assert event.note.startswith("silenced until")


def test_second_pass_for_the_same_time_changes_nothing() -> None:
    one, two = series(), series()
    measure(one, 0, "timeout")
    measure(two, 0, "ok", "server-error")
    watch(0)
    measure(one, 1, "ok")
    measure(two, 1, "timeout")
    watch(1)
    before = list(Regression.objects.values())
    events = RegressionEvent.objects.count()
    watch(1)
    assert list(Regression.objects.values()) == before
    assert RegressionEvent.objects.count() == events


def test_outage_night_is_not_evaluated_and_nothing_opens_during_a_downtime() -> None:
    one = series()
    Downtime.objects.create(
        site=one.endpoint.site,
        start=at(night(0), 0),
        end=at(night(1), 12),
        severity=Downtime.Severity.OUTAGE,
        scheduled=True,
    )
    measure(one, 0, "timeout")
    watch(0)
    measure(one, 1, "timeout")
    watch(1)
    assert not Regression.objects.exists()
    measure(one, 2, "timeout")
    watch(2)
    assert availability(one).state == State.OPEN


def test_warning_downtime_lets_an_open_regression_recover_but_opens_nothing() -> None:
    one, two = series(), series()
    measure(one, 0, "timeout")
    measure(two, 0, "ok")
    watch(0)
    for endpoint in (one.endpoint, two.endpoint):
        Downtime.objects.create(
            endpoint=endpoint,
            start=at(night(1), 0),
            end=at(night(2), 0),
            severity=Downtime.Severity.WARNING,
            scheduled=False,
        )
    measure(one, 1, "ok")
    measure(two, 1, "timeout")
    watch(1)
    assert availability(one).state == State.RECOVERING
    assert not Regression.objects.filter(endpoint=two.endpoint).exists()
