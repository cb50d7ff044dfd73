"""Detection: is a series' latest night a change, and of which kind (docs/watch.md, "Detection").

Pure statistics over one series' nights (no database): the watch rolls the nights up,
calls `detect` with the nights up to the one it evaluates, and decides the regression's
state from the `Detection`. Two tiers:

- breakage, the same night: tonight far outside the robust band (median and MAD) of the
  recent nights, by a robust z *and* a minimum relative magnitude -> suspicious;
- shift: a persistent change of level, found by E-Divisive means with a Student's t-test
  (Apache Otava's `compute_change_points`), at least a minimum magnitude, and a new level
  that stands out of the series' own weather: its mean lies `shift_z` standard errors from
  the band's, the errors widened for the nights' autocorrelation (bad nights come in runs, so
  a week of them is one bad spell, not seven bad nights); confirmed once at least
  `confirm_nights` nights sit on the new level -> regression; before that suspicious.

The change-point search only runs where a cheap pre-test (the last nights' median against
the nights' before them) hints at a change, so that 120,000 series are evaluated in one pass.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from importlib.metadata import version
from typing import Any, NamedTuple

from otava.analysis import compute_change_points

DETECTOR_NAME = "fedprobe-band+otava-edivisive-ttest+ar1-level-z"
LIBRARY = f"apache-otava {version('apache-otava')}"
MAD_TO_SIGMA = 1.4826  # MAD of a normal sample x this = its standard deviation
CLIP_SIGMAS = 3.0  # a night further than this from its side's median counts as this far
RHO_MAX = 0.9  # the nights' lag-1 autocorrelation, at most (a trend is not weather)
WEEKLY_MIN_NIGHTS = 21

REGRESSION = "regression"
SUSPICIOUS = "suspicious"
NO_CHANGE = "no-change"
INSUFFICIENT_DATA = "insufficient-data"
BREAKAGE = "breakage"
SHIFT = "shift"


class NightPoint(NamedTuple):
    """One measured night of a series: the median over its runs, their robust spread (MAD,
    0 for one run) and how many runs (or client records) are behind it. A named tuple: a
    pass makes one per series, metric and night (millions), and a frozen dataclass costs
    three times as much to make."""

    night: date
    value: float
    spread: float = 0.0
    n: int = 1


@dataclass(frozen=True)
class DetectorConfig:
    """Every threshold of `detect`; stored with each verdict (`to_json`) to reproduce it."""

    window_nights: int = 60  # the nights looked at, latest last
    band_min_nights: int = 14  # the breakage band needs at least these before tonight
    band_max_nights: int = 28  # ... and uses at most these
    breakage_z: float = 4.0  # robust z of tonight against the band
    breakage_min_pct: float = 20.0  # ... and its relative distance from the band's median
    shift_min_pct: float = 15.0  # a shift smaller than this is no change
    shift_z: float = 9.0  # ... and one whose level z (autocorrelation counted) is below
    pretest_fraction: float = 0.6  # search change points if the tail moved this x min
    max_pvalue: float = 0.001  # the t-test's significance of a change point
    cp_window: int = 30  # Otava's sliding window (nights)
    confirm_nights: int = 4  # nights on the new level that confirm a shift
    weekly: bool = True  # take out each weekday's usual level (busier weekdays) first

    def to_json(self) -> dict[str, Any]:
        return dict(_config_json(self))  # a copy: the caller may store and change it

    @property
    def needed_nights(self) -> int:
        """Fewest nights for any verdict but insufficient-data: a band and tonight."""
        return self.band_min_nights + 1


@functools.cache
def _config_json(config: DetectorConfig) -> dict[str, Any]:
    """asdict() of a configuration, once per configuration (every verdict stores it)."""
    return asdict(config)


@dataclass(frozen=True)
class Detection:
    """What `detect` says of a series' latest night. `worse` tells the direction: the
    watch opens or keeps a regression only for a finding with `worse` true."""

    verdict: str
    tier: str | None
    change_night: date | None
    baseline: float | None
    current: float | None
    change_pct: float | None
    worse: bool
    confirmed: bool
    detector: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class _Finding:
    tier: str
    change_at: int  # index into the window
    baseline: float
    current: float
    baseline_window: tuple[int, int]  # [first, last] indexes, inclusive
    confirmed: bool


def detect(
    points: Sequence[NightPoint],
    *,
    higher_is_better: bool,
    config: DetectorConfig = DetectorConfig(),
) -> Detection:
    """The verdict on the last of `points` (night order, measured nights only), judged from
    the nights before it; nights without runs (n == 0) are left out."""
    window = [p for p in points if p.n > 0 and math.isfinite(p.value)]
    window = window[-config.window_nights :]
    if len(window) < config.needed_nights:
        return _insufficient(window, config)
    if config.weekly:
        window = _without_weekdays(window)
    values = [p.value for p in window]
    shift = _shift(values, config) if _pretest(values, config) else None
    breakage = _breakage(window, config)
    finding = _choose(shift, breakage)
    if finding is None:
        return _no_change(window, config)
    return _detection(finding, window, higher_is_better=higher_is_better, config=config)


def _without_weekdays(window: Sequence[NightPoint]) -> list[NightPoint]:
    """The nights divided by their weekday's usual level (the median of that weekday's
    nights over the overall median), once there are three weeks of them: a busy Monday is
    then no drop. Multiplicative, as load is; left as they are where the level is 0."""
    level = statistics.median(p.value for p in window)
    if level <= 0 or len(window) < WEEKLY_MIN_NIGHTS:
        return list(window)
    by_weekday: dict[int, list[float]] = {}
    for p in window:
        by_weekday.setdefault(p.night.weekday(), []).append(p.value)
    factor = {day: statistics.median(v) / level for day, v in by_weekday.items() if len(v) >= 3}
    return [_scaled(p, factor.get(p.night.weekday(), 1.0)) for p in window]


def _scaled(point: NightPoint, factor: float) -> NightPoint:
    if factor <= 0:
        return point
    return NightPoint(point.night, point.value / factor, point.spread / factor, point.n)


def _choose(shift: _Finding | None, breakage: _Finding | None) -> _Finding | None:
    """A confirmed shift says most; else tonight's breakage; else an unconfirmed shift."""
    if shift and shift.confirmed:
        return shift
    return breakage or shift


