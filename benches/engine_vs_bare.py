"""Does the engine measure the endpoint and not itself? Engine vs a bare XrdCl loop.

Same file, same offsets, same process model (one client forked from a fork server; open,
read, close per file), on the lab's local site (no relay). Only the read loops are timed
(the engine's read phase). Trials alternate which goes first; the ratio is the median of
the per-trial ratios, with its interquartile range.

    .venv/bin/python benches/engine_vs_bare.py [--lab-dir DIR] [--trials 15] [--pin]

Without a running lab in --lab-dir it starts its own (profile test) and stops it after.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import time
from typing import Any

from common import in_client_process, running_lab

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
        # The whole file four times (files=4 of the same URL): long enough to time steadily.
        "sequential 1 MiB": {
            "pattern": Pattern.SEQUENTIAL,
            "read_size": MiB,
            "fraction": 1.0,
            "files": 4,
        },
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


def bare_loop(url: str, fields: dict[str, Any]) -> tuple[float, float]:
    """(seconds, client CPU seconds) of the bare XrdCl loop over the engine's plan."""
    from XRootD import client
    from XRootD.client.flags import OpenFlags

    plan = plan_requests(
        fields["pattern"],
        file_size=FILE_SIZE,
        read_size=fields["read_size"],
        fraction=fields["fraction"],
        seed=client_seed(1, 0, 0),
    )
    user_url = url.replace("root://", "root://bare@")
    pattern = fields["pattern"]
    elapsed = cpu = 0.0
    for _ in range(fields.get("files", 1)):  # like the engine: open, read, close per file
        f = client.File()
        status, _ = f.open(user_url, OpenFlags.READ)
        assert status.ok, status
        started, cpu_started = time.perf_counter(), time.process_time()
        if pattern == Pattern.VECTOR:
            for batch in vector_batches(plan, fields["vector_size"], 1024, 2097136):
                f.vector_read(batch)
        elif pattern == Pattern.ASYNC:
            bare_async(f, plan, fields["depth"])
        else:
            for offset, size in plan:
                _status, _data = f.read(offset, size)  # a reader holds what it read
        elapsed += time.perf_counter() - started
        cpu += time.process_time() - cpu_started
        f.close()
    return elapsed, cpu


def bare_async(f: Any, plan: list[tuple[int, int]], depth: int) -> None:
    done: queue.SimpleQueue[int] = queue.SimpleQueue()
    requests = iter(plan)
    outstanding = 0
    for offset, size in requests:
        f.read(offset, size, callback=lambda s, r, h: done.put(1))
        outstanding += 1
        if outstanding == depth:
            break
    while outstanding:
        done.get()
        outstanding -= 1
        for offset, size in requests:
            f.read(offset, size, callback=lambda s, r, h: done.put(1))
            outstanding += 1
            break


def engine_read_s(url: str, fields: dict[str, Any]) -> tuple[float, int, int, float]:
    run = run_probe(RunParams(urls=(url,), method=Method.DIRECT, **fields))
    (client,) = run.clients
    assert client.ok, client.error
    return client.read_s, client.ops, client.bytes_read, client.cpu_user_s + client.cpu_sys_s


def pin_apart(server_pid: int) -> None:
    """Server and client on different cores: less scheduling noise on a 2-core machine."""
    for task in os.listdir(f"/proc/{server_pid}/task"):
        os.sched_setaffinity(int(task), {0})
    os.sched_setaffinity(0, {1})


def rate(fields: dict[str, Any], seconds: float, ops: int, n_bytes: int) -> tuple[str, float]:
    if fields["pattern"] == Pattern.SEQUENTIAL:
        return "MB/s", n_bytes / seconds / 1e6
    if fields["pattern"] == Pattern.VECTOR:
        return "chunks/s", n_bytes // fields["read_size"] / seconds
    return "ops/s", ops / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab-dir", default="/tmp/fedprobe-lab")
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument(
        "--pin",
        action="store_true",
        help="local xrootd on CPU 0, this benchmark and its clients on CPU 1",
    )
    args = parser.parse_args()
    with running_lab(args.lab_dir, "test") as lab:
        url = lab.endpoint("local-root").file_url(FILE)
        if args.pin:
            pin_apart(lab.running_processes()["xrootd-local"])
        print(
            "| workload | unit | engine | bare loop | engine / bare (median of pairs) | IQR "
            "| client CPU per op, engine / bare |"
        )
        print("|---|---|---|---|---|---|---|")
        for name, fields in workloads().items():
            engine_rates, bare_rates, ratios, engine_cpu, bare_cpu = [], [], [], [], []
            for trial in range(args.trials):
                # Alternate who goes first: the server's page cache and CPU drift evenly.
                if trial % 2:
                    bare_s, bare_cpu_s = in_client_process(bare_loop, url, fields)
                    read_s, ops, n_bytes, cpu_s = engine_read_s(url, fields)
                else:
                    read_s, ops, n_bytes, cpu_s = engine_read_s(url, fields)
                    bare_s, bare_cpu_s = in_client_process(bare_loop, url, fields)
                engine_cpu.append(cpu_s / ops * 1e6)
                bare_cpu.append(bare_cpu_s / ops * 1e6)
                unit, engine_rate = rate(fields, read_s, ops, n_bytes)
                _, bare_rate = rate(fields, bare_s, ops, n_bytes)
                engine_rates.append(engine_rate)
                bare_rates.append(bare_rate)
                ratios.append(engine_rate / bare_rate)
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            print(
                f"| {name} | {unit} | {statistics.median(engine_rates):,.0f} "
                f"| {statistics.median(bare_rates):,.0f} | {statistics.median(ratios):.1%} "
                f"| {q1:.0%}-{q3:.0%} | {statistics.median(engine_cpu):.1f} / "
                f"{statistics.median(bare_cpu):.1f} us |",
                flush=True,
            )


if __name__ == "__main__":
    main()
