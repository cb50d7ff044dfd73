"""From a campaign's launch to its first read on the endpoint, with Redis (target: under 2 s).

    .venv/bin/python benches/launch_to_first_read.py --trials 20

A real Celery worker (`-Q vantage.local`, prefork, concurrency 1) consumes a Redis broker
(DB 9 of the local Redis, flushed first); the lab's local root:// endpoint is registered in
the benchmark database (benches/django_bench.py). Each trial launches a one-run campaign
(1 client, random 4 KiB reads) and waits for the run to end. The first read is the
engine's release time (`released_at` in the run JSON) plus the earliest start of a client's
read phase; the time is split into: launch -> claimed by the worker (`started_at`),
claimed -> clients released (preflight and client start), released -> first read (open).
The first trial is reported apart: it pays for the worker's fork server and imports.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django_bench import ROOT, percentiles_ms, setup_django

BROKER = "redis://127.0.0.1:6379/9"


def first_read(run: Any) -> datetime:
    released = datetime.fromisoformat(run.result["released_at"])
    start_s = min(
        phase["start_s"]
        for attempt in run.attempts.all()
        for phase in attempt.record["phases"]
        if phase["phase"] == "read"
    )
    return released + timedelta(seconds=start_s)


def one_trial(endpoint: Any, vantage_point: Any = None) -> dict[str, float]:
    """One one-run campaign on `endpoint` from `vantage_point` (default: the local one)."""
    from django.db import transaction

    from webapp.campaigns.models import Campaign, Run
    from webapp.campaigns.services import campaign_launch
    from webapp.sites.services import vantage_point_local

    vantage_point = vantage_point or vantage_point_local()
    campaign = Campaign.objects.create(
        name=f"bench-launch-{vantage_point.name}",
        methods=["direct"],
        patterns=["random"],
        read_sizes=[4096],
        fractions=[0.01],
        clients=[1],
    )
    campaign.endpoints.set([endpoint])
    campaign.vantage_points.set([vantage_point])
    launched = datetime.now(UTC)
    with transaction.atomic():
        (run,) = campaign_launch(campaign=campaign, trigger="api")
    deadline = time.monotonic() + 60
    while not Run.objects.get(pk=run.pk).is_final:
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run.pk} did not end within 60 s: is the worker up?")
        time.sleep(0.05)
    run = Run.objects.get(pk=run.pk)
    assert run.status == "succeeded", run.errors
    released = datetime.fromisoformat(run.result["released_at"])
    read = first_read(run)
    campaign.delete()
    return {
        "total": (read - launched).total_seconds(),
        "claim": (run.started_at - launched).total_seconds(),
        "start": (released - run.started_at).total_seconds(),
        "open": (read - released).total_seconds(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--lab-dir", help="a running lab to measure (default: start one)")
    args = parser.parse_args()
    setup_django(broker_url=BROKER)

    import os

    import redis

    sys.path.insert(0, str(ROOT))
    from benches.common import running_lab
    from tests.celery_worker import WorkerProcess
    from webapp.demo.services import lab_register
    from webapp.sites.models import Endpoint

    redis.Redis.from_url(BROKER).flushdb()
    with running_lab(args.lab_dir, "test", [1 << 20], base_port=27000) as lab:
        lab_register(lab=lab)
        endpoint = Endpoint.objects.get(name="local-root")
        log = Path(tempfile.mkdtemp(prefix="fedprobe-bench-worker-")) / "worker.log"
        env = {**os.environ, "FEDPROBE_BROKER_URL": BROKER}
        worker = WorkerProcess("bench", ["vantage.local"], env, log).start()
        try:
            worker.wait_ready()
            trials = [one_trial(endpoint) for _ in range(args.trials + 1)]
        finally:
            worker.stop()
    report("first (cold worker)", trials)


def report(title: str, trials: list[dict[str, float]]) -> None:
    """The first trial's total (a cold worker) apart, then each part's percentiles."""
    cold, warm = trials[0], trials[1:]
    print(f"{title}: {cold['total'] * 1e3:.0f} ms")
    print("| part | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    for part in ("claim", "start", "open", "total"):
        ms = percentiles_ms([t[part] for t in warm])
        print(f"| {part} | {ms['p50']:.0f} | {ms['p95']:.0f} | {ms['max']:.0f} |")


if __name__ == "__main__":
    main()
