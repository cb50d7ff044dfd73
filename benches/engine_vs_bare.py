"""Does the engine measure the endpoint and not itself? Engine vs a bare XrdCl loop.

Same file, same offsets, same process model (one client forked from a fork server), on
the lab's local site (no relay). Trials alternate engine and bare loop; medians reported.

    .venv/bin/python benches/engine_vs_bare.py [--lab-dir DIR] [--trials 7]

Without a running lab in --lab-dir it starts its own (profile test) and stops it after.
"""

from __future__ import annotations

import argparse
import queue
import time
from typing import Any

from common import in_client_process, median_ratio, running_lab

from workers.engine import Method, Pattern, RunParams, run_probe
from workers.engine.patterns import client_seed, plan_requests, vector_batches

MiB = 1024 * 1024
FILE = "/fedprobe/file-256M"
FILE_SIZE = 256 * MiB


def workloads() -> dict[str, dict[str, Any]]:
    """name -> RunParams fields; ~8k random 4 KiB reads, the whole file in 1 MiB reads."""
    small = 8000 * 4096 / FILE_SIZE
    return {
        "sync random 4 KiB": {"pattern": Pattern.RANDOM, "read_size": 4096, "fraction": small},
        "sequential 1 MiB": {"pattern": Pattern.SEQUENTIAL, "read_size": MiB, "fraction": 1.0},
        "vector 256 x 4 KiB": {
            "pattern": Pattern.VECTOR,
            "read_size": 4096,
            "fraction": 4 * small,
            "vector_size": 256,
        },
        "async depth 64, 4 KiB": {
            "pattern": Pattern.ASYNC,
            "read_size": 4096,
            "fraction": small,
            "depth": 64,
        },
    }


def bare_loop(url: str, fields: dict[str, Any]) -> float:
    """Seconds the bare XrdCl loop takes to issue the engine's plan (open not included)."""
    from XRootD import client
    from XRootD.client.flags import OpenFlags

    plan = plan_requests(
        fields["pattern"],
        file_size=FILE_SIZE,
        read_size=fields["read_size"],
        fraction=fields["fraction"],
        seed=client_seed(1, 0, 0),
    )
    f = client.File()
    status, _ = f.open(url.replace("root://", "root://bare@"), OpenFlags.READ)
    assert status.ok, status
    pattern = fields["pattern"]
    started = time.perf_counter()
    if pattern == Pattern.VECTOR:
        for batch in vector_batches(plan, fields["vector_size"], 1024, 2097136):
            f.vector_read(batch)
    elif pattern == Pattern.ASYNC:
        done: queue.SimpleQueue[int] = queue.SimpleQueue()
        requests = iter(plan)
        outstanding = 0
        for offset, size in requests:
            f.read(offset, size, callback=lambda s, r, h: done.put(1))
            outstanding += 1
            if outstanding == fields["depth"]:
                break
        while outstanding:
            done.get()
            outstanding -= 1
            for offset, size in requests:
                f.read(offset, size, callback=lambda s, r, h: done.put(1))
                outstanding += 1
                break
    else:
        for offset, size in plan:
            _status, _data = f.read(offset, size)  # a reader holds what it read
    elapsed = time.perf_counter() - started
    f.close()
    return elapsed


def engine_read_s(url: str, fields: dict[str, Any]) -> tuple[float, int, int]:
    run = run_probe(RunParams(urls=(url,), method=Method.DIRECT, **fields))
    (client,) = run.clients
    assert client.ok, client.error
    return client.read_s, client.ops, client.bytes_read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab-dir", default="/tmp/fedprobe-lab")
    parser.add_argument("--trials", type=int, default=7)
    args = parser.parse_args()
    with running_lab(args.lab_dir, "test") as lab:
        url = lab.endpoint("local-root").file_url(FILE)
        print("| workload | unit | engine | bare loop | engine / bare |")
        print("|---|---|---|---|---|")
        for name, fields in workloads().items():
            engine_rates, bare_rates = [], []
            for _ in range(args.trials):
                read_s, ops, n_bytes = engine_read_s(url, fields)
                bare_s = in_client_process(bare_loop, url, fields)
                if fields["pattern"] == Pattern.SEQUENTIAL:
                    unit = "MB/s"
                    engine_rates.append(n_bytes / read_s / 1e6)
                    bare_rates.append(n_bytes / bare_s / 1e6)
                elif fields["pattern"] == Pattern.VECTOR:
                    unit = "chunks/s"
                    chunks = n_bytes // fields["read_size"]
                    engine_rates.append(chunks / read_s)
                    bare_rates.append(chunks / bare_s)
                else:
                    unit = "ops/s"
                    engine_rates.append(ops / read_s)
                    bare_rates.append(ops / bare_s)
            e, b, ratio = median_ratio(engine_rates, bare_rates)
            print(f"| {name} | {unit} | {e:,.0f} | {b:,.0f} | {ratio:.1%} |", flush=True)


if __name__ == "__main__":
    main()
