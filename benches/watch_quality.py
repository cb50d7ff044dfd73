"""The watch's detection quality on a synthetic history with planted changes, and its speed.

    .venv/bin/python benches/watch_quality.py [--seed 2] [--endpoints 100] [--nights 365]
        [--vantage-points 1] [--reuse TRUTH.json] [--config NAME=VALUE ...] [--all-series]
        [--night-stride N] [--endpoint-stride N]

Synthesizes the history (`history synthesize --truth`, into the benchmark database of
benches/django_bench.py; `--reuse` reads one made before with its truth file), builds each
series' nights (throughput_mbps, the median of the night's runs), and runs
`webapp.watch.detect.detect` night by night as the nightly watch would: on each night only
the nights up to it. Then it scores the alarms against the ground truth:

- an alarm is a confirmed regression in the worse direction (a new one when no alarm of the
  series was within 3 nights of its change night); a "suspicion" is a suspicious verdict;
- a planted worse change (step, drift, recovery's drop, version change) is found when an
  alarm's change night lies within [start - 3, start + 5] (a drift: its ramp + 5);
- recall per kind; precision = alarms matching a planted change / alarms; false alarms per
  1,000 series-nights; single bad nights must give no alarm.

Scored series are the bandwidth-bound ones (copy and stage: the whole file in one stream
per client), where a planted change of the stream rate moves throughput by its size (direct
reads pay a round trip per request, which hides part of it); false alarms are also counted
over the series of endpoints with nothing planted (`--all-series`: every parameter set's).
On a loaded machine, `--night-stride N` evaluates every Nth night only (each standing for N)
and `--endpoint-stride N` the endpoints whose id is a multiple of N only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from django_bench import setup_django

MATCH_BEFORE, MATCH_AFTER = 3, 5
SAME_ALARM_NIGHTS = 3
WARMUP_NIGHTS = 30

SeriesKey = tuple[int, int, str, str, int, float, int]  # endpoint, vantage point, parameters


@dataclass
class Series:
    """One series' nights and what the watch said of them."""

    key: SeriesKey
    endpoint: str
    points: list[Any] = field(default_factory=list)  # NightPoint
    alarms: list[date] = field(default_factory=list)  # change nights of worse regressions
    better: list[date] = field(default_factory=list)  # change nights of confirmed rises
    suspicions: int = 0
    nights: int = 0


def main() -> None:
    args = parse_args()
    setup_django()
    from webapp.watch.detect import DetectorConfig

    truth = json.loads(_history(args).read_text())
    config = DetectorConfig(**_overrides(args.config))
    series = load_series()
    series = {key: one for key, one in series.items() if key[0] % args.endpoint_stride == 0}
    if not args.all_series:
        series = {key: one for key, one in series.items() if bandwidth_bound(key)}
    started = time.process_time()  # CPU: the machine may be shared
    calls = evaluate(series, config, stride=args.night_stride)
    took = time.process_time() - started
    report(series, truth, config, calls=calls, took=took)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--endpoints", type=int, default=100)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--vantage-points", type=int, default=1)
    parser.add_argument("--reuse", type=Path, help="the truth file of a history made before")
    parser.add_argument("--config", action="append", default=[], help="DetectorConfig NAME=VALUE")
    parser.add_argument(
        "--all-series",
        action="store_true",
        help="evaluate every series (for false alarms), not only the scored ones",
    )
    parser.add_argument("--night-stride", type=int, default=1)
    parser.add_argument("--endpoint-stride", type=int, default=1)
    return parser.parse_args()


def _overrides(pairs: Iterable[str]) -> dict[str, Any]:
    from webapp.watch.detect import DetectorConfig

    types = {f.name: f.type for f in fields(DetectorConfig)}
    values: dict[str, Any] = {}
    for pair in pairs:
        name, value = pair.split("=", 1)
        kind = str(types[name])
        if kind == "bool":
            values[name] = value.lower() in ("1", "true", "yes")
        else:
            values[name] = int(value) if kind == "int" else float(value)
    return values


def _history(args: argparse.Namespace) -> Path:
    from django.core.management import call_command

    if args.reuse:
        return Path(args.reuse)
    path = Path(tempfile.mkdtemp(prefix="fedprobe-watch-quality-")) / "truth.json"
    print(f"synthesizing (seed {args.seed}), truth in {path} ...")
    call_command(
        "history",
        "synthesize",
        f"--endpoints={args.endpoints}",
        "--parameter-sets=10",
        f"--nights={args.nights}",
        f"--vantage-points={args.vantage_points}",
        f"--seed={args.seed}",
        f"--truth={path}",
        "--clear",
    )
    return path


def load_series() -> dict[SeriesKey, Series]:
    """Every series' nights: the median throughput of the night's measured runs."""
    from webapp.campaigns.models import Run
    from webapp.demo.synthetic import SYNTHETIC_PREFIX
    from webapp.watch.detect import NightPoint

    runs = (
        Run.objects.filter(
            campaign__name__startswith=SYNTHETIC_PREFIX, throughput_mbps__isnull=False
        )
        .order_by()
        .values_list(
            "endpoint_id",
            "vantage_point_id",
            "method",
            "pattern",
            "read_size",
            "fraction",
            "clients",
            "endpoint__name",
            "created_at",
            "throughput_mbps",
        )
    )
    nights: dict[SeriesKey, dict[date, list[float]]] = defaultdict(lambda: defaultdict(list))
    names: dict[SeriesKey, str] = {}
    for *key_values, name, created_at, throughput in runs.iterator(chunk_size=20000):
        key: SeriesKey = tuple(key_values)  # type: ignore[assignment]
        nights[key][created_at.date()].append(throughput)
        names[key] = name
    series = {}
    for key, by_night in nights.items():
        points = [
            NightPoint(night, statistics.median(v), _mad(v), len(v))
            for night, v in sorted(by_night.items())
        ]
        series[key] = Series(key, names[key], points)
    return series


