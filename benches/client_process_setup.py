"""Does what an engine client process sets up slow a bare open-close loop down?

The same bare XrdCl open-close loop in separate processes: plain, set up as
`workers.engine.client.client_main` sets a client up (its own process group, the
`die_with` thread, the SIGTERM handler, `Access.apply_environment`, `configure_client`'s
XrdCl settings), and a second plain copy (what two identical processes differ by on this
machine). Rounds rotate the order; each ratio is against the plain loop of its round.

    .venv/bin/python benches/client_process_setup.py [--rounds 30] [--ops 2000]
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import writable_xrootd
from metadata_bare import prepare

# What client_main sets up, in the order it does; "engine-client" is all of it, and
# "--variants a+b" any part of it.
SETUP = ("pgid", "die-with", "sigterm", "environment", "xrdcl")
VARIANTS = ("plain", "engine-client", "plain-again")


def loop(url: str, variant: str, ops: int) -> tuple[float, float]:
    """(open-closes per second, CPU us per open-close) of the bare loop in this process."""
    parts = set(variant.split("+")) if variant != "engine-client" else set(SETUP)
    if "pgid" in parts:
        os.setpgid(0, 0)
    if "die-with" in parts:
        from workers.engine.processes import die_with

        die_with(os.getppid())
    if "sigterm" in parts:
        from workers.engine.client import SIGTERM

        signal.signal(signal.SIGTERM, SIGTERM.handle)
    if "environment" in parts:
        from workers.engine.credentials import Access

        Access().apply_environment()
    if "xrdcl" in parts:
        from workers.engine.backends.base import OpenOptions
        from workers.engine.backends.xroot import configure_client
        from workers.engine.deadline import Deadline

        configure_client(OpenOptions(user="bare", streams=1, deadline=Deadline.after(3600)))
    from XRootD import client
    from XRootD.client.flags import OpenFlags

    user_url = url.replace("root://", "root://bare@")

    def open_close() -> None:
        f = client.File()
        status, _ = f.open(user_url, OpenFlags.READ)
        assert status.ok, status
        f.close()

    open_close()  # connects
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(ops):
        open_close()
    elapsed, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return ops / elapsed, cpu_s / ops * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument(
        "--pin", action="store_true", help="server on CPU 0, clients on the others (common.py)"
    )
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), help="plain first")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, variant, ops = args.child
        print(*loop(url, variant, int(ops)))
        return
    with writable_xrootd(None, pin=args.pin) as (directory, folder):
        url = prepare(folder, directory)["open"]
        variants = tuple(args.variants)
        results: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
        for round_ in range(args.rounds):
            shift = round_ % len(variants)
            order = variants[shift:] + variants[:shift]
            for variant in order if (round_ // len(variants)) % 2 == 0 else order[::-1]:
                argv = [sys.executable, str(Path(__file__)), "--child", url, variant]
                done = subprocess.run(
                    [*argv, str(args.ops)], capture_output=True, text=True, check=True
                )
                rate, cpu = (float(x) for x in done.stdout.split())
                results[variant].append((rate, cpu))
        print("| process | open-closes/s | CPU per op | against plain (median of rounds) | IQR |")
        print("|---|---|---|---|---|")
        for variant in variants:
            rates = [rate for rate, _ in results[variant]]
            plain = [rate for rate, _ in results[variants[0]]]
            ratios = [r / p for r, p in zip(rates, plain, strict=True)]
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            cpu = statistics.median(c for _, c in results[variant])
            print(
                f"| {variant} | {statistics.median(rates):,.0f} | {cpu:.0f} us "
                f"| {statistics.median(ratios):.1%} | {q1:.0%}-{q3:.0%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
