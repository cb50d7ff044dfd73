"""webapp.watch.detect: the two tiers, the four verdicts, and what a verdict records."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from datetime import date, timedelta

import pytest

from webapp.watch import detect as detect_module
from webapp.watch.detect import DetectorConfig, NightPoint, detect
from webapp.watch.models import Regression

FIRST = date(2026, 9, 1)
CONFIG = DetectorConfig()
WEATHER_SEED = 8  # weather whose week of bad nights a lasting step of 30% outgrows


def nights(values: Sequence[float], *, first: date = FIRST) -> list[NightPoint]:
    return [NightPoint(first + timedelta(days=i), v, 0.0, 1) for i, v in enumerate(values)]


def noise(count: int, *, level: float = 100.0, seed: int = 1, sd: float = 0.04) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, sd)) for _ in range(count)]


def stepped(before: int, after: int, *, factor: float, seed: int = 1) -> list[float]:
    return noise(before, seed=seed) + noise(after, level=100.0 * factor, seed=seed + 1)


def test_verdict_names_are_the_regression_model_verdicts() -> None:
    names = {
        detect_module.REGRESSION,
        detect_module.SUSPICIOUS,
        detect_module.NO_CHANGE,
        detect_module.INSUFFICIENT_DATA,
    }
    assert names == set(Regression.Verdict.values)
    assert {detect_module.BREAKAGE, detect_module.SHIFT} == set(Regression.Tier.values)


def test_noise_alone_is_no_change_on_every_night() -> None:
    values = noise(90, seed=7)
    for end in range(CONFIG.needed_nights, len(values) + 1):
        result = detect(nights(values[:end]), higher_is_better=True)
        assert result.verdict == "no-change", end
        assert result.tier is None and not result.worse


def test_too_few_nights_is_insufficient_data_saying_how_many_are_needed() -> None:
    result = detect(nights(noise(CONFIG.needed_nights - 1)), higher_is_better=True)
    assert result.verdict == "insufficient-data"
    assert result.detector["nights"] == CONFIG.needed_nights - 1
    assert result.detector["nights_needed"] == CONFIG.needed_nights
    enough = detect(nights(noise(CONFIG.needed_nights)), higher_is_better=True)
    assert enough.verdict == "no-change"


def test_nights_without_runs_do_not_count_towards_enough() -> None:
    points = nights(noise(CONFIG.needed_nights))
    points[3] = points[3]._replace(n=0)
    assert detect(points, higher_is_better=True).verdict == "insufficient-data"


def test_a_30_percent_drop_is_suspicious_until_confirm_nights_then_a_regression() -> None:
    values = stepped(40, 6, factor=0.7)
    change_night = FIRST + timedelta(days=40)
    for after in range(1, CONFIG.confirm_nights):
        early = detect(nights(values[: 40 + after]), higher_is_better=True)
        assert early.verdict == "suspicious", after
        assert early.worse and not early.confirmed
    for after in range(CONFIG.confirm_nights, 7):
        result = detect(nights(values[: 40 + after]), higher_is_better=True)
        assert result.verdict == "regression", after
        assert result.tier == "shift" and result.confirmed and result.worse
        assert result.change_night == change_night
        assert result.change_pct is not None and -35 < result.change_pct < -25


def test_the_first_bad_night_of_a_drop_is_a_breakage() -> None:
    values = stepped(40, 1, factor=0.6)
    result = detect(nights(values), higher_is_better=True)
    assert (result.verdict, result.tier) == ("suspicious", "breakage")
    assert result.change_night == FIRST + timedelta(days=40)
    assert result.worse and not result.confirmed


def test_a_single_bad_night_is_a_breakage_and_never_a_confirmed_regression() -> None:
    values = [*noise(40), 45.0, *noise(10, seed=9)]
    tonight = detect(nights(values[:41]), higher_is_better=True)
    assert (tonight.verdict, tonight.tier, tonight.worse) == ("suspicious", "breakage", True)
    for end in range(42, len(values) + 1):
        later = detect(nights(values[:end]), higher_is_better=True)
        assert later.verdict != "regression", end


def test_bad_nights_then_a_good_one_are_not_confirmed() -> None:
    bad = [60.0, 58.0, 61.0, 59.0][: CONFIG.confirm_nights - 1]
    values = [*noise(40), *bad, *noise(1, seed=4)]
    result = detect(nights(values), higher_is_better=True)
    assert result.verdict != "regression" and not result.confirmed


def test_a_small_breakage_within_the_minimum_magnitude_is_no_change() -> None:
    values = [*noise(40, sd=0.005), 88.0]  # far in z, but only 12% off
    assert detect(nights(values), higher_is_better=True).verdict == "no-change"


def test_a_rise_of_a_higher_is_better_metric_is_found_but_not_worse() -> None:
    values = stepped(40, 5, factor=1.4)
    result = detect(nights(values), higher_is_better=True)
    assert result.verdict == "regression" and result.confirmed
    assert not result.worse
    assert result.change_pct is not None and result.change_pct > 30


def test_a_rise_of_a_lower_is_better_metric_is_worse() -> None:
    values = stepped(40, 5, factor=1.4)
    result = detect(nights(values), higher_is_better=False)
    assert result.verdict == "regression" and result.worse


def test_a_shift_below_the_minimum_magnitude_is_no_change() -> None:
    values = noise(40, sd=0.01) + noise(6, level=88.0, sd=0.01, seed=3)  # 12%: searched, too small
    assert detect(nights(values), higher_is_better=True).verdict == "no-change"


def test_the_detector_records_its_name_parameters_and_windows() -> None:
    values = stepped(40, 4, factor=0.7)
    result = detect(nights(values), higher_is_better=True)
    detector = result.detector
    assert detector["name"] == detect_module.DETECTOR_NAME
    assert str(detector["library"]).startswith("apache-otava ")
    assert detector["parameters"] == CONFIG.to_json()
    assert detector["parameters"]["confirm_nights"] == CONFIG.confirm_nights  # type: ignore[index]
    band_first = FIRST + timedelta(days=40 - CONFIG.band_max_nights)
    band_last = FIRST + timedelta(days=39)
    assert detector["baseline_window"] == [band_first.isoformat(), band_last.isoformat()]
    tonight = FIRST + timedelta(days=43)
    assert detector["target_window"] == [
        (FIRST + timedelta(days=40)).isoformat(),
        tonight.isoformat(),
    ]


def test_a_changed_parameter_changes_the_verdict_and_is_recorded() -> None:
    values = stepped(40, 3, factor=0.7)
    strict = DetectorConfig(confirm_nights=5)
    result = detect(nights(values), higher_is_better=True, config=strict)
    assert result.verdict == "suspicious"
    assert result.detector["parameters"] == strict.to_json()


def test_only_the_last_window_nights_are_looked_at() -> None:
    # An old drop, long before the window, is not tonight's finding.
    values = stepped(30, 100, factor=0.5)
    assert detect(nights(values), higher_is_better=True).verdict == "no-change"


@pytest.mark.parametrize("spread", [0.0, 40.0])
def test_a_night_whose_runs_spread_widely_is_not_a_breakage(spread: float) -> None:
    points = nights([*noise(40, sd=0.01), 70.0])
    points[-1] = points[-1]._replace(spread=spread, n=4)
    verdict = detect(points, higher_is_better=True).verdict
    assert verdict == ("suspicious" if spread == 0 else "no-change")


def weather(count: int, *, seed: int) -> list[float]:
    """Nights of weather as `history synthesize` draws it: an AR(1) process on the
    logarithm (lag-1 correlation 0.7, 6% a night), so bad nights come in runs."""
    rng = random.Random(seed)
    log_level, values = 0.0, []
    for _ in range(count):
        log_level = 0.7 * log_level + rng.gauss(0, 0.06)
        values.append(100.0 * math.exp(log_level))
    return values


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_nights_in_runs_weigh_as_fewer_than_the_same_nights_shuffled(seed: int) -> None:
    values = weather(40, seed=seed)
    values[28:] = [v * 0.85 for v in values[28:]]
    before, after = values[:28], values[28:]
    rng = random.Random(seed)
    rng.shuffle(before)
    rng.shuffle(after)
    in_runs = detect_module.level_z(values, at=28)
    assert in_runs < 0.8 * detect_module.level_z(before + after, at=28)


def test_a_week_of_bad_weather_is_no_regression_but_the_same_drop_in_steady_noise_is() -> None:
    stormy = weather(47, seed=WEATHER_SEED)
    stormy[40:] = [v * 0.78 for v in stormy[40:]]
    for end in range(41, 48):
        assert detect(nights(stormy[:end]), higher_is_better=True).verdict != "regression", end
    lenient = DetectorConfig(shift_z=2.0)
    assert detect(nights(stormy), higher_is_better=True, config=lenient).verdict == "regression"
    steady = stepped(40, 7, factor=0.78)
    assert detect(nights(steady), higher_is_better=True).verdict == "regression"


def test_a_lasting_step_in_bad_weather_is_a_regression_once_its_level_stands_out() -> None:
    values = weather(70, seed=WEATHER_SEED)
    values[40:] = [v * 0.7 for v in values[40:]]
    result = detect(nights(values), higher_is_better=True)
    assert result.verdict == "regression" and result.worse
    assert result.change_night == FIRST + timedelta(days=40)


def test_a_weekday_pattern_is_no_change_once_weeks_are_known() -> None:
    first = date(2026, 9, 7)  # a Monday
    usual = [100.0 if (first + timedelta(days=i)).weekday() >= 5 else 70.0 for i in range(48)]
    points = nights(usual, first=first)
    assert points[-1].night.weekday() == 5  # tonight is a Saturday
    assert detect(points, higher_is_better=True).verdict == "no-change"
    plain = DetectorConfig(weekly=False)
    assert detect(points, higher_is_better=True, config=plain).verdict == "suspicious"
