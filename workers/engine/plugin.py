"""The monitoring-plugins conventions (Nagios, Icinga, Checkmk, ETF): states and exit codes,
threshold ranges, performance data and the one status line (docs/monitoring-probes.md).

Plain Python: `probe --nagios` uses it, and so does `manage.py check_watch`.

Not the `nagiosplugin` package (PyPI, 1.4.0): it has no type annotations (the engine is checked
with mypy --strict), and its `Check.main` takes over the process (it exits, and times the
plugin out with SIGALRM) where the engine runs its own deadlines and client processes; what
is needed here is under two hundred lines.

Ranges follow the guidelines exactly: `10` alerts outside 0..10, `10:` below 10, `~:10`
above 10, `10:20` outside 10..20, `@10:20` inside 10..20; the ends count as inside.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum


class State(IntEnum):
    """A plugin's verdict, which is also its exit status."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


class BadThreshold(ValueError):
    """A --warning/--critical that does not parse; `flag` names the option."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"{flag}: {message}")
        self.flag = flag
        self.message = message


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)"
_RANGE = re.compile(rf"^(?P<at>@)?(?:(?P<start>~|{_NUMBER})?:)?(?P<end>{_NUMBER})?$")


@dataclass(frozen=True)
class Range:
    """A threshold range: `start..end` (ends included); alerts outside it, or inside with @."""

    start: float
    end: float
    inside: bool
    text: str  # as the perfdata's warn/crit field shows it

    def alerts(self, value: float) -> bool:
        within = self.start <= value <= self.end
        return within if self.inside else not within

    def describe(self) -> str:
        """In words, for the status line: "below 50", "above 0.5", "outside 10..20"."""
        if self.inside:
            return f"inside {_number(self.start)}..{_number(self.end)}"
        if self.end == math.inf:
            return f"below {_number(self.start)}"
        if self.start == -math.inf:
            return f"above {_number(self.end)}"
        return f"outside {_number(self.start)}..{_number(self.end)}"


def parse_range(text: str, *, flag: str) -> Range:
    """One range of the guidelines' syntax, `[@][start:][end]`; BadThreshold naming `flag`."""
    found = _RANGE.match(text.strip())
    if not found or text.strip() in ("", "@", ":", "@:"):
        raise BadThreshold(flag, f"{text!r} is not a range (10, 10:, ~:10, 10:20 or @10:20)")
    start_text, end_text = found["start"], found["end"]
    start = -math.inf if start_text == "~" else float(start_text or 0)
    # "10:" has no end (infinity); "10" alone is 0..10.
    end = math.inf if end_text is None else float(end_text)
    if start > end:
        raise BadThreshold(flag, f"{text!r} starts above its end ({start_text} > {end_text})")
    return Range(start, end, inside=bool(found["at"]), text=text.strip())


@dataclass(frozen=True)
class Thresholds:
    """The warning and critical ranges of one metric (either may be absent)."""

    warning: Range | None = None
    critical: Range | None = None

    def state(self, value: float) -> State:
        if self.critical is not None and self.critical.alerts(value):
            return State.CRITICAL
        if self.warning is not None and self.warning.alerts(value):
            return State.WARNING
        return State.OK

    def tripped(self, value: float) -> Range | None:
        """The range that decided a non-OK state, for the status line."""
        for bound in (self.critical, self.warning):
            if bound is not None and bound.alerts(value):
                return bound
        return None


def parse_thresholds(
    text: str, *, flag: str, metrics: Mapping[str, str], default: str
) -> dict[str, Range]:
    """`NAME=RANGE[,NAME=RANGE...]` (a bare RANGE is `default`'s) into a range per metric.
    `metrics` maps every accepted name (aliases included) to its metric."""
    ranges: dict[str, Range] = {}
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise BadThreshold(flag, f"{text!r} has an empty item (give NAME=RANGE[,NAME=RANGE])")
    for item in items:
        name, _, spec = item.rpartition("=")
        metric = metrics.get(name.strip()) if name else default
        if metric is None:
            known = ", ".join(sorted(metrics))
            raise BadThreshold(flag, f"unknown metric {name.strip()!r} (known: {known})")
        if metric in ranges:
            raise BadThreshold(flag, f"{metric} is given twice")
        ranges[metric] = parse_range(spec, flag=flag)
    return ranges


def merge_thresholds(
    warning: Mapping[str, Range], critical: Mapping[str, Range]
) -> dict[str, Thresholds]:
    return {
        name: Thresholds(warning=warning.get(name), critical=critical.get(name))
        for name in {*warning, *critical}
    }


@dataclass(frozen=True)
class Perf:
    """One performance datum: `'label'=value[UOM];[warn];[crit];[min];[max]`."""

    label: str
    value: float
    uom: str = ""  # "", s, ms, us, %, B, KB, MB, TB or c: the guidelines' units
    thresholds: Thresholds = Thresholds()
    minimum: float | None = None
    maximum: float | None = None

    def __str__(self) -> str:
        w, c = self.thresholds.warning, self.thresholds.critical
        fields = [
            f"{_number(self.value)}{self.uom}",
            w.text if w else "",
            c.text if c else "",
            "" if self.minimum is None else _number(self.minimum),
            "" if self.maximum is None else _number(self.maximum),
        ]
        return f"'{self.label}'=" + ";".join(fields).rstrip(";")


UOMS = frozenset({"", "s", "ms", "us", "%", "B", "KB", "MB", "TB", "c"})


def status_line(service: str, state: State, text: str, perfdata: Iterable[Perf] = ()) -> str:
    """The plugin's one line: `SERVICE STATE: text | perfdata`. The text is made one line,
    without the `|` that would start the perfdata."""
    plain = " ".join(text.replace("|", "/").split())
    perf = " ".join(str(p) for p in perfdata)
    return f"{service} {state.name}: {plain}" + (f" | {perf}" if perf else "")


def _number(value: float) -> str:
    """A number in the C locale, never in exponent notation (perfdata parsers expect
    [-0-9.]); at most 6 decimals."""
    if value == math.inf:
        return ""
    if value == -math.inf:
        return "~"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.6f}".rstrip("0").rstrip(".")
