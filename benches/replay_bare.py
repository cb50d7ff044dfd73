"""Does a replay measure the endpoint and not itself? Engine replay vs a bare XrdCl loop
over the same steps, and vs XRootD's own xrdreplay, on one real recording.

The recording is made here, each time: a job through the Python bindings with the client
recorder plugin on (pyxrootd/libXrdClRecorder-6.so), on the lab's local site (no relay):
open a 16 MiB file, 2,000 reads of 4 KiB at random offsets, 100 readvs of 16 x 4 KiB, 50
groups of 16 async 4 KiB reads outstanding together, close. Then, per trial (alternating
who goes first): the engine's replay as fast as possible (one client; its replay phase),
the bare loop (the bindings' File calls over the engine's planned steps, in a process forked
like the engine's clients; open to close), and `xrdreplay` (Debian's xrootd-client 5.5, its
own speed; its "Total Runtime"). xrdreplay sends each action at its recorded time without
waiting for the answer of the one before (only opens and closes wait), so it is a bound, not
a like-for-like replay; `-x 1000` hung for over 300 s on this recording. Rates are the
trace's steps (each open, read, readv, async group, close) per second; the engine/bare
ratio is the median of the per-trial ratios, with its interquartile range.

    .venv/bin/python benches/replay_bare.py [--lab-dir DIR] [--trials 11]

Without a running lab in --lab-dir it starts its own (profile test) and stops it after.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import in_client_process, running_lab

from workers.engine import RunParams, run_probe
from workers.engine.params import Operation
from workers.engine.replay import PlannedStep, Step, plan_steps
from workers.engine.trace import load_trace

FILE = "/fedprobe/file-16M"
# The PyPI bindings' own recorder plugin, beside their XrdCl.
_BINDINGS = importlib.util.find_spec("pyxrootd")
assert _BINDINGS is not None and _BINDINGS.origin is not None
RECORDER = Path(_BINDINGS.origin).parent / "libXrdClRecorder-6.so"

JOB = """
import queue, random, sys
from XRootD import client
from XRootD.client.flags import OpenFlags
size, k4 = 16 * 1024 * 1024, 4096
rng = random.Random(1)
f = client.File()
assert f.open(sys.argv[1], OpenFlags.READ)[0].ok
for _ in range(2000):
    assert f.read(rng.randrange(size // k4) * k4, k4)[0].ok
for _ in range(100):
    chunks = [(n * k4, k4) for n in sorted(rng.sample(range(size // k4), 16))]
    assert f.vector_read(chunks)[0].ok  # distinct chunks: XrdCl refuses a repeated one
done = queue.SimpleQueue()
for _ in range(50):
    for _ in range(16):
        f.read(rng.randrange(size // k4) * k4, k4, callback=lambda s, r, h: done.put(s.ok))
    assert all(done.get() for _ in range(16))
assert f.close()[0].ok
"""


def record(url: str, csv_path: Path) -> None:
    """Run the job with the recorder on (it loads when XrdCl starts: a process of its own)."""
    env = dict(os.environ, XRD_PLUGIN=str(RECORDER), XRD_RECORDERPATH=str(csv_path))
    subprocess.run([sys.executable, "-c", JOB, url], env=env, check=True, timeout=300)


def bare_loop(url: str, steps: list[PlannedStep]) -> tuple[float, float]:
    """(seconds, process CPU seconds) of the bindings' own calls over the planned steps,
    open to close."""
    from XRootD import client
    from XRootD.client.flags import OpenFlags

    f = client.File()
    done: queue.SimpleQueue[int] = queue.SimpleQueue()
    planned = [(int(s.step), list(s.requests)) for s in steps]
    read, readv, async_reads, open_ = int(Step.READ), int(Step.READV), int(Step.ASYNC), 0
    started, cpu_started = time.perf_counter(), time.process_time()
    for step, requests in planned:
        if step == read:
            f.read(*requests[0])
        elif step == readv:
            f.vector_read(requests)
        elif step == async_reads:  # every group of the job fits its depth
            for offset, size in requests:
                f.read(offset, size, callback=lambda s, r, h: done.put(1))
            for _ in requests:
                done.get()
        elif step == open_:
            status, _ = f.open(url.replace("root://", "root://bare@"), OpenFlags.READ)
            assert status.ok, status
        else:
            f.close()
    return time.perf_counter() - started, time.process_time() - cpu_started


def engine_replay_s(url: str, trace: Path) -> tuple[float, float]:
    """(seconds, client CPU seconds) of the engine's replay phase."""
    run = run_probe(RunParams(urls=(url,), operation=Operation.REPLAY, trace=str(trace)))
    (client,) = run.clients
    assert client.ok, client.error
    return client.read_s, client.cpu_user_s + client.cpu_sys_s


def xrdreplay_s(trace: Path) -> float:
    done = subprocess.run(
        ["xrdreplay", str(trace)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    match = re.search(r"Total\s+Runtime\s*:\s*([0-9.]+)", done.stdout)
    assert match, done.stdout
    return float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab-dir", default="/tmp/fedprobe-lab")
    parser.add_argument("--trials", type=int, default=11)
    args = parser.parse_args()
    with running_lab(args.lab_dir, "test") as lab, tempfile.TemporaryDirectory() as tmp:
        url = lab.endpoint("local-root").file_url(FILE)
        trace_path = Path(tmp) / "job.csv"
        record(url, trace_path)
        steps = plan_steps(load_trace(str(trace_path)))
        rates: dict[str, list[float]] = {"engine": [], "bare": [], "xrdreplay": []}
        ratios: list[float] = []
        cpu_us: dict[str, list[float]] = {"engine": [], "bare": []}
        for trial in range(args.trials):
            timed: dict[str, Any] = {}
            order = ["engine", "bare", "xrdreplay"]
            for name in order[trial % 3 :] + order[: trial % 3]:
                if name == "engine":
                    timed[name], cpu_s = engine_replay_s(url, trace_path)
                    cpu_us[name].append(cpu_s / len(steps) * 1e6)
                elif name == "bare":
                    timed[name], cpu_s = in_client_process(bare_loop, url, steps)
                    cpu_us[name].append(cpu_s / len(steps) * 1e6)
                else:
                    timed[name] = xrdreplay_s(trace_path)
            for name, seconds in timed.items():
                rates[name].append(len(steps) / seconds)
            ratios.append(timed["bare"] / timed["engine"])
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        print(f"{len(steps)} steps ({sum(len(s.requests) or 1 for s in steps)} requests)")
        print("| steps/s | engine replay | bare loop | xrdreplay | engine / bare | IQR |")
        print("|---|---|---|---|---|---|")
        print(
            f"| median | {statistics.median(rates['engine']):,.0f} "
            f"| {statistics.median(rates['bare']):,.0f} "
            f"| {statistics.median(rates['xrdreplay']):,.0f} "
            f"| {statistics.median(ratios):.1%} | {q1:.0%}-{q3:.0%} |"
        )
        # On a shared machine the fastest trial of each is the least disturbed one.
        best = {name: max(values) for name, values in rates.items()}
        print(
            f"| fastest | {best['engine']:,.0f} | {best['bare']:,.0f} "
            f"| {best['xrdreplay']:,.0f} | {best['engine'] / best['bare']:.1%} | |"
        )
        print(
            f"client CPU per step (median): engine {statistics.median(cpu_us['engine']):.1f} us, "
            f"bare {statistics.median(cpu_us['bare']):.1f} us"
        )


if __name__ == "__main__":
    main()
