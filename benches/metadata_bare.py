"""Does a metadata storm measure the endpoint and not the engine? Engine vs a bare XrdCl loop.

stat, open-close and a directory listing, flat out, `--ops` per trial against a writable
xrootd of its own (or --url's directory), each side in a client process forked the same
way, each from its first operation (which connects) to its last: the engine's ops_per_s
of its one client against the bare loop's operations per second. Trials alternate which
goes first; the ratio is the median of the per-trial ratios. Each trial starts with a
warm-up, the bare loop once unmeasured: without it the first side of a trial met a colder
server than the second, which then ran 5-10% faster (with a server per trial, on one CPU:
the engine 93.0% of the bare loop when it went first, 103.2% when second), and the median
of the mixture moved by several percent from run to run (docs/benchmarks.md). stderr says
the median ratio of each order: with the warm-up they agree.

    .venv/bin/python benches/metadata_bare.py [--url root://HOST//scratch] [--trials 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from common import in_client_process, order_summary, ratio_summary, trial_servers

from workers.engine import RunParams, run_probe
from workers.engine.params import Operation

FILE = "metadata-bench-file"
ENTRIES = 100  # the listed directory's size


def bare_storm(operation: str, url: str, ops: int) -> tuple[float, float]:
    """(seconds, CPU seconds of the process) of `ops` operations of the bare loop (one
    FileSystem, as the engine keeps)."""
    from XRootD import client
    from XRootD.client.flags import OpenFlags

    user_url = url.replace("root://", "root://bare@")
    parts = urlsplit(user_url)
    fs, path = client.FileSystem(f"{parts.scheme}://{parts.netloc}"), parts.path
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(ops):
        if operation == "stat":
            status, _ = fs.stat(path)
        elif operation == "list":
            status, _ = fs.dirlist(path)
        else:
            f = client.File()
            status, _ = f.open(user_url, OpenFlags.READ)
            f.close()
        assert status.ok, status
    return time.perf_counter() - started, time.process_time() - cpu_started


def engine_storm(operation: str, url: str, ops: int) -> tuple[float, float]:
    """(operations per second, client CPU seconds) of the engine's storm."""
    run = run_probe(RunParams(urls=(url,), operation=Operation(operation), ops=ops))
    (client,) = run.clients
    assert client.ok, client.error
    assert client.ops_per_s is not None
    return client.ops_per_s, client.cpu_user_s + client.cpu_sys_s


def bare_rate(operation: str, url: str, ops: int) -> tuple[float, float]:
    seconds, cpu_s = in_client_process(bare_storm, operation, url, ops)
    return ops / seconds, cpu_s


def prepare(folder: Path | None, directory: str) -> dict[str, str]:
    """The URL each operation works on: a file (stat, open) or a directory (list)."""
    if folder is not None:
        (folder / FILE).write_bytes(b"x" * 1000)
        listed = folder / "listed"
        listed.mkdir(exist_ok=True)
        for k in range(ENTRIES):
            (listed / f"entry-{k}").write_bytes(b"")
    return {
        "stat": f"{directory}/{FILE}",
        "open": f"{directory}/{FILE}",
        "list": f"{directory}/listed",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None, help="a directory URL holding the files")
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument(
        "--pin", action="store_true", help="server on CPU 0, clients on the others (common.py)"
    )
    parser.add_argument("--ops", type=int, default=3000)
    parser.add_argument("--operations", nargs="+", default=["stat", "open", "list"])
    parser.add_argument(
        "--server-per-trial", action="store_true", help="a fresh xrootd for every trial"
    )
    args = parser.parse_args()
    with trial_servers(args.url, pin=args.pin, per_trial=args.server_per_trial) as server:
        print(
            "| operation | engine ops/s | bare loop ops/s "
            "| engine / bare: median of pairs (IQR; 95% CI) | client CPU per op, engine / bare |"
        )
        print("|---|---|---|---|---|")
        for operation in args.operations:
            engine, bare, ratios, engine_cpu, bare_cpu = [], [], [], [], []
            for trial in range(args.trials):
                with server() as (directory, folder):
                    url = prepare(folder, directory)[operation]
                    bare_rate(operation, url, args.ops)  # the warm-up (docstring)
                    if trial % 2:
                        bare_ops, bare_cpu_s = bare_rate(operation, url, args.ops)
                        engine_ops, engine_cpu_s = engine_storm(operation, url, args.ops)
                    else:
                        engine_ops, engine_cpu_s = engine_storm(operation, url, args.ops)
                        bare_ops, bare_cpu_s = bare_rate(operation, url, args.ops)
                engine.append(engine_ops)
                bare.append(bare_ops)
                ratios.append(engine_ops / bare_ops)
                engine_cpu.append(engine_cpu_s / args.ops * 1e6)
                bare_cpu.append(bare_cpu_s / args.ops * 1e6)
            print(
                f"| {operation} | {statistics.median(engine):,.0f} "
                f"| {statistics.median(bare):,.0f} | {ratio_summary(ratios)} "
                f"| {statistics.median(engine_cpu):.0f} / "
                f"{statistics.median(bare_cpu):.0f} us |",
                flush=True,
            )
            print(f"{operation}: {order_summary(ratios)}", file=sys.stderr)


if __name__ == "__main__":
    main()
