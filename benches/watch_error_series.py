"""What judging each error class as a series adds to a night's evaluation: `error_findings`
over 15,000 series of 60 nights, in Python (the pass reads those nights anyway).

    .venv/bin/python benches/watch_error_series.py [--series 15000 --nights 60 \\
        --failing-pct 10]

`--failing-pct` of the series failed with one or two classes tonight (and now and then
before); the others had no failure tonight, the common case. No database is read.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from datetime import date, timedelta

from django_bench import setup_django


def histories(series: int, nights: int, failing_pct: float) -> list[tuple[object, list[object]]]:
    from webapp.watch.series import NightRow, SeriesId

    rng = random.Random(16)
    last = date(2026, 11, 26)
    made = []
    for n in range(series):
        failing = rng.random() * 100 < failing_pct
        rows = []
        for back in range(nights - 1, -1, -1):
            errors: dict[str, int] = {}
            if rng.random() < 0.05:
                errors["server-error"] = 1
            if failing and back == 0:
                errors = {"server-error": 3, "short-read": rng.choice((0, 2))}
            failed = sum(errors.values())
            rows.append(
                NightRow(
                    last - timedelta(days=back), 10, 10 - failed, 0, failed, 0, errors, {}, [], []
                )
            )
        made.append((SeriesId(n, 1, "direct", "random", 65536, 0.1, 2), rows))
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=15000)
    parser.add_argument("--nights", type=int, default=60)
    parser.add_argument("--failing-pct", type=float, default=10.0)
    args = parser.parse_args()
    setup_django()
    from webapp.watch.episodes import Finding
    from webapp.watch.error_series import error_findings

    made = histories(args.series, args.nights, args.failing_pct)
    good = Finding("", "availability", False)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    findings = 0
    for series, rows in made:
        findings += len(
            error_findings(series, rows, availability=good, live={}, subject={})  # type: ignore[arg-type]
        )
    took = time.perf_counter() - start
    print(
        f"{args.series:,} series x {args.nights} nights, {args.failing_pct:g}% failing tonight: "
        f"{took * 1000:.0f} ms, {took / args.series * 1e6:.1f} us a series, {findings:,} "
        f"findings (load {load:.1f})"
    )


if __name__ == "__main__":
    main()
