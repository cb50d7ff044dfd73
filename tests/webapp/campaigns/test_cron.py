"""Cron strings of campaign schedules: parsing, refusals naming the field, the latest slot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError

from webapp.campaigns.cron import CronError, parse_cron, validate_cron


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def latest(cron: str, now: str, window_days: float = 400) -> datetime | None:
    end = at(now)
    return parse_cron(cron).latest(at_or_before=end, not_before=end - timedelta(days=window_days))


@pytest.mark.parametrize(
    ("text", "minutes", "hours"),
    [
        ("* * * * *", tuple(range(60)), tuple(range(24))),
        ("0 2 * * *", (0,), (2,)),
        ("*/15 */6 * * *", (0, 15, 30, 45), (0, 6, 12, 18)),
        ("5,10-12,50-59/4 1-3 * * *", (5, 10, 11, 12, 50, 54, 58), (1, 2, 3)),
        ("  0   2  * * *  ", (0,), (2,)),
        ("@hourly", (0,), tuple(range(24))),
        ("@DAILY", (0,), (0,)),
    ],
)
def test_minutes_and_hours_parse_to_the_values_they_name(
    text: str, minutes: tuple[int, ...], hours: tuple[int, ...]
) -> None:
    cron = parse_cron(text)
    assert (cron.minutes, cron.hours) == (minutes, hours)


def test_months_and_weekdays_by_name_and_sunday_as_7() -> None:
    cron = parse_cron("0 0 * jan,Mar-may sun,7,fri-sat")
    assert cron.months == {1, 3, 4, 5}
    assert cron.weekdays == {0, 5, 6}
    assert parse_cron("0 0 * * 1-7").weekdays == set(range(7))


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("   ", "5 fields"),
        ("0 2 * *", "5 fields"),
        ("0 2 * * * *", "5 fields"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 24 * * *", "hour: 24 is outside 0-23"),
        ("* * 0 * *", "day-of-month: 0 is outside 1-31"),
        ("* * 32 * *", "day-of-month"),
        ("* * * 13 *", "month: 13 is outside 1-12"),
        ("* * * * 8", "day-of-week: 8 is outside 0-7"),
        ("*/0 * * * *", "minute: a step must be at least 1"),
        ("5/10 * * * *", "minute: a step needs * or a range"),
        ("30-10 * * * *", "minute: range '30-10' runs backwards"),
        ("a * * * *", "minute: value 'a' is not a number"),
        ("-1 * * * *", "minute"),
        ("1,,2 * * * *", "minute"),
        ("* * * foo *", "month: value 'foo'"),
        ("* * * * monday", "day-of-week"),
        ("* * * * *-*", "day-of-week"),
        ("\u0661 * * * *", "minute"),  # an Arabic-Indic digit one
        ("0 0 30 2 *", "no chosen day exists"),
        ("0 0 31 4,6,9,11 *", "no chosen day exists"),
        ("@reboot", "5 fields"),
    ],
)
def test_a_bad_cron_is_refused_naming_what_is_wrong(text: str, names: str) -> None:
    with pytest.raises(CronError, match=names.replace("*", r"\*")):
        parse_cron(text)
    with pytest.raises(ValidationError):
        validate_cron(text)


def test_an_empty_schedule_is_no_schedule() -> None:
    validate_cron("")


def test_30_february_is_fine_when_a_weekday_may_match() -> None:
    parse_cron("0 0 30 2 mon")  # both restricted: any Monday of February
    parse_cron("0 0 29 2 *")  # leap years


@pytest.mark.parametrize(
    ("cron", "now", "slot"),
    [
        ("0 2 * * *", "2026-03-10 02:00:00", "2026-03-10 02:00"),  # exactly on the slot
        ("0 2 * * *", "2026-03-10 01:59:59", "2026-03-09 02:00"),
        ("0 2 * * *", "2026-03-10 17:31:12", "2026-03-10 02:00"),
        ("*/15 * * * *", "2026-03-10 17:44:59", "2026-03-10 17:30"),
        ("30 */6 * * *", "2026-03-10 06:29:00", "2026-03-10 00:30"),
        ("0 0 1 * *", "2026-03-01 00:00:30", "2026-03-01 00:00"),
        ("0 0 1 * *", "2026-01-31 23:59:00", "2026-01-01 00:00"),
        ("0 0 1 1 *", "2026-01-01 00:00:00", "2026-01-01 00:00"),  # across a year
        ("59 23 31 12 *", "2026-06-01 00:00:00", "2025-12-31 23:59"),
        ("0 0 29 2 *", "2026-06-01 00:00:00", "2024-02-29 00:00"),  # the last leap day
        ("0 6 * * 1-5", "2026-03-08 12:00:00", "2026-03-06 06:00"),  # Sunday -> Friday
        ("0 6 * * 0", "2026-03-10 12:00:00", "2026-03-08 06:00"),
        ("0 6 * * 7", "2026-03-10 12:00:00", "2026-03-08 06:00"),
        # Both day fields restricted: either matches (the 13th, or any Friday).
        ("0 0 13 * 5", "2026-03-12 12:00:00", "2026-03-06 00:00"),
        ("0 0 13 * 5", "2026-03-13 12:00:00", "2026-03-13 00:00"),
        # A day field starting with * does not count: only Mondays on odd days.
        ("0 0 */2 * 1", "2026-03-10 12:00:00", "2026-03-09 00:00"),
        ("0 0 */2 * 1", "2026-03-17 12:00:00", "2026-03-09 00:00"),
    ],
)
def test_the_latest_slot_at_or_before_now(cron: str, now: str, slot: str) -> None:
    assert latest(cron, now, window_days=3 * 366) == at(slot)


def test_no_slot_before_not_before() -> None:
    cron = parse_cron("0 2 * * *")
    now = at("2026-03-10 08:00")
    assert cron.latest(at_or_before=now, not_before=at("2026-03-10 02:00")) == at(
        "2026-03-10 02:00"
    )
    assert cron.latest(at_or_before=now, not_before=at("2026-03-10 02:00:01")) is None
    assert cron.latest(at_or_before=now, not_before=now) is None


def test_the_latest_slot_is_in_utc_whatever_the_zone_of_now() -> None:
    paris = datetime.fromisoformat("2026-03-10 02:30+01:00")  # 01:30 UTC
    cron = parse_cron("0 2 * * *")
    assert cron.latest(at_or_before=paris, not_before=paris - timedelta(days=2)) == at(
        "2026-03-09 02:00"
    )


def test_a_one_value_range_with_a_step_names_that_value_only() -> None:
    # cronsim 2.8 reads "15-15/2" as "15/2" (15, 17, ... 23); cron(8) and this parser: 15.
    assert parse_cron("0 15-15/2 * * *").hours == (15,)


def test_a_stepped_star_in_the_weekday_field_still_leaves_the_day_to_the_other_field() -> None:
    # croniter 7 ORs "30" with "*/8" (Sundays); Vixie cron and this parser AND them.
    assert latest("0 0 30 * */8", "2026-03-31 00:00:00") == at("2025-11-30 00:00")
