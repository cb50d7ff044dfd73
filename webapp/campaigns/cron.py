"""Cron schedules of campaigns: five fields, evaluated in a time zone (UTC by default).

`minute hour day-of-month month day-of-week`, each `*`, a number, a range `a-b`, a step
`*/s` or `a-b/s`, or a comma list of those; months `jan`-`dec` and weekdays `sun`-`sat` by
name too, Sunday as 0 or 7; `@hourly`, `@daily` (`@midnight`), `@weekly`, `@monthly`,
`@yearly` (`@annually`). As in Vixie cron, when both day fields are restricted a day matches
either; when one starts with `*`, only the other one counts.

In a zone with daylight saving time, each wall-clock time names one instant (`wall_instant`):
one in a spring-forward gap (02:30 on the night 02:00 becomes 03:00) names the first valid
time after the gap, the transition itself, as cronie and Vixie cron run such jobs; one that
happens twice on a fall-back night names its first occurrence. So every slot fires once.
"""

from __future__ import annotations

import calendar
import functools
import hashlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

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

    def latest(
        self, *, at_or_before: datetime, not_before: datetime, zone: tzinfo = UTC
    ) -> datetime | None:
        """The last time (UTC) this schedule, read in `zone`, fires in [not_before,
        at_or_before], or None."""
        end = at_or_before.astimezone(UTC)
        start = not_before.astimezone(UTC)
        day = end.astimezone(zone).date()
        while day >= start.astimezone(zone).date():
            if self.matches_day(day):
                for moment in self._times_of(day, zone):
                    if moment <= end:
                        return moment if moment >= start else None
            day -= timedelta(days=1)
        return None

    def next_after(self, moment: datetime, *, zone: tzinfo = UTC) -> datetime | None:
        """The first time (UTC) this schedule, read in `zone`, fires strictly after `moment`;
        None if not within NEXT_SEARCH_DAYS (a 29 February can be eight years away, around
        2100)."""
        start = moment.astimezone(UTC)
        first_day = start.astimezone(zone).date()
        for offset in range(NEXT_SEARCH_DAYS + 1):
            day = first_day + timedelta(days=offset)
            if self.matches_day(day):
                for time in reversed(list(self._times_of(day, zone))):
                    if time > start:
                        return time
        return None

    def shortest_interval(self) -> timedelta:
        """The shortest wall-clock time between two consecutive firings (a slip may not be
        longer): within a day, and from one firing day's last time to the next one's first,
        over nine years of days (every leap day's cycle)."""
        day_minutes = [hour * 60 + minute for hour in self.hours for minute in self.minutes]
        gaps = [later - earlier for earlier, later in itertools.pairwise(day_minutes)]
        first_day = date(2024, 1, 1)
        previous: date | None = None
        for offset in range(NEXT_SEARCH_DAYS):
            day = first_day + timedelta(days=offset)
            if not self.matches_day(day):
                continue
            if previous is not None:
                days = (day - previous).days
                gaps.append(days * 1440 + day_minutes[0] - day_minutes[-1])
                if days == 1:
                    break  # consecutive days: no pair of days comes closer
            previous = day
        return timedelta(minutes=min(gaps, default=1440))

    def _times_of(self, day: date, zone: tzinfo) -> Iterator[datetime]:
        """The day's firing times (UTC), latest first (two wall times in a spring-forward
        gap give the same instant)."""
        for hour in reversed(self.hours):
            for minute in reversed(self.minutes):
                yield wall_instant(day, hour, minute, zone)


def wall_instant(day: date, hour: int, minute: int, zone: tzinfo) -> datetime:
    """The instant (UTC) a wall-clock time of `zone` names: in a spring-forward gap the first
    valid time after it (the transition); on a fall-back night its first occurrence."""
    local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)  # fold=0: first
    instant = local.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == local.replace(tzinfo=None):
        return instant
    # In the gap: fold=0 reads it with the offset before the transition (after it in UTC),
    # fold=1 with the offset after (before it). The transition lies between: find its second.
    low, high = local.replace(fold=1).astimezone(UTC), instant
    offset_before = low.astimezone(zone).utcoffset()
    while (high - low) > timedelta(seconds=1):
        middle = low + (high - low) / 2
        middle = middle.replace(microsecond=0)
        if middle.astimezone(zone).utcoffset() == offset_before:
            low = middle
        else:
            high = middle
    return high


def slot_slip(*, campaign_id: int, slot: datetime, slip_s: int) -> timedelta:
    """How long after `slot` a campaign with a slip of up to `slip_s` seconds launches it:
    0..slip_s whole seconds from a hash of (campaign, slot), the same on every host and pass."""
    if slip_s <= 0:
        return timedelta(0)
    key = f"{campaign_id}:{slot.astimezone(UTC).isoformat()}".encode()
    number = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
    return timedelta(seconds=number % (slip_s + 1))


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


DEFAULT_ZONE = "UTC"
# The longest slip accepted at all (a day); a schedule's shortest interval bounds it further.
MAX_SLIP_S = 86400


def time_zone(name: str) -> ZoneInfo:
    """The IANA zone of that name; CronError if there is none."""
    if name not in _zone_names():
        raise CronError(f"{name!r} is not an IANA time zone name (e.g. Europe/Zurich, UTC)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"{name!r} is not an IANA time zone name") from None


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones() | {DEFAULT_ZONE})


def validate_time_zone(value: str) -> None:
    """Field validator: an IANA time zone name."""
    try:
        time_zone(value)
    except CronError as exc:
        raise ValidationError(str(exc), code="invalid_time_zone") from None


def slip_error(*, schedule: str, slip_s: int) -> str | None:
    """Why a slip does not fit the schedule (longer than its shortest interval), or None."""
    if slip_s > MAX_SLIP_S:
        return f"a slip may be at most {MAX_SLIP_S} s (a day), not {slip_s} s"
    if not slip_s or not schedule:
        return None
    try:
        interval = parse_cron(schedule).shortest_interval()
    except CronError:
        return None  # the schedule's own error says it
    if slip_s > interval.total_seconds():
        return (
            f"a slip of {slip_s} s is longer than the schedule's shortest interval "
            f"({int(interval.total_seconds())} s): slots would overtake each other"
        )
    return None


def launches_after(
    cron: Cron,
    *,
    now: datetime,
    zone: tzinfo,
    campaign_id: int,
    slip_s: int,
    not_before: datetime,
    count: int,
) -> list[datetime]:
    """The next `count` launch times (UTC, slip applied) after `now`: from slots at or after
    `not_before`, including one that passed but whose slip has not (launched later)."""
    slip = timedelta(seconds=slip_s)
    slot = cron.latest(at_or_before=now, not_before=max(not_before, now - slip), zone=zone)
    slots = [slot] if slot is not None else []
    moment = now
    while len(slots) < count + 1:
        following = cron.next_after(moment, zone=zone)
        if following is None:
            break
        slots.append(following)
        moment = following
    launches = (s + slot_slip(campaign_id=campaign_id, slot=s, slip_s=slip_s) for s in slots)
    return sorted(launch for launch in launches if launch > now)[:count]
