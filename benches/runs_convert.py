"""Converting an ordinary runs table into one partitioned by month, in place: the history
becomes one partition, adopted without copying, scanning or rebuilding (docs/deployment.md,
"Hourly probes: the runs table by month", "What converting takes").

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fedprobe_partition_convert \\
        .venv/bin/python benches/runs_convert.py [--nights 30]

In its own database (a synthetic history of --nights nights, 15,000 runs each), times:
1. online, before the switch (runs are read and written meanwhile): the unique index
   (id, created_at) built CONCURRENTLY, a CHECK (created_at < the first of next month)
   added NOT VALID, then validated;
2. the switch, in one transaction: the attempts' foreign key to runs dropped (it comes
   back as (run_id, run_created_at) with attempts' own conversion), the table and its
   indexes renamed to *_legacy, the id's identity replaced by a sequence, the partitioned
   parent created from the Run model's DDL, the legacy table attached FROM (MINVALUE) TO
   (the first of next month) (its indexes, key and foreign keys adopted, its rows not
   scanned), the next months created (`runs_partitions_create`);
3. after it, with the application's code: a run by id, a night's rollup, a run inserted in
   next month's partition with the next id.
The database is left converted; drop it when done.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from dashboards_data import ensure_history
from django_bench import setup_django
from partitioned_month import execute, fetch, log, partitioned_ddl

TABLE = "campaigns_run"
LEGACY = "campaigns_run_legacy"


@contextmanager
def timed(label: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    log(f"{label}: {time.perf_counter() - start:.2f} s")


def first_of_next_month(now: datetime) -> datetime:
    from webapp.campaigns.partitions import month_of, months_after

    month = months_after(month_of(now), 1)
    return datetime(month.year, month.month, 1, tzinfo=UTC)


def prepare_online(bound: datetime) -> None:
    with timed("CREATE UNIQUE INDEX CONCURRENTLY (id, created_at)"):
        execute(f"CREATE UNIQUE INDEX CONCURRENTLY run_id_created_idx ON {TABLE} (id, created_at)")
    with timed("ADD CONSTRAINT CHECK (created_at < bound) NOT VALID"):
        execute(
            f"ALTER TABLE {TABLE} ADD CONSTRAINT run_legacy_bound "
            f"CHECK (created_at < '{bound.isoformat()}') NOT VALID"
        )
    with timed("VALIDATE CONSTRAINT (a scan; reads and writes pass)"):
        execute(f"ALTER TABLE {TABLE} VALIDATE CONSTRAINT run_legacy_bound")


def switch(bound: datetime) -> None:
    from django.db import transaction

    from webapp.campaigns.partitions import runs_partitions_create

    attempts_fk = fetch(
        "SELECT conname FROM pg_constraint WHERE contype = 'f' "
        "AND conrelid = 'campaigns_clientattempt'::regclass AND confrelid = %s::regclass",
        [TABLE],
    )
    indexes = fetch("SELECT indexname FROM pg_indexes WHERE tablename = %s", [TABLE])
    with transaction.atomic():
        for (name,) in attempts_fk:
            execute(f'ALTER TABLE campaigns_clientattempt DROP CONSTRAINT "{name}"')
        execute(f"ALTER TABLE {TABLE} RENAME TO {LEGACY}")
        for (name,) in indexes:
            execute(f'ALTER INDEX "{name}" RENAME TO "{name[:50]}_legacy"')
        execute(f"ALTER TABLE {LEGACY} ALTER COLUMN id DROP IDENTITY")
        # The parent's key (id, created_at) is the partitions' key: (id) alone goes, and the
        # unique index on (id, created_at) becomes the key (attaching adopts an index for the
        # parent's key only if it backs a constraint).
        (key,) = fetch(
            "SELECT conname FROM pg_constraint WHERE contype = 'p' AND conrelid = %s::regclass",
            [LEGACY],
        )[0]
        execute(f'ALTER TABLE {LEGACY} DROP CONSTRAINT "{key}"')
        execute(
            f"ALTER TABLE {LEGACY} ADD CONSTRAINT {LEGACY}_pkey "
            "PRIMARY KEY USING INDEX run_id_created_idx_legacy"
        )
        for statement in partitioned_ddl():
            execute(statement)
        # Attaching matches CHECK constraints by name; the parent's column checks were named
        # `..._check1` since the legacy table's names were taken: give them those names.
        for (name,) in fetch(
            "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass "
            "AND contype = 'c' AND conname LIKE '%%\\_check1'",
            [TABLE],
        ):
            execute(f'ALTER TABLE {TABLE} RENAME CONSTRAINT "{name}" TO "{name[:-1]}"')
        execute(
            "SELECT setval('campaigns_run_part_id_seq', "
            f"(SELECT COALESCE(max(id), 0) + 1 FROM {LEGACY}), false)"
        )
        execute(
            f"ALTER TABLE {LEGACY} ALTER COLUMN id SET DEFAULT nextval('campaigns_run_part_id_seq')"
        )
        execute(
            f"ALTER TABLE {TABLE} ATTACH PARTITION {LEGACY} FOR VALUES FROM (MINVALUE) TO (%s)",
            [bound],
        )
        created = runs_partitions_create(now=bound)
    log(f"  created {[p.name for p in created]}")


def adopted() -> None:
    """What the legacy partition kept: its indexes attached to the parent's, none new."""
    rows = fetch(
        "SELECT i.relname, p.relname IS NOT NULL FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid "
        "LEFT JOIN pg_inherits h ON h.inhrelid = i.oid LEFT JOIN pg_class p ON p.oid = h.inhparent "
        "WHERE x.indrelid = %s::regclass ORDER BY 1",
        [LEGACY],
    )
    attached = [name for name, has_parent in rows if has_parent]
    log(f"  {LEGACY}: {len(rows)} indexes, {len(attached)} attached to the parent's")
    for name, has_parent in rows:
        if not has_parent:
            log(f"    not attached (left over, may be dropped): {name}")


def after(bound: datetime) -> None:
    from django.db.models import Max

    from webapp.campaigns.models import Run
    from webapp.watch.rollups import series_nights_roll_up

    latest = Run.objects.aggregate(latest=Max("created_at"))["latest"]
    run = Run.objects.filter(created_at=latest).first()
    assert run is not None
    with timed("a run by id after the switch"):
        Run.objects.get(pk=run.pk)
    night = latest.date()
    with timed(f"series_nights_roll_up of {night} after the switch"):
        series_nights_roll_up(night=night)
    run.pk = None
    run.created_at = bound + timedelta(hours=1)
    run.save(force_insert=True)  # auto_now_add: created_at is now again
    Run.objects.filter(pk=run.pk).update(created_at=bound + timedelta(hours=1))
    where = fetch("SELECT tableoid::regclass::text FROM campaigns_run WHERE id = %s", [run.pk])
    log(f"  a new run: id {run.pk}, now in {where[0][0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=30)
    args = parser.parse_args()
    setup_django()
    from webapp.campaigns.partitions import is_partitioned

    if is_partitioned():
        raise SystemExit("already converted: drop the database and run again")
    ensure_history(endpoints=500, parameter_sets=10, nights=args.nights, vantage_points=3)
    runs = fetch("SELECT count(*), max(created_at) FROM campaigns_run")[0]
    log(f"{runs[0]:,} runs, the latest created {runs[1]}")
    bound = first_of_next_month(max(runs[1], datetime.now(UTC)))
    prepare_online(bound)
    with timed("the switch (one transaction)"):
        switch(bound)
    adopted()
    after(bound)


if __name__ == "__main__":
    main()
