"""Cron schedules in English: a phrase only where it is exact, the expression itself else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from webapp.campaigns.cron import parse_cron
from webapp.campaigns.cron_words import cron_phrase, cron_words


@pytest.mark.parametrize(
    ("cron", "words"),
    [
        # The examples.
        ("0 2 * * *", "every day at 02:00 UTC"),
        ("30 6 * * 1", "every Monday at 06:30 UTC"),
        ("*/15 * * * *", "every 15 minutes"),
        ("0 2 1 * *", "at 02:00 UTC on the 1st of every month"),
        # Repetitions through the day.
        ("* * * * *", "every minute"),
        ("*/1 * * * *", "every minute"),
        ("0,30 * * * *", "every 30 minutes"),
        ("15,45 * * * *", "every 30 minutes from 00:15 UTC"),
        ("0 * * * *", "every hour"),
        ("30 * * * *", "every hour at minute 30"),
        ("0 */2 * * *", "every 2 hours"),
        ("30 1-23/2 * * *", "every 2 hours from 01:30 UTC"),
        ("*/15 9-17 * * *", "every 15 minutes from 09:00 to 17:45 UTC"),
        ("* 3 * * *", "every minute from 03:00 to 03:59 UTC"),
        # A few times a day.
        ("0 0,12 * * *", "every day at 00:00 and 12:00 UTC"),
        ("0 */6 * * *", "every day at 00:00, 06:00, 12:00 and 18:00 UTC"),
        ("*/30 2 * * *", "every day at 02:00 and 02:30 UTC"),
        # Weekdays, Monday first, runs of three or more as a span.
        ("0 9 * * mon-fri", "every Monday to Friday at 09:00 UTC"),
        ("0 0 * * 0,6", "every Saturday and Sunday at 00:00 UTC"),
        ("0 0 * * 7", "every Sunday at 00:00 UTC"),
        ("0 8 * * 1,3,5", "every Monday, Wednesday and Friday at 08:00 UTC"),
        ("*/5 * * * 1-5", "every 5 minutes, every Monday to Friday"),
        # Days of the month and months.
        ("0 0 1,15 * *", "at 00:00 UTC on the 1st and 15th of every month"),
        ("0 0 1-7 * *", "at 00:00 UTC on the 1st to 7th of every month"),
        ("0 0 2,3,22,23 * *", "at 00:00 UTC on the 2nd, 3rd, 22nd and 23rd of every month"),
        ("0 0 11,12,31 * *", "at 00:00 UTC on the 11th, 12th and 31st of every month"),
        ("0 0 11-13,21 * *", "at 00:00 UTC on the 11th to 13th and 21st of every month"),
        (
            "0 5 */5 * *",
            "at 05:00 UTC on the 1st, 6th, 11th, 16th, 21st, 26th and 31st of every month",
        ),
        ("0 0 29 2 *", "at 00:00 UTC on the 29th of February"),
        ("0 0 1 1,7 *", "at 00:00 UTC on the 1st of January and July"),
        ("0 0 * jan *", "every day in January at 00:00 UTC"),
        ("0 6 * 3-5 1", "every Monday in March to May at 06:00 UTC"),
        ("0 * 1 * *", "every hour on the 1st of every month"),
        # Both day fields restricted: either matches (Vixie cron).
        ("0 0 13 * 5", "at 00:00 UTC on the 13th of every month and every Friday"),
        ("0 0 1-31 * 1", "every day at 00:00 UTC"),
        ("0 0 * * 0-6", "every day at 00:00 UTC"),
        # Macros.
        ("@daily", "every day at 00:00 UTC"),
        ("@hourly", "every hour"),
        ("@weekly", "every Sunday at 00:00 UTC"),
        ("@monthly", "at 00:00 UTC on the 1st of every month"),
        ("@yearly", "at 00:00 UTC on the 1st of January"),
        ("  0   2  * * *  ", "every day at 02:00 UTC"),
    ],
)
def test_a_schedule_with_an_exact_short_phrase_reads_as_it(cron: str, words: str) -> None:
    assert cron_phrase(cron) == words
    assert cron_words(cron) == words


@pytest.mark.parametrize(
    "cron",
    [
        "*/7 * * * *",  # 0, 7, ... 56, then 0 again: not every 7 minutes
        "0 5,17 */4 * *",  # 8 days a month: 7 is the most spelled out
        "0 0 */2 * *",
        "0 0 */2 * 1",  # odd days that are Mondays: both must match
        "5,10 1,2,3 * * *",  # six times a day
        "*/15 */6 * * *",
        "*/15 1,5 * * *",  # every 15 minutes in two separate hours
        "0 */5 * * *",  # 0, 5, ... 20, then 0 again
        "0 1,2,3,4,5 * * *",
    ],
)
def test_a_schedule_without_an_exact_short_phrase_stays_cron(cron: str) -> None:
    assert cron_phrase(cron) is None
    assert cron_words(cron) == cron


@pytest.mark.parametrize("text", ["", "   ", "every night", "60 * * * *", "0 0 30 2 *"])
def test_empty_or_malformed_expressions_have_no_phrase_and_are_shown_as_given(text: str) -> None:
    assert cron_phrase(text) is None
    assert cron_words(text) == text.strip()


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("cron", "after", "expected"),
    [
        ("0 2 * * *", "2026-03-10 01:59:59", "2026-03-10 02:00"),
        ("0 2 * * *", "2026-03-10 02:00:00", "2026-03-11 02:00"),  # strictly after
        ("0 2 * * *", "2026-12-31 03:00", "2027-01-01 02:00"),
        ("30 6 * * 1", "2026-03-10 00:00", "2026-03-16 06:30"),  # 10 March 2026: a Tuesday
        ("*/15 * * * *", "2026-03-10 23:50", "2026-03-11 00:00"),
        ("0 0 31 * *", "2026-04-01 00:00", "2026-05-31 00:00"),  # April has no 31st
        ("0 0 29 2 *", "2026-03-01 00:00", "2028-02-29 00:00"),
        ("0 0 29 2 *", "2096-03-01 00:00", "2104-02-29 00:00"),  # 2100 is no leap year
        ("0 0 13 * 5", "2026-03-07 00:00", "2026-03-13 00:00"),  # a Friday the 13th
        ("0 0 13 * 5", "2026-03-13 00:00", "2026-03-20 00:00"),
    ],
)
def test_the_next_slot_is_the_first_the_cron_names_after_a_time(
    cron: str, after: str, expected: str
) -> None:
    assert parse_cron(cron).next_after(at(after)) == at(expected)


def test_the_next_slot_is_consistent_with_the_latest_one() -> None:
    cron = parse_cron("10 4,16 * * mon,thu")
    moment = at("2026-03-01 00:00")
    for _ in range(20):
        following = cron.next_after(moment)
        assert following is not None
        assert cron.latest(at_or_before=following, not_before=moment) == following
        assert cron.latest(at_or_before=following - timedelta(seconds=1), not_before=moment) in (
            None,
            moment,
        )
        moment = following