def _band(end: int, config: DetectorConfig) -> tuple[int, int]:
    """[first, last] of the band of recent nights before index `end`."""
    return max(0, end - config.band_max_nights), end - 1


def _breakage(window: Sequence[NightPoint], config: DetectorConfig) -> _Finding | None:
    values = [p.value for p in window]
    tonight = window[-1]
    first, last = _band(len(values) - 1, config)
    median, mad = _median_sigma(values[first : last + 1])
    # Tonight's median is itself uncertain when its runs spread: that widens the band.
    tonight_se = MAD_TO_SIGMA * tonight.spread / math.sqrt(tonight.n)
    scale = math.hypot(mad, tonight_se)
    distance = abs(tonight.value - median)
    z = distance / scale if scale > 0 else (math.inf if distance > 0 else 0.0)
    if z <= config.breakage_z or _relative(distance, median) * 100 <= config.breakage_min_pct:
        return None
    at = len(values) - 1
    return _Finding(BREAKAGE, at, median, tonight.value, (first, last), confirmed=False)


def _pretest(values: Sequence[float], config: DetectorConfig) -> bool:
    """Cheap: did the last nights' median move from the window's by enough to search?"""
    tail_start = len(values) - config.confirm_nights
    # All the nights before, not only the band: a shift waits for its z for weeks, while
    # the band fills with nights of the new level.
    reference = statistics.median(values[:tail_start])
    moved = abs(statistics.median(values[tail_start:]) - reference)
    return _relative(moved, reference) * 100 >= config.shift_min_pct * config.pretest_fraction


def _shift(values: Sequence[float], config: DetectorConfig) -> _Finding | None:
    """The latest significant change point whose level moved by the minimum magnitude
    (medians of the band before it and of the nights since) and by `shift_z` standard
    errors of the weather (`level_z`)."""
    change_points, _weak = compute_change_points(
        list(values),
        window_len=config.cp_window,
        max_pvalue=config.max_pvalue,
        min_magnitude=config.shift_min_pct / 100,
    )
    for change_point in reversed(change_points):
        at = int(change_point.index)
        first, last = _band(at, config)
        band = values[first : last + 1]
        baseline = statistics.median(band)
        after = values[at:]
        current = statistics.median(after)
        moved = abs(current - baseline)
        if _relative(moved, baseline) * 100 < config.shift_min_pct:
            continue
        if level_z(values[first:], at=at - first) < config.shift_z:
            continue
        confirmed = _on_new_level(after, baseline=baseline, current=current, config=config)
        return _Finding(SHIFT, at, baseline, current, (first, last), confirmed)
    return None


def _on_new_level(
    after: Sequence[float], *, baseline: float, current: float, config: DetectorConfig
) -> bool:
    """Enough nights since the change, and each of the last `confirm_nights` nearer the new
    level than the old: a bad night that passed does not confirm."""
    if len(after) < config.confirm_nights:
        return False
    recent = after[-config.confirm_nights :]
    return all(abs(v - current) < abs(v - baseline) for v in recent)


