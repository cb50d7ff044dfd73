"""How long storing a 256-client run's results takes (target: under 0.5 s).

    .venv/bin/python benches/ingest_256.py --trials 20

The run JSON comes from a real 256-client run of the engine (file:// on a scratch file,
random 4 KiB reads), so each client record has its real phases, histograms and sizes.
Each trial claims a fresh run the way a worker does (run row + 256 attempt rows), then
times `run_ingest` alone: one transaction that stores the 256 client records and the
run's aggregates. PostgreSQL: see benches/django_bench.py.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from django_bench import percentiles_ms, setup_django


def real_run_json(clients: int) -> dict[str, object]:
    from workers.engine import Method, Pattern, RunParams, run_probe

    scratch = Path(tempfile.mkdtemp(prefix="fedprobe-bench-ingest-"))
    data = scratch / "file-16M"
    data.write_bytes(os.urandom(16 * 1024 * 1024))
    params = RunParams(
        urls=(data.as_uri(),),
        method=Method.DIRECT,
        pattern=Pattern.RANDOM,
        read_size=4096,
        fraction=0.01,
        clients=clients,
        file_roots=(str(scratch),),
    )
    try:
        result = run_probe(params).to_json()
    finally:
        data.unlink()
        scratch.rmdir()
    assert result["status"] == "succeeded", result["errors"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--clients", type=int, default=256)
    args = parser.parse_args()
    setup_django()

    from webapp.campaigns.models import Campaign, Run
    from webapp.campaigns.services import run_claim, run_ingest
    from webapp.sites.models import Endpoint, Site, TestFile
    from webapp.sites.services import vantage_point_local

    print(f"measuring a real {args.clients}-client run ...")
    run_json = real_run_json(args.clients)
    size = len(json.dumps(run_json))
    print(f"run JSON: {size / 1e6:.2f} MB, {len(run_json['clients'])} client records")

    site, _ = Site.objects.get_or_create(name="bench-ingest")
    endpoint, _ = Endpoint.objects.get_or_create(
        name="bench-ingest-file", defaults={"site": site, "protocol": "file", "base_url": "file://"}
    )
    test_file, _ = TestFile.objects.get_or_create(
        endpoint=endpoint, path="/tmp/file-16M", defaults={"size": 16 * 1024 * 1024}
    )
    campaign = Campaign.objects.create(name="bench-ingest")
    vantage_point = vantage_point_local()

    samples = []
    for _ in range(args.trials):
        run = Run.objects.create(
            campaign=campaign,
            endpoint=endpoint,
            test_file=test_file,
            vantage_point=vantage_point,
            method="direct",
            pattern="random",
            read_size=4096,
            fraction=0.01,
            clients=args.clients,
        )
        run_claim(run_id=run.pk, worker="bench")
        start = time.perf_counter()
        stored = run_ingest(run_id=run.pk, run_json=run_json)
        samples.append(time.perf_counter() - start)
        assert stored and run.attempts.filter(status="ok").count() == args.clients
    campaign.delete()
    figures = percentiles_ms(samples)
    print(
        f"run_ingest of {args.clients} clients over {args.trials} trials: "
        f"p50 {figures['p50']:.1f} ms, p95 {figures['p95']:.1f} ms, max {figures['max']:.1f} ms"
    )


if __name__ == "__main__":
    main()
