"""Does the engine's write measure the endpoint and not itself? Engine vs a bare XrdCl loop.

The same bytes (the engine's WriteSource) written in the same requests to the same
writable xrootd, each in a client process forked the same way; only the write loops are
timed (the engine's write phase: first request sent to last acknowledged). Trials
alternate which goes first; the ratio is the median of the per-trial ratios. Each trial
starts with a warm-up, the bare loop's write once unmeasured, so that both sides follow a
write (as metadata_bare.py: the first side of a trial otherwise met a colder server);
stderr says the median ratio of each order.

    .venv/bin/python benches/write_bare.py [--url root://HOST//scratch] [--trials 9]

Without --url it starts a writable xrootd of its own on loopback.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from common import in_client_process, order_summary, ratio_summary, trial_servers

from workers.engine import RunParams, run_probe
from workers.engine.client_ops import WriteSource
from workers.engine.params import Operation

MiB = 1024 * 1024
# By request size: (what the table calls it, the run's fields).
WORKLOADS: dict[str, tuple[str, dict[str, Any]]] = {
    "1M": ("256 MiB in 1 MiB requests", {"file_size": 256 * MiB, "read_size": MiB}),
    "64K": ("32 MiB in 64 KiB requests", {"file_size": 32 * MiB, "read_size": 64 * 1024}),
    "4K": ("4 MiB in 4 KiB requests", {"file_size": 4 * MiB, "read_size": 4096}),
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
    parser.add_argument(
        "--request-sizes", nargs="+", choices=["1M", "64K", "4K"], default=["1M", "64K", "4K"]
    )
    parser.add_argument(
        "--pin", action="store_true", help="server on CPU 0, clients on the others (common.py)"
    )
    parser.add_argument(
        "--server-per-trial", action="store_true", help="a fresh xrootd for every trial"
    )
    args = parser.parse_args()
    with trial_servers(args.url, pin=args.pin, per_trial=args.server_per_trial) as server:
        print(
            "| workload | engine MB/s | bare loop MB/s | engine / bare: median of pairs (IQR; "
            "95% CI) | client CPU per request, engine (whole client) / bare (loop) |"
        )
        print("|---|---|---|---|---|")
        for size in args.request_sizes:
            name, fields = WORKLOADS[size]
            engine, bare, ratios, engine_cpu, bare_cpu = [], [], [], [], []
            requests = -(-fields["file_size"] // fields["read_size"])
            for trial in range(args.trials):
                tag, bare_name = f"bench{trial}", f"bare-{trial}"
                with server() as (directory, _):
                    in_client_process(bare_write, directory, fields, f"warm-{trial}")
                    if trial % 2:
                        bare_s, bare_cpu_s = in_client_process(
                            bare_write, directory, fields, bare_name
                        )
                        engine_s, engine_cpu_s = engine_write_s(directory, fields, tag)
                    else:
                        engine_s, engine_cpu_s = engine_write_s(directory, fields, tag)
                        bare_s, bare_cpu_s = in_client_process(
                            bare_write, directory, fields, bare_name
                        )
                engine.append(fields["file_size"] / engine_s / 1e6)
                bare.append(fields["file_size"] / bare_s / 1e6)
                ratios.append(bare_s / engine_s)
                engine_cpu.append(engine_cpu_s / requests * 1e6)
                bare_cpu.append(bare_cpu_s / requests * 1e6)
            print(
                f"| {name} | {statistics.median(engine):,.0f} | {statistics.median(bare):,.0f} "
                f"| {ratio_summary(ratios)} "
                f"| {statistics.median(engine_cpu):.0f} / {statistics.median(bare_cpu):.0f} us |",
                flush=True,
            )
            print(f"{name}: {order_summary(ratios)}", file=sys.stderr)


if __name__ == "__main__":
    main()