def _mad(values: list[float]) -> float:
    median = statistics.median(values)
    return statistics.median(abs(v - median) for v in values)


def evaluate(series: dict[SeriesKey, Series], config: Any, *, stride: int = 1) -> int:
    """The watch, night by night (every `stride`th): each night's detect() sees only the
    nights up to it."""
    from webapp.watch.detect import detect

    calls = 0
    for one in series.values():
        for end in range(WARMUP_NIGHTS, len(one.points) + 1, stride):
            window = one.points[max(0, end - config.window_nights) : end]
            result = detect(window, higher_is_better=True, config=config)
            calls += 1
            one.nights += stride
            if result.verdict == "suspicious" and result.worse:
                one.suspicions += stride
            if result.verdict == "regression" and result.change_night:
                found = one.alarms if result.worse else one.better
                if not any(abs((result.change_night - n).days) <= SAME_ALARM_NIGHTS for n in found):
                    found.append(result.change_night)
    return calls


def bandwidth_bound(key: SeriesKey) -> bool:
    return key[2] in ("copy", "stage")


def kind_of(change: dict[str, Any]) -> str:
    kind, factor = change["kind"], change["rate_factor"]
    if kind in ("step", "version-change", "recovery", "random-regression"):
        size = abs(factor - 1) * 100
        bucket = "10%" if size < 15 else ("20-35%" if size < 35 else "35%+")
        direction = "worse" if factor < 1 else "better"
        return f"{kind} {direction} {bucket}" if kind == "step" else f"{kind} {bucket}"
    return str(kind)


def report(
    series: dict[SeriesKey, Series],
    truth: dict[str, Any],
    config: Any,
    *,
    calls: int,
    took: float,
) -> None:
    changes = defaultdict(list)
    for change in truth["changes"]:
        if change["endpoint"] and change["error_class"] is None:
            changes[change["endpoint"]].append(change)
    found: dict[str, list[bool]] = defaultdict(list)
    matched = alarms = scored_nights = 0
    quiet_alarms = quiet_nights = quiet_suspicions = 0
    for one in series.values():
        planted = changes.get(one.endpoint, [])
        if not planted:
            quiet_alarms += len(one.alarms)
            quiet_nights += one.nights
            quiet_suspicions += one.suspicions
        if not bandwidth_bound(one.key):
            continue
        scored_nights += one.nights
        alarms += len(one.alarms)
        matched += sum(any(_matches(n, c) for c in planted) for n in one.alarms)
        for change in planted:
            found[kind_of(change)].append(_found(one, change))
    print(f"\nDetectorConfig: {config.to_json()}")
    print(f"scored series-nights {scored_nights:,}; alarms {alarms}, matched {matched}")
    precision = matched / alarms if alarms else 1.0
    print(f"precision {precision:.3f}")
    false_rate = (alarms - matched) / max(1, scored_nights) * 1e3
    print(f"false alarms per 1,000 series-nights (scored) {false_rate:.3f}")
    print(
        f"endpoints with nothing planted, every series: {quiet_alarms} alarms in "
        f"{quiet_nights:,} series-nights = {quiet_alarms / max(1, quiet_nights) * 1e3:.3f} "
        f"per 1,000; suspicions {quiet_suspicions / max(1, quiet_nights) * 1e3:.2f} per 1,000"
    )
    print(f"{'kind':<28} {'series':>7} {'recall':>7}")
    for kind in sorted(found):
        hits = found[kind]
        print(f"{kind:<28} {len(hits):>7} {sum(hits) / len(hits):>7.3f}")
    print(
        f"detect(): {calls:,} calls in {took:.1f} s of CPU = {took / calls * 1e3:.3f} ms per "
        f"series-night; 120,000 series on one core: {took / calls * 120_000:.0f} s"
    )


def _window(change: dict[str, Any]) -> tuple[date, date]:
    start = date.fromisoformat(change["start"])
    ramp = change.get("ramp_nights") or 0
    return start - timedelta(days=MATCH_BEFORE), start + timedelta(days=ramp + MATCH_AFTER)


def _matches(night: date, change: dict[str, Any]) -> bool:
    """Whether an alarm's change night belongs to a planted worse change (or its recovery)."""
    if change["rate_factor"] >= 1 or change["kind"] == "bad-night":
        return False
    low, high = _window(change)
    return low <= night <= high


def _found(one: Series, change: dict[str, Any]) -> bool:
    """A worse change: an alarm near it. A rise: a confirmed rise near it and no alarm. A
    single bad night: no alarm near it (finding it is a false alarm)."""
    low, high = _window(change)
    near = [n for n in one.alarms if low <= n <= high]
    if change["kind"] == "bad-night":
        return not near
    if change["rate_factor"] > 1:
        return not near and any(low <= n <= high for n in one.better)
    return bool(near)


if __name__ == "__main__":
    main()
