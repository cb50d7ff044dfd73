"""The copy method vs plain xrdcp of the same file from the lab's local site.

    .venv/bin/python benches/copy_vs_xrdcp.py [--lab-dir DIR] [--trials 5]

The engine's copy phase runs xrdcp itself (with XRD_CPUSEPGWRTRD=0); plain xrdcp is run
the same way by hand. The difference is what the engine adds around the tool.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time

from common import running_lab

from workers.engine import Method, Pattern, RunParams, run_probe

FILE = "/fedprobe/file-256M"


def plain_xrdcp_s(url: str, dest: str) -> float:
    env = dict(os.environ, XRD_CPUSEPGWRTRD="0")
    started = time.perf_counter()
    subprocess.run(["xrdcp", "--nopbar", "--force", url, dest], env=env, check=True)
    elapsed = time.perf_counter() - started
    os.unlink(dest)
    return elapsed


def engine_copy_s(url: str) -> float:
    run = run_probe(
        RunParams(
            urls=(url,),
            method=Method.COPY,
            pattern=Pattern.SEQUENTIAL,
            read_size=1024 * 1024,
            fraction=0.01,
        )
    )
    (client,) = run.clients
    assert client.ok, client.error
    return client.copy_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab-dir", default="/tmp/fedprobe-lab")
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    with running_lab(args.lab_dir, "test") as lab:
        url = lab.endpoint("local-root").file_url(FILE)
        size = next(f.size for f in lab.endpoint("local-root").files if f.path == FILE)
        dest = os.path.join(tempfile.gettempdir(), "fedprobe-bench-copy")
        plain, engine = [], []
        for _ in range(args.trials):
            plain.append(plain_xrdcp_s(url, dest))
            engine.append(engine_copy_s(url))
    p, e = statistics.median(plain), statistics.median(engine)
    print(f"| copy of {size / 2**20:.0f} MiB | seconds (median of {args.trials}) | MB/s |")
    print("|---|---|---|")
    print(f"| plain xrdcp | {p:.3f} | {size / p / 1e6:,.0f} |")
    print(f"| engine copy phase | {e:.3f} | {size / e / 1e6:,.0f} ({p / e:.0%} of xrdcp's rate) |")


if __name__ == "__main__":
    main()
