"""file:// random 4 KiB reads: the engine vs fio (psync, --invalidate=0) on the same file.

    .venv/bin/python benches/file_vs_fio.py [--file PATH] [--reads 100000] [--trials 5]

Both read cached pages (fio keeps the page cache with --invalidate=0), so this compares the
cost of one read through each tool: the engine's is a Python call to os.pread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from workers.engine import Pattern, RunParams, run_probe

MiB = 1024 * 1024


def fio_iops(path: str, reads: int) -> float:
    done = subprocess.run(
        [
            "fio",
            "--name=randread",
            f"--filename={path}",
            "--rw=randread",
            "--bs=4k",
            "--ioengine=psync",
            "--invalidate=0",
            f"--io_size={reads * 4096}",
            f"--size={os.path.getsize(path)}",
            "--output-format=json",
            "--randrepeat=1",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(done.stdout)["jobs"][0]["read"]["iops"])


def engine_iops(path: str, reads: int) -> float:
    fraction = min(1.0, reads * 4096 / os.path.getsize(path))
    run = run_probe(
        RunParams(
            urls=("file://" + path,), pattern=Pattern.RANDOM, read_size=4096, fraction=fraction
        )
    )
    (client,) = run.clients
    assert client.ok, client.error
    return client.ops / client.read_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--file", default=None, help="default: a new 256 MiB file in /tmp")
    parser.add_argument("--reads", type=int, default=50000)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    path = args.file
    if path is None:
        handle, path = tempfile.mkstemp(prefix="fedprobe-fio-", dir="/tmp")
        with os.fdopen(handle, "wb") as out:
            for _ in range(256):
                out.write(os.urandom(MiB))
    try:
        Path(path).read_bytes()  # warm the page cache for both
        engine = [engine_iops(path, args.reads) for _ in range(args.trials)]
        fio = [fio_iops(path, args.reads) for _ in range(args.trials)]
    finally:
        if args.file is None:
            os.unlink(path)
    e, f = statistics.median(engine), statistics.median(fio)
    print(f"| tool | random 4 KiB reads/s (median of {args.trials}) |")
    print("|---|---|")
    print(f"| fio psync | {f:,.0f} |")
    print(f"| engine file:// | {e:,.0f} ({e / f:.0%} of fio) |")


if __name__ == "__main__":
    main()