def level_z(values: Sequence[float], *, at: int) -> float:
    """How many standard errors the mean level of values[at:] lies from that of
    values[:at]: on logarithms (relative changes, as load acts) where all are positive,
    each side's nights clipped at CLIP_SIGMAS robust sigmas of it (one odd night moves
    nothing), and the standard error of each mean widened for the nights' lag-1
    autocorrelation, as an AR(1) process's is: k nights in a run of bad weather weigh as
    fewer independent nights."""
    if all(v > 0 for v in values):
        values = [math.log(v) for v in values]
    before, after = _clipped(values[:at]), _clipped(values[at:])
    if len(before) < 2 or len(after) < 2:
        return 0.0
    mean_before, mean_after = statistics.fmean(before), statistics.fmean(after)
    residuals = [v - mean_before for v in before], [v - mean_after for v in after]
    squares = sum(r * r for side in residuals for r in side)
    lagged = sum(x * y for side in residuals for x, y in itertools.pairwise(side))
    if squares == 0:
        return 0.0 if mean_after == mean_before else math.inf
    variance = squares / (len(values) - 2)
    rho = min(RHO_MAX, max(0.0, lagged / squares))
    error = variance * (_ar1_factor(len(before), rho) / len(before))
    error += variance * (_ar1_factor(len(after), rho) / len(after))
    return abs(mean_after - mean_before) / math.sqrt(error)


def _clipped(values: Sequence[float]) -> list[float]:
    if not values:
        return []
    median, sigma = _median_sigma(values)
    low, high = median - CLIP_SIGMAS * sigma, median + CLIP_SIGMAS * sigma
    return [min(max(v, low), high) for v in values]


def _ar1_factor(k: int, rho: float) -> float:
    """The variance of the mean of k nights of an AR(1) process with lag-1 correlation
    `rho`, over that of k independent nights: 1 for rho 0, (1 + rho) / (1 - rho) for k
    large."""
    if rho <= 0:
        return 1.0
    return (1 + rho) / (1 - rho) - 2 * rho * (1 - rho**k) / (k * (1 - rho) ** 2)


def _median_sigma(values: Sequence[float]) -> tuple[float, float]:
    """The median and the robust sigma (MAD, scaled to a normal's standard deviation)."""
    median = statistics.median(values)
    return median, statistics.median(abs(v - median) for v in values) * MAD_TO_SIGMA


def _relative(distance: float, reference: float) -> float:
    if reference == 0:
        return math.inf if distance > 0 else 0.0
    return distance / abs(reference)


def _detection(
    finding: _Finding,
    window: Sequence[NightPoint],
    *,
    higher_is_better: bool,
    config: DetectorConfig,
) -> Detection:
    confirmed = finding.tier == SHIFT and finding.confirmed
    change_pct = None
    if finding.baseline != 0:
        change_pct = (finding.current - finding.baseline) / abs(finding.baseline) * 100
    went_up = finding.current > finding.baseline
    first, last = finding.baseline_window
    return Detection(
        verdict=REGRESSION if confirmed else SUSPICIOUS,
        tier=finding.tier,
        change_night=window[finding.change_at].night,
        baseline=finding.baseline,
        current=finding.current,
        change_pct=change_pct,
        worse=went_up != higher_is_better,
        confirmed=confirmed,
        detector=_detector(
            config,
            baseline_window=(window[first].night, window[last].night),
            target_window=(window[finding.change_at].night, window[-1].night),
        ),
    )


def _no_change(window: Sequence[NightPoint], config: DetectorConfig) -> Detection:
    first, last = _band(len(window) - 1, config)
    band = [p.value for p in window[first : last + 1]]
    return Detection(
        verdict=NO_CHANGE,
        tier=None,
        change_night=None,
        baseline=statistics.median(band),
        current=window[-1].value,
        change_pct=None,
        worse=False,
        confirmed=False,
        detector=_detector(
            config,
            baseline_window=(window[first].night, window[last].night),
            target_window=(window[-1].night, window[-1].night),
        ),
    )


def _insufficient(window: Sequence[NightPoint], config: DetectorConfig) -> Detection:
    detector = _detector(config, baseline_window=None, target_window=None)
    detector["nights"] = len(window)
    detector["nights_needed"] = config.needed_nights
    return Detection(
        verdict=INSUFFICIENT_DATA,
        tier=None,
        change_night=None,
        baseline=None,
        current=window[-1].value if window else None,
        change_pct=None,
        worse=False,
        confirmed=False,
        detector=detector,
    )


def _detector(
    config: DetectorConfig,
    *,
    baseline_window: tuple[date, date] | None,
    target_window: tuple[date, date] | None,
) -> dict[str, object]:
    return {
        "name": DETECTOR_NAME,
        "library": LIBRARY,
        "parameters": config.to_json(),
        "baseline_window": _iso(baseline_window),
        "target_window": _iso(target_window),
    }


def _iso(window: tuple[date, date] | None) -> list[str] | None:
    return [window[0].isoformat(), window[1].isoformat()] if window else None
