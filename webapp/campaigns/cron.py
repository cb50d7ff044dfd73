"""Cron schedules of campaigns: five fields, evaluated in UTC.

`minute hour day-of-month month day-of-week`, each `*`, a number, a range `a-b`, a step
`*/s` or `a-b/s`, or a comma list of those; months `jan`-`dec` and weekdays `sun`-`sat` by
name too, Sunday as 0 or 7; `@hourly`, `@daily` (`@midnight`), `@weekly`, `@monthly`,
`@yearly` (`@annually`). As in Vixie cron, when both day fields are restricted a day matches
either; when one starts with `*`, only the other one counts.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.core.exceptions import ValidationError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# How far ahead Cron.next_after looks: past the longest gap between two 29 Februaries.
NEXT_SEARCH_DAYS = 9 * 366
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_WEEKDAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day-of-month", 1, 31, {}),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 0, 7, _WEEKDAYS),
)


class CronError(ValueError):
    """A cron string that is malformed, or names a day that never comes."""


@dataclass(frozen=True)
class Cron:
    """A parsed schedule: the values each field allows."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # the day-of-month field starts with *
    any_weekday: bool  # the day-of-week field starts with *

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        on_weekday = day.isoweekday() % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and on_weekday
        return in_month or on_weekday

    def latest(self, *, at_or_before: datetime, not_before: datetime) -> datetime | None:
        """The last time this schedule fires in [not_before, at_or_before], or None."""
        end = at_or_before.astimezone(UTC)
        start = not_before.astimezone(UTC)
        day = end.date()
        while day >= start.date():
            if self.matches_day(day):
                for moment in self._times_of(day):
                    if moment <= end:
                        return moment if moment >= start else None
            day -= timedelta(days=1)
        return None

    def next_after(self, moment: datetime) -> datetime | None:
        """The first time this schedule fires strictly after `moment`; None if not within
        NEXT_SEARCH_DAYS (a 29 February can be eight years away, around 2100)."""
        start = moment.astimezone(UTC)
        for offset in range(NEXT_SEARCH_DAYS + 1):
            day = start.date() + timedelta(days=offset)
            if self.matches_day(day):
                for time in reversed(list(self._times_of(day))):
                    if time > start:
                        return time
        return None

    def _times_of(self, day: date) -> Iterator[datetime]:
        """The day's firing times, latest first."""
        for hour in reversed(self.hours):
            for minute in reversed(self.minutes):
                yield datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


def parse_cron(text: str) -> Cron:
    expression = MACROS.get(text.strip().lower(), text)
    fields = expression.split()
    if len(fields) != len(_FIELDS):
        raise CronError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    minutes, hours, days, months, weekdays = (
        _parse_field(value, spec) for value, spec in zip(fields, _FIELDS, strict=True)
    )
    cron = Cron(
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(w % 7 for w in weekdays),
        any_day=fields[2].startswith("*"),
        any_weekday=fields[4].startswith("*"),
    )
    _check_day_comes(cron)
    return cron


def _parse_field(value: str, spec: _Field) -> set[int]:
    allowed: set[int] = set()
    for part in value.lower().split(","):
        allowed |= _parse_part(part, spec)
    return allowed


def _parse_part(part: str, spec: _Field) -> set[int]:
    span, _, step_text = part.partition("/")
    step = _number(step_text, spec, what="step") if step_text else 1
    if step < 1:
        raise CronError(f"{spec.name}: a step must be at least 1, not {step_text!r}")
    if span == "*":
        low, high = spec.low, spec.high
    elif "-" in span:
        first, _, last = span.partition("-")
        low, high = _value(first, spec), _value(last, spec)
        if low > high:
            raise CronError(f"{spec.name}: range {span!r} runs backwards")
    elif step_text:
        raise CronError(f"{spec.name}: a step needs * or a range before it, not {span!r}")
    else:
        low = high = _value(span, spec)
    return set(range(low, high + 1, step))


def _value(text: str, spec: _Field) -> int:
    number = spec.names[text] if text in spec.names else _number(text, spec, what="value")
    if not spec.low <= number <= spec.high:
        raise CronError(f"{spec.name}: {number} is outside {spec.low}-{spec.high}")
    return number


def _number(text: str, spec: _Field, *, what: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise CronError(f"{spec.name}: {what} {text!r} is not a number")
    return int(text)


def _check_day_comes(cron: Cron) -> None:
    """Refuse day-of-month/month pairs that never happen (30 February)."""
    if cron.any_weekday and not any(
        day <= calendar.monthrange(2024, month)[1] for month in cron.months for day in cron.days
    ):
        raise CronError("day-of-month: no chosen day exists in the chosen months")


def validate_cron(value: str) -> None:
    """Field validator: a schedule must parse (an empty one means none)."""
    if not value:
        return
    try:
        parse_cron(value)
    except CronError as exc:
        raise ValidationError(str(exc), code="invalid_cron") from None
