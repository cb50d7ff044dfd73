"""Instructions per metadata operation: the engine's storm loop against the bare XrdCl loop.

Wall-clock ratios on this 2-core machine move by several percent between two processes
running the same code; instruction counts do not depend on the load. Each side runs under
`valgrind --tool=callgrind` twice, at two operation counts, against a writable xrootd of
its own; the difference divided by the difference in operations is what one operation
costs the client process (its Python, the bindings, XrdCl and libc; the kernel is not
counted). The engine's side is the storm's own code: `client_ops._storm` over
`XRootDBackend.metadata_call`, timing and recording each operation as a run does.

    .venv/bin/python benches/metadata_instructions.py [--ops 500 1500]
"""

from __future__ import annotations

import argparse
import array
import multiprocessing
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from common import writable_xrootd
from metadata_bare import prepare
from metadata_inprocess import bare_call

from workers.engine.backends.base import OpenOptions
from workers.engine.backends.xroot import XRootDBackend
from workers.engine.client_ops import _storm
from workers.engine.deadline import Deadline

BENCH = Path(__file__).resolve()


def run_side(side: str, operation: str, url: str, ops: int) -> None:
    """One side's `ops` operations (and one before, which connects), in this process."""
    if side == "bare":
        call = bare_call(operation, url)
        call()
        for _ in range(ops):
            call()
        return
    options = OpenOptions(user="engine", streams=1, deadline=Deadline.after(3600))
    calls = [XRootDBackend().metadata_call(operation, url, options)]
    calls[0](options.deadline.timeout_s())
    progress = multiprocessing.get_context("forkserver").RawArray("q", 1)
    client = SimpleNamespace(progress=progress, spec=SimpleNamespace(client=0), options=options)
    _storm(client, calls, ops, array.array("q").append)  # type: ignore[arg-type]


def instructions(side: str, operation: str, url: str, ops: int) -> int:
    """What the client process executed, as callgrind counts it."""
    argv = [sys.executable, str(BENCH), "--side", side, operation, url, str(ops)]
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found, done.stderr[-2000:]
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, nargs=2, default=[500, 1500])
    parser.add_argument("--side", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side, operation, url, ops = args.side
        run_side(side, operation, url, int(ops))
        return
    few, many = args.ops
    with writable_xrootd(None) as (directory, folder):
        urls = prepare(folder, directory)
        print("| operation | engine instructions per op | bare loop | engine / bare |")
        print("|---|---|---|---|")
        for operation, url in urls.items():
            per_op = {}
            for side in ("engine", "bare"):
                counts = [instructions(side, operation, url, n) for n in (few, many)]
                per_op[side] = (counts[1] - counts[0]) / (many - few)
            print(
                f"| {operation} | {per_op['engine']:,.0f} | {per_op['bare']:,.0f} "
                f"| {per_op['engine'] / per_op['bare']:.1%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
