"""The watch's pass at WLCG scale (target: one full pass under 2 minutes, then each night's
pass touching only that night's series).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fedprobe_scale \\
        .venv/bin/python benches/watch_pass.py [--endpoints 500 --parameter-sets 10 \\
        --nights 365 --vantage-points 3]

Fills the database once with `manage.py history synthesize` of that size (5,475,000 runs by
default; made again only when its size differs, which takes about half an hour), forgets
what the watch knew (rollups, regressions, passes), then times:
1. the first pass over everything (rolls up the lookback's nights, evaluates the last);
2. the passes after it that backfill the older nights, an hour apart, until none is left;
3. a pass with nothing new (the watermark finds no run: the hourly beat's usual case);
4. the next night's pass, after a copy of the last night's runs shifted by a day is
   inserted (rolls up and evaluates that night only).
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime, timedelta
from datetime import time as day_time
from typing import TYPE_CHECKING

from dashboards_data import ensure_history
from django_bench import setup_django

if TYPE_CHECKING:
    from webapp.watch.evaluate import PassOutcome


def forget_the_watch() -> None:
    from webapp.watch.models import Regression, SeriesNight, WatchPass

    WatchPass.objects.all().delete()
    Regression.objects.all().delete()
    SeriesNight.objects.all().delete()


def synthetic_last_night() -> datetime | None:
    """The last night the synthetic schedule launched (copies made here launch nothing)."""
    from django.db.models import Max

    from webapp.campaigns.models import ScheduledLaunch

    latest = ScheduledLaunch.objects.aggregate(latest=Max("slot"))["latest"]
    return None if latest is None else datetime.combine(latest.date(), day_time(), tzinfo=UTC)


def forget_copies(night: datetime | None) -> None:
    """Remove the runs an earlier run of this benchmark copied after the synthetic history."""
    from webapp.campaigns.models import Run

    if night is not None:
        Run.objects.filter(created_at__gte=night + timedelta(days=1)).delete()


def copy_night(night: datetime) -> int:
    """Insert the runs of `night` again, a day later (the next night's runs)."""
    from django.db import connection

    from webapp.campaigns.models import Run

    shifted = {"created_at", "started_at", "finished_at"}
    columns = [f.column for f in Run._meta.concrete_fields if f.column != "id"]
    select = ", ".join(f"{c} + interval '1 day'" if c in shifted else c for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO campaigns_run ({', '.join(columns)}) SELECT {select} "
            "FROM campaigns_run WHERE created_at >= %s AND created_at < %s",
            [night, night + timedelta(days=1)],
        )
        return int(cursor.rowcount)


def timed_pass(label: str, now: datetime) -> PassOutcome:
    from webapp.watch import evaluate
    from webapp.watch.models import SeriesNight

    load = os.getloadavg()[0]
    start = time.perf_counter()
    outcome = evaluate.watch_evaluate(now=now)
    took = time.perf_counter() - start
    phases = ", ".join(f"{name} {s:.1f} s" for name, s in outcome.phases.items())
    print(
        f"{label}: {took:.1f} s ({phases}; "
        f"load {load:.1f} before, {os.getloadavg()[0]:.1f} after); "
        f"rolled up {len(outcome.nights)} nights, evaluated {outcome.series:,} series on "
        f"{', '.join(n.isoformat() for n in outcome.evaluated) or 'none'}, "
        f"{len(outcome.changes):,} state changes; {SeriesNight.objects.count():,} rollup rows"
        + (f"; backfilled {len(outcome.backfilled)} older nights" if outcome.backfilled else "")
        + (
            f", still to roll up before {outcome.backfill_before}"
            if outcome.backfill_before
            else ""
        ),
        flush=True,
    )
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=500)
    parser.add_argument("--parameter-sets", type=int, default=10)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--vantage-points", type=int, default=3)
    parser.add_argument(
        "--first-only", action="store_true", help="time the first pass only (no backfill)"
    )
    args = parser.parse_args()
    setup_django()
    forget_copies(synthetic_last_night())
    ensure_history(
        endpoints=args.endpoints,
        parameter_sets=args.parameter_sets,
        nights=args.nights,
        vantage_points=args.vantage_points,
    )
    night = synthetic_last_night()
    assert night is not None
    forget_the_watch()
    after = night + timedelta(days=1, hours=1)
    outcome = timed_pass("first pass over everything", after)
    if args.first_only:
        return
    hours = 1
    while outcome.backfill_before is not None:
        outcome = timed_pass(f"backfill pass {hours}", after + timedelta(hours=hours))
        hours += 1
    timed_pass("a pass with nothing new", after + timedelta(hours=hours))
    copied = copy_night(night)
    print(f"next night: {copied:,} runs")
    timed_pass("the next night's pass", after + timedelta(days=1))


if __name__ == "__main__":
    main()
