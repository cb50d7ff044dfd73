"""Cron schedules in English: "every day at 02:00 UTC", "every Monday at 06:30 Europe/Zurich"
(times are in the schedule's zone, named as given).

`cron_phrase` gives a phrase only where it says exactly when the schedule fires, else None;
`cron_words` falls back to the expression itself. Pure: no database, no clock.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from webapp.campaigns.cron import Cron, CronError, parse_cron

_EVERY_DAY = frozenset(range(1, 32))
_EVERY_WEEKDAY = frozenset(range(7))
_EVERY_MONTH = frozenset(range(1, 13))
_WEEKDAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
# Longer lists of times or days read worse than the expression itself.
MAX_TIMES = 4
MAX_DAYS = 7


def cron_words(text: str, *, zone: str = "UTC") -> str:
    """The schedule in English where a short phrase is exact, else the expression as given."""
    return cron_phrase(text, zone=zone) or text.strip()


def cron_phrase(text: str, *, zone: str = "UTC") -> str | None:
    """The schedule in English with its times in `zone` (an IANA name), or None where no
    short phrase says exactly when it fires (and for an empty or malformed expression)."""
    try:
        cron = parse_cron(text)
    except CronError:
        return None
    times = _fixed_times(cron)
    days = _days(cron)
    if days is None:
        return None
    if times is not None:
        return _at_times(times, days, zone)
    frequency = _frequency(cron, zone)
    if frequency is None:
        return None
    if days.every:
        return f"{frequency}, {days.every}"
    return f"{frequency} {days.on}" if days.on else frequency


@dataclass(frozen=True)
class _Days:
    """Which days a schedule fires on, as a phrase: `every` ("every Monday", "every day in
    May") or `on` ("on the 1st of every month"); neither for every day."""

    every: str = ""
    on: str = ""


def _days(cron: Cron) -> _Days | None:
    every_day = cron.days == _EVERY_DAY
    every_weekday = cron.weekdays == _EVERY_WEEKDAY
    months = "" if cron.months == _EVERY_MONTH else f" in {_months(cron.months)}"
    of_months = "every month" if not months else _months(cron.months)
    weekdays = f"every {_weekdays(cron.weekdays)}{months}"
    on_days = _month_days(cron.days, of_months)
    both_must_match = cron.any_day or cron.any_weekday  # else either does (Vixie cron)
    daily = (every_day and every_weekday) if both_must_match else (every_day or every_weekday)
    if daily:
        return _Days(every=f"every day{months}" if months else "")
    if not both_must_match:
        return _Days(on=f"{on_days} and {weekdays}") if on_days else None
    if every_day:
        return _Days(every=weekdays)
    if every_weekday and on_days:
        return _Days(on=on_days)
    return None  # a day of the month that is also a given weekday: no short phrase


def _weekdays(weekdays: frozenset[int]) -> str:
    # Monday first: "Monday to Friday", "Saturday and Sunday".
    monday_first = sorted((day - 1) % 7 for day in weekdays)
    return _spans(monday_first, lambda i: _WEEKDAY_NAMES[(i + 1) % 7])


def _month_days(days: frozenset[int], of_months: str) -> str | None:
    if len(days) > MAX_DAYS:
        return None
    return f"on the {_spans(sorted(days), _ordinal)} of {of_months}"


def _months(months: frozenset[int]) -> str:
    return _spans(sorted(months), lambda month: calendar.month_name[month])


def _fixed_times(cron: Cron) -> list[str] | None:
    """The day's times ("02:00", "14:00") when there are only a few, else None."""
    if len(cron.minutes) * len(cron.hours) > MAX_TIMES:
        return None
    return [f"{hour:02d}:{minute:02d}" for hour in cron.hours for minute in cron.minutes]


def _at_times(times: list[str], days: _Days, zone: str) -> str:
    at = f"at {_join(times)} {zone}"
    if days.every:
        return f"{days.every} {at}"
    if days.on:
        return f"{at} {days.on}"
    return f"every day {at}"


def _frequency(cron: Cron, zone: str) -> str | None:
    """ "every 15 minutes", "every 2 hours from 01:30 UTC": a repetition through the day."""
    minutes, hours = cron.minutes, cron.hours
    minute_step = _step(minutes, 60)
    if len(minutes) > 1 and minute_step:
        every = "every minute" if minute_step == 1 else f"every {minute_step} minutes"
        first, last = f"{hours[0]:02d}:{minutes[0]:02d}", f"{hours[-1]:02d}:{minutes[-1]:02d}"
        if len(hours) == 24:
            return every if minutes[0] == 0 else f"{every} from {first} {zone}"
        if hours == tuple(range(hours[0], hours[-1] + 1)):
            return f"{every} from {first} to {last} {zone}"
        return None
    hour_step = _step(hours, 24)
    if len(minutes) != 1 or not hour_step:
        return None
    if hour_step == 1:
        return "every hour" if minutes[0] == 0 else f"every hour at minute {minutes[0]}"
    first = f"{hours[0]:02d}:{minutes[0]:02d}"
    every = f"every {hour_step} hours"
    return every if first == "00:00" else f"{every} from {first} {zone}"


def _step(values: Sequence[int], period: int) -> int | None:
    """s when `values` are every s-th of 0..period-1 from a start below s (and so repeat
    evenly across the period's end), else None."""
    if len(values) < 2:
        return None
    step = values[1] - values[0]
    if period % step or values[0] >= step:
        return None
    return step if tuple(values) == tuple(range(values[0], period, step)) else None


def _spans(values: list[int], name: Callable[[int], str]) -> str:
    """Names of sorted values, runs of three or more as "first to last"."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            run = values[start:i]
            if len(run) >= 3:
                parts.append(f"{name(run[0])} to {name(run[-1])}")
            else:
                parts.extend(name(value) for value in run)
            start = i
    return _join(parts)


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"
