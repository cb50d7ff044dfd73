"""The engine's metadata storm against the bare XrdCl loop, in ONE process.

metadata_bare.py compares two processes; on this 2-core machine two processes running the
same bare loop differ by up to 4% in their medians (where their threads and the server's
land), which is twice what the 98% target asks to resolve. Here both sides run in one
process on one connection per side, in blocks of `--block` operations: the engine's storm
(`client_ops._storm`: its clock pair, record, progress store and the deadline's time left,
over `XRootDBackend.metadata_call`: the call and its status check) against the bare loop
of the same XrdCl call, in ABBA order (which side goes first alternates every two blocks:
the side that runs second after a switch was seen to gain 3-8%). The ratio is the median
of the per-pair ratios. Run under `taskset -c 1` (the server, its threads and the bench
on one CPU), nothing depends on where threads land, and 150 pairs resolve about +-0.7%.

    [taskset -c 1] .venv/bin/python benches/metadata_inprocess.py [--blocks 40] [--block 500]
"""

from __future__ import annotations

import argparse
import array
import multiprocessing
import statistics
import time
from collections.abc import Callable
from types import SimpleNamespace
from urllib.parse import urlsplit

from common import ratio_summary, writable_xrootd
from metadata_bare import prepare

from workers.engine.backends.base import OpenOptions
from workers.engine.backends.xroot import XRootDBackend
from workers.engine.client_ops import _storm
from workers.engine.deadline import Deadline


def bare_call(operation: str, url: str) -> Callable[[], None]:
    """The bare loop's operation, as metadata_bare.py makes it (its own user: own channel)."""
    from XRootD import client
    from XRootD.client.flags import OpenFlags

    user_url = url.replace("root://", "root://bare@")
    parts = urlsplit(user_url)
    fs, path = client.FileSystem(f"{parts.scheme}://{parts.netloc}"), parts.path

    def stat() -> None:
        status, _ = fs.stat(path)
        assert status.ok, status

    def listing() -> None:
        status, _ = fs.dirlist(path)
        assert status.ok, status

    def open_close() -> None:
        f = client.File()
        status, _ = f.open(user_url, OpenFlags.READ)
        assert status.ok, status
        f.close()

    return {"stat": stat, "list": listing, "open": open_close}[operation]


def ops_per_s(block: Callable[[int], None], n: int) -> float:
    started = time.perf_counter()
    block(n)
    return n / (time.perf_counter() - started)


def bare_block(call: Callable[[], None]) -> Callable[[int], None]:
    def block(n: int) -> None:
        for _ in range(n):
            call()

    return block


def engine_block(operation: str, url: str, options: OpenOptions) -> Callable[[int], None]:
    """n operations of the engine's storm, as a client runs it (the client's shared progress
    counter, its latency record, its deadline)."""
    call = XRootDBackend().metadata_call(operation, url, options)
    call(options.deadline.timeout_s())  # connected before the first block
    progress = multiprocessing.get_context("forkserver").RawArray("q", 1)
    client = SimpleNamespace(progress=progress, spec=SimpleNamespace(client=0), options=options)
    record = array.array("q").append

    def block(n: int) -> None:
        _storm(client, [call], n, record)  # type: ignore[arg-type]

    return block


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=40, help="pairs of blocks")
    parser.add_argument(
        "--pin", action="store_true", help="server on CPU 0, clients on the others (common.py)"
    )
    parser.add_argument("--block", type=int, default=500, help="operations per block")
    parser.add_argument("--operations", nargs="+", default=["stat", "open", "list"])
    args = parser.parse_args()
    with writable_xrootd(None, pin=args.pin) as (directory, folder):
        urls = prepare(folder, directory)
        options = OpenOptions(user="engine", streams=1, deadline=Deadline.after(3600))
        print(
            "| operation | engine ops/s | bare ops/s "
            "| engine / bare: median of pairs (IQR; 95% CI) |"
        )
        print("|---|---|---|---|")
        for operation in args.operations:
            url = urls[operation]
            bare = bare_call(operation, url)
            bare()  # connected before the first block
            sides = {"engine": engine_block(operation, url, options), "bare": bare_block(bare)}
            rates: dict[str, list[float]] = {"engine": [], "bare": []}
            for pair in range(args.blocks):
                order = ("engine", "bare") if pair % 4 in (0, 3) else ("bare", "engine")
                for side in order:
                    rates[side].append(ops_per_s(sides[side], args.block))
            ratios = [e / b for e, b in zip(rates["engine"], rates["bare"], strict=True)]
            print(
                f"| {operation} | {statistics.median(rates['engine']):,.0f} "
                f"| {statistics.median(rates['bare']):,.0f} | {ratio_summary(ratios)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
