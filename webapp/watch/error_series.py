"""Each error class of a series is a series of its own: the share of a night's site runs that
failed with it (tester faults left out of both), judged against its own usual band
(docs/watch.md#error-classes).

- bad: at least FEDPROBE_WATCH_ERROR_MIN_RUNS runs failed with the class and its share rose
  more than FEDPROBE_WATCH_ERROR_MIN_SHARE_PCT points above the band's top (the median + 4
  robust sigmas of its share over the BAND_NIGHTS nights before the last two); a class that
  never appeared has a band of 0, so it is bad once it reaches the minimums;
- confirmed (open) when the night before was bad too; a live regression is judged against
  the band top it opened with (its `baseline`), so a class that stays high does not become
  the new normal;
- a night on which the series' availability is a breakage at once (a functional class
  failed, or every run failed) says nothing of its classes: that availability regression is
  the night's one alert, and names the classes;
- the tester's classes (harness, egress, lost, credential phase) never enter the rollup's
  `errors`: a night of tester faults only moves a live class regression to tester-fault, as
  it does availability's.
"""

from __future__ import annotations

import statistics
from datetime import date

from django.conf import settings

from webapp.campaigns.models import TESTER_FAULT_CLASS_NAMES
from webapp.watch.episodes import Finding
from webapp.watch.models import Regression
from webapp.watch.series import NightRow, SeriesId
from workers.engine.errors import ErrorClass

BAND_NIGHTS = 28
BAND_K = 4.0
MAD_TO_SIGMA = 1.4826
CLASSES = tuple(c.value for c in ErrorClass if c.value not in TESTER_FAULT_CLASS_NAMES)


def error_metric(error_class: str) -> str:
    return f"error:{error_class}"


def error_findings(
    series: SeriesId,
    history: list[NightRow],
    *,
    availability: Finding,
    live: dict[str, Regression],
    subject: dict[str, object],
) -> list[Finding]:
    """Tonight's findings on the series' error classes: those it failed with tonight and
    those with a live regression (the others say nothing)."""
    tonight = history[-1]
    prefix = series.key("error:")
    live_classes = [c for c in CLASSES if prefix + c in live]
    if availability.tester_fault:
        return [
            Finding(prefix + c, error_metric(c), None, tester_fault=True, summary="")
            for c in live_classes
        ]
    if availability.confirmed:
        return []  # the availability breakage is tonight's alert
    tonight_classes = [c for c in tonight.errors if c not in TESTER_FAULT_CLASS_NAMES]
    return [
        _finding(series, history, c, live.get(prefix + c), subject)
        for c in sorted(set(tonight_classes) | set(live_classes))
    ]


def _site_runs(row: NightRow) -> int:
    return row.runs - row.tester_faults


def _share(row: NightRow, error_class: str) -> float:
    return row.errors.get(error_class, 0) / _site_runs(row)


def _band(rows: list[NightRow], error_class: str) -> tuple[float, float, float]:
    """(median, MAD, top) of the class's share over `rows`; 0s when there are none."""
    shares = [_share(row, error_class) for row in rows]
    if not shares:
        return 0.0, 0.0, 0.0
    median = statistics.median(shares)
    mad = statistics.median(abs(s - median) for s in shares)
    return median, mad, median + BAND_K * MAD_TO_SIGMA * mad


def _bad(row: NightRow, error_class: str, top: float) -> bool:
    min_share = settings.FEDPROBE_WATCH_ERROR_MIN_SHARE_PCT / 100
    return (
        row.errors.get(error_class, 0) >= settings.FEDPROBE_WATCH_ERROR_MIN_RUNS
        and _share(row, error_class) > top + min_share
    )


def _finding(
    series: SeriesId,
    history: list[NightRow],
    error_class: str,
    live: Regression | None,
    subject: dict[str, object],
) -> Finding:
    key, metric = series.key(error_metric(error_class)), error_metric(error_class)
    measured = [row for row in history if _site_runs(row) > 0]
    tonight = measured[-1]
    band_rows = measured[:-2][-BAND_NIGHTS:]
    median, _mad, top = _band(band_rows, error_class)
    if live is not None and live.baseline is not None:
        top = live.baseline
    share = _share(tonight, error_class)
    if not _bad(tonight, error_class, top):
        return Finding(key, metric, None if live is None else False, current=share)
    before_bad = len(measured) > 1 and _bad(measured[-2], error_class, top)
    confirmed = live is not None or before_bad
    change_night = live.change_night if live is not None else None
    change_night = change_night or (measured[-2].night if before_bad else tonight.night)
    failed = tonight.errors.get(error_class, 0)
    return Finding(
        key,
        metric,
        True,
        confirmed=confirmed,
        tier=Regression.Tier.BREAKAGE,
        verdict=Regression.Verdict.REGRESSION if confirmed else Regression.Verdict.SUSPICIOUS,
        severity=Regression.Severity.WARNING,
        summary=(
            f"error class {error_class}: {failed} of {_site_runs(tonight)} runs ({share:.0%}) "
            f"on {tonight.night}, usually at most {top:.0%}"
        ),
        subject=subject,
        detector=_detector(band_rows, change_night, tonight.night),
        change_night=change_night,
        baseline=top,
        current=share,
        change_pct=(share - median) * 100,
    )


def _detector(band_rows: list[NightRow], change_night: date, night: date) -> dict[str, object]:
    return {
        "name": "error-share",
        "parameters": {
            "band_k": BAND_K,
            "band_nights": BAND_NIGHTS,
            "min_runs": settings.FEDPROBE_WATCH_ERROR_MIN_RUNS,
            "min_share_pct": settings.FEDPROBE_WATCH_ERROR_MIN_SHARE_PCT,
            "confirm_nights": 2,
        },
        "baseline_window": (
            [band_rows[0].night.isoformat(), band_rows[-1].night.isoformat()] if band_rows else None
        ),
        "target_window": [change_night.isoformat(), night.isoformat()],
    }
