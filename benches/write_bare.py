"""Does the engine's write measure the endpoint and not itself? Engine vs a bare XrdCl loop.

The same bytes (the engine's WriteSource) written in the same requests to the same
writable xrootd, each in a client process forked the same way; only the write loops are
timed (the engine's write phase: first request sent to last acknowledged). Trials
alternate which goes first; the ratio is the median of the per-trial ratios.

    .venv/bin/python benches/write_bare.py [--url root://HOST//scratch] [--trials 9]

Without --url it starts a writable xrootd of its own on loopback.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any
from urllib.parse import urlsplit

from common import in_client_process, writable_xrootd

from workers.engine import RunParams, run_probe
from workers.engine.client_ops import WriteSource
from workers.engine.params import Operation

MiB = 1024 * 1024
WORKLOADS: dict[str, dict[str, Any]] = {
    "256 MiB in 1 MiB requests": {"file_size": 256 * MiB, "read_size": MiB},
    "32 MiB in 64 KiB requests": {"file_size": 32 * MiB, "read_size": 64 * 1024},
    "4 MiB in 4 KiB requests": {"file_size": 4 * MiB, "read_size": 4096},
}


def bare_write(directory: str, fields: dict[str, Any], name: str) -> tuple[float, float]:
    """(seconds, CPU seconds) of the bare write loop: create (kXR_new), write every request
    (timed), close, rm."""
    from XRootD import client
    from XRootD.client.flags import OpenFlags

    source = WriteSource.of(RunParams(urls=(directory,), operation=Operation.WRITE, **fields))
    url = f"{directory.replace('root://', 'root://bare@')}/{name}"
    f = client.File()
    status, _ = f.open(url, OpenFlags.NEW)
    assert status.ok, status
    offset = 0
    started, cpu_started = time.perf_counter(), time.process_time()
    for data in source.requests():
        status, _ = f.write(data, offset, len(data))
        offset += len(data)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    f.close()
    parts = urlsplit(url)
    client.FileSystem(f"{parts.scheme}://{parts.netloc}").rm(parts.path)
    return elapsed, cpu


def engine_write_s(directory: str, fields: dict[str, Any], tag: str) -> tuple[float, float]:
    """(seconds of the write phase, client CPU seconds of the whole client: its create,
    commit, checksum query and delete too, so an upper bound of the loop's)."""
    params = RunParams(urls=(directory,), operation=Operation.WRITE, run_tag=tag, **fields)
    (client,) = run_probe(params).clients
    assert client.ok, client.error
    return client.write_s, client.cpu_user_s + client.cpu_sys_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None, help="a writable directory URL (root://)")
    parser.add_argument("--trials", type=int, default=9)
    args = parser.parse_args()
    with writable_xrootd(args.url) as (directory, _):
        print(
            "| workload | engine MB/s | bare loop MB/s | engine / bare (median of pairs) | IQR "
            "| client CPU per request, engine (whole client) / bare (loop) |"
        )
        print("|---|---|---|---|---|---|")
        for name, fields in WORKLOADS.items():
            engine, bare, ratios, engine_cpu, bare_cpu = [], [], [], [], []
            requests = -(-fields["file_size"] // fields["read_size"])
            for trial in range(args.trials):
                tag = f"bench{trial}"
                if trial % 2:
                    bare_s, bare_cpu_s = in_client_process(
                        bare_write, directory, fields, f"bare-{trial}"
                    )
                    engine_s, engine_cpu_s = engine_write_s(directory, fields, tag)
                else:
                    engine_s, engine_cpu_s = engine_write_s(directory, fields, tag)
                    bare_s, bare_cpu_s = in_client_process(
                        bare_write, directory, fields, f"bare-{trial}"
                    )
                engine.append(fields["file_size"] / engine_s / 1e6)
                bare.append(fields["file_size"] / bare_s / 1e6)
                ratios.append(bare_s / engine_s)
                engine_cpu.append(engine_cpu_s / requests * 1e6)
                bare_cpu.append(bare_cpu_s / requests * 1e6)
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            print(
                f"| {name} | {statistics.median(engine):,.0f} | {statistics.median(bare):,.0f} "
                f"| {statistics.median(ratios):.1%} | {q1:.0%}-{q3:.0%} "
                f"| {statistics.median(engine_cpu):.0f} / {statistics.median(bare_cpu):.0f} us |",
                flush=True,
            )


if __name__ == "__main__":
    main()
