"""How fast the archivers' pump pushes finished runs: to an HTTP receiver on loopback and to
the machine's RabbitMQ (publisher confirms), one archiver of each kind (docs/archivers.md).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fedprobe_bench \\
        .venv/bin/python benches/archivers_pump.py [--runs 2000]

Makes RUNS finished runs (one campaign, endpoint and vantage point; no client records, so
each message is the run JSON of a run without clients, ~1.5 kB), then for each kind alone
times the passes until every run is delivered, and one more pass with nothing to do. The
runs and archivers are removed after; RabbitMQ's queue too.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django_bench import setup_django

BROKER = "amqp://guest:guest@127.0.0.1:5672//"


@contextmanager
def http_receiver() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/runs"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def rabbit_queue() -> Iterator[str]:
    from kombu import Connection, Queue

    name = f"fedprobe-bench-{uuid.uuid4().hex[:8]}"
    with Connection(BROKER) as connection:
        queue = Queue(name, durable=False)(connection.default_channel)
        queue.declare()
        try:
            yield name
        finally:
            queue.delete()


def make_runs(count: int) -> list[int]:
    from django.utils import timezone

    from webapp.campaigns.models import Campaign, Run
    from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint

    site = Site.objects.create(name=f"bench-archive-{uuid.uuid4().hex[:6]}")
    endpoint = Endpoint.objects.create(
        site=site, name=site.name, protocol="root", base_url="root://127.0.0.1:1094/"
    )
    test_file = TestFile.objects.create(endpoint=endpoint, path="/f", size=1 << 24)
    campaign = Campaign.objects.create(name=site.name, methods=["direct"], patterns=["random"])
    vantage_point, _ = VantagePoint.objects.get_or_create(name="local")
    now = timezone.now()
    fields = {
        "campaign": campaign, "endpoint": endpoint, "test_file": test_file,
        "vantage_point": vantage_point, "method": "direct", "pattern": "random",
        "read_size": 65536, "fraction": 0.1, "clients": 4, "status": Run.Status.SUCCEEDED,
        "started_at": now, "finished_at": now, "wall_s": 3.2, "bytes_read": 1 << 22,
    }  # fmt: skip
    rows = [Run(**fields, throughput_mbps=512.0 + n % 7) for n in range(count)]
    return [run.pk for run in Run.objects.bulk_create(rows)]


def push_all(values: dict[str, Any], runs: int) -> tuple[float, int, float]:
    """Seconds until every run is delivered, passes it took, and the idle pass's seconds."""
    from django.utils import timezone

    from webapp.archivers.models import ArchiveDelivery, Archiver
    from webapp.archivers.outbox import archivers_pump
    from webapp.archivers.services import archiver_save

    Archiver.objects.filter(name=values["name"]).delete()  # an interrupted run's
    archiver = archiver_save(values=values, now=timezone.now() - timedelta(minutes=1))
    delivered = ArchiveDelivery.objects.filter(archiver=archiver, status="delivered")
    try:
        started, passes = time.perf_counter(), 0
        while delivered.count() < runs:
            outcome = archivers_pump(clock=timezone.now)
            passes += 1
            if outcome.retrying or outcome.failed:
                raise SystemExit(f"not delivered: {archiver.deliveries.exclude(last_error='')[0]}")
        took = time.perf_counter() - started
        idle_started = time.perf_counter()
        archivers_pump(clock=timezone.now)
        return took, passes, time.perf_counter() - idle_started
    finally:
        archiver.delete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    setup_django()
    from webapp.campaigns.models import Run

    run_ids = make_runs(args.runs)
    try:
        with http_receiver() as url:
            http = {"name": "bench-http", "kind": "http", "url": url}
            took, passes, idle = push_all(http, args.runs)
            print(f"http: {args.runs} runs in {took:.2f} s ({args.runs / took:.0f}/s, "
                  f"{passes} passes); idle pass {idle * 1000:.1f} ms")  # fmt: skip
        with rabbit_queue() as queue:
            amqp = {
                "name": "bench-amqp", "kind": "amqp", "url": "amqp://127.0.0.1:5672/",
                "routing_key": queue, "username": "guest", "password": "guest",
            }  # fmt: skip
            took, passes, idle = push_all(amqp, args.runs)
            print(f"amqp: {args.runs} runs in {took:.2f} s ({args.runs / took:.0f}/s, "
                  f"{passes} passes); idle pass {idle * 1000:.1f} ms")  # fmt: skip
    finally:
        Run.objects.filter(pk__in=run_ids).delete()


if __name__ == "__main__":
    main()
