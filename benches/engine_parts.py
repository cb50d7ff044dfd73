"""Where does the engine lose against the bare loop on small requests: its process, or its call?

metadata_bare.py and write_bare.py run the engine (run_probe: its client process from its
fork server) against a bare loop in a process forked the same way. Here the engine runs as
it does, with only its open-close call (`--workload open`), its stat (`stat`) or its write request
(`--workload write-4k`, 4 MiB in 4 KiB requests) replaced in its client process
(engine_parts_variant.py, preloaded into the engine's fork server), in turn: `engine`
(unchanged), `bare-call` (the bare loop's call in the engine's client process),
`no-timeout` (the engine's call without the time left to the deadline on each request);
`bare-again` is a second bare loop process (what two identical processes differ by). Each is
compared with the bare loop of its round; rounds rotate the order and start with an
unmeasured bare loop (a warm-up, as metadata_bare.py's trials); with --server-per-trial each
round has a fresh xrootd. About 15 minutes for open at --rounds 101, 8 for write-4k.

    .venv/bin/python benches/engine_parts.py [--workload open|stat|write-4k] [--rounds 101]
        [--server-per-trial] [--ops 3000] [--variants engine bare-call bare-call+no-setup ...]

A variant is `engine` or parts joined by "+": bare-call, no-timeout, no-setup (client_main
without its process group, die_with thread, SIGTERM handler and credential environment),
no-xrdcl-settings (XrdCl's defaults, not configure_client's); `bare-again` is the bare loop.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from multiprocessing import forkserver
from pathlib import Path

from common import in_client_process, ratio_summary, trial_servers
from metadata_bare import bare_storm, prepare
from write_bare import WORKLOADS, bare_write, engine_write_s

from workers.engine import RunParams, run_probe
from workers.engine.params import Operation

VARIANTS = ("engine", "bare-call", "no-timeout", "bare-again")
PRELOAD = "engine_parts_variant"
OPS = 3000  # open-closes (stats) per trial, unless --ops
_, WRITE_4K = WORKLOADS["4K"]


def preload_variants(variant_file: Path) -> None:
    """Start the one fork server of this process (the engine's clients and the bare loop's
    processes both fork from it: multiprocessing keeps a single one per process, started by
    whichever asks first) with engine_parts_variant preloaded, which reads the variant from
    `variant_file`; the fork server finds it through PYTHONPATH. Started later, by the bare
    loop's warm-up, it would preload nothing (the engine sets its preloads when it starts a
    run, too late), and every variant would silently be the unchanged engine (as happened
    until 2026-11-29: the variants' figures before then are all the engine's)."""
    os.environ["FEDPROBE_BENCH_VARIANT_FILE"] = str(variant_file)
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    engine_preloads = ["workers.engine.client", "workers.engine.preflight"]
    forkserver.set_forkserver_preload([*engine_preloads, PRELOAD])
    forkserver.ensure_running()


def storm_rates(
    operation: str, directory: str, folder: Path | None, ops: int
) -> tuple[Callable[[], float], Callable[[], float]]:
    """(the engine's operations per second, the bare loop's), against the server's file."""
    url = prepare(folder, directory)[operation]

    def engine() -> float:
        run = run_probe(RunParams(urls=(url,), operation=Operation(operation), ops=ops))
        (client,) = run.clients
        assert client.ok and client.ops_per_s, client.error
        return client.ops_per_s

    def bare() -> float:
        seconds, _ = in_client_process(bare_storm, operation, url, ops)
        return ops / seconds

    return engine, bare


def write_rates(directory: str, trial: int) -> tuple[Callable[[], float], Callable[[], float]]:
    """(the engine's write phase in requests per second, the bare loop's)."""
    requests = WRITE_4K["file_size"] // WRITE_4K["read_size"]
    names = iter(range(100))

    def engine() -> float:
        seconds, _ = engine_write_s(directory, WRITE_4K, f"parts{trial}x{next(names)}")
        return requests / seconds

    def bare() -> float:
        seconds, _ = in_client_process(
            bare_write, directory, WRITE_4K, f"bare-{trial}-{next(names)}"
        )
        return requests / seconds

    return engine, bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", choices=["open", "stat", "write-4k"], default="open")
    parser.add_argument("--rounds", type=int, default=101)
    parser.add_argument("--ops", type=int, default=OPS, help="operations per storm")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument(
        "--pin", action="store_true", help="server on CPU 0, clients on the others (common.py)"
    )
    parser.add_argument(
        "--server-per-trial", action="store_true", help="a fresh xrootd for every round"
    )
    args = parser.parse_args()
    variant_file = Path(tempfile.mkdtemp(prefix="fedprobe-bench-")) / "variant"
    preload_variants(variant_file)
    variants = tuple(args.variants)
    sides = ("bare", *variants)
    rates: dict[str, list[float]] = {side: [] for side in sides}
    with trial_servers(None, pin=args.pin, per_trial=args.server_per_trial) as server:
        for round_ in range(args.rounds):
            with server() as (directory, folder):
                if args.workload == "write-4k":
                    engine, bare = write_rates(directory, round_)
                else:
                    engine, bare = storm_rates(args.workload, directory, folder, args.ops)
                bare()  # the warm-up: no side meets a colder server (metadata_bare.py)
                shift = round_ % len(sides)
                for side in sides[shift:] + sides[:shift]:
                    if side in ("bare", "bare-again"):
                        rates[side].append(bare())
                    else:
                        variant_file.write_text(side)
                        rates[side].append(engine())
    unit = {"open": "open-closes/s", "stat": "stats/s"}.get(args.workload, "4 KiB writes/s")
    print(f"| in the engine's client | {unit} | against the bare loop of its round |")
    print("|---|---|---|")
    print(f"| (the bare loop) | {statistics.median(rates['bare']):,.0f} | |")
    for side in variants:
        ratios = [v / b for v, b in zip(rates[side], rates["bare"], strict=True)]
        print(f"| {side} | {statistics.median(rates[side]):,.0f} | {ratio_summary(ratios)} |")
    variant_file.unlink(missing_ok=True)
    variant_file.parent.rmdir()


if __name__ == "__main__":
    main()
