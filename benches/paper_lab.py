"""The papers' numbers on the capped paper lab: the crossover of direct reading and copying
first (paper 000) and the client sweep's knee (paper 003) at the near site (26 ms, 8 MB/s),
beside the advice's model (webapp/advice/model.py). Latency hiding (paper 002) is
benches/latency_hiding.py.

    .venv/bin/python benches/paper_lab.py [--lab-dir DIR] [--repetitions 3] [--sweep-mib 2]

Uses a running paper lab in --lab-dir (with files of 1M and 16M), else starts one and
stops it after. The figures are in docs/benchmarks.md ("The papers' numbers on the capped
paper lab"); tests/workers/lab/test_paper_lab.py asserts them with one run per point.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
from typing import Any

from common import running_lab

from webapp.advice import model
from webapp.advice.crossings import crossings
from workers.engine import Method, Pattern, RunParams, RunResult, run_probe
from workers.lab import Lab

MiB = 1024 * 1024
SIZE = 16 * MiB
FILE = "/fedprobe/file-16M"
NEAR = "near-root"
CROSSOVER_FRACTIONS = {1000: (0.001, 0.0025, 0.005, 0.01), MiB: (0.25, 0.5, 0.75, 1.0)}
SWEEP = (1, 2, 4, 8, 16, 32)
SWEEP_READ = 64 * 1024


def probe(
    lab: Lab, method: Method, pattern: Pattern, read_size: int, file: str = FILE, **axes: Any
) -> RunResult:
    url = lab.endpoint(NEAR).file_url(file)
    params = RunParams(urls=(url,), method=method, pattern=pattern, read_size=read_size)
    run = run_probe(dataclasses.replace(params, **axes))
    failed = [c.error for c in run.clients if not c.ok]
    assert not failed, failed
    return run


def mean_read_s(run: RunResult) -> float:
    histogram = run.clients[0].latency["read"]
    return histogram.total_ns / histogram.count / 1e9


def calibrated(lab: Lab, link: model.Link) -> model.Link:
    """The link with what the model needs besides RTT and cap, measured apart from the
    crossover runs (as tests/workers/lab/test_paper_lab.py does): the per-request overhead
    of 20 sync 1 kB reads, the copy tool's start from a copy of a 1 MiB file."""
    reads = probe(lab, Method.DIRECT, Pattern.RANDOM, 1000, fraction=20_000 / SIZE)
    overhead = max(0.0, mean_read_s(reads) - link.read_s(1000))
    link = dataclasses.replace(link, overhead_s=overhead)
    small = probe(lab, Method.COPY, Pattern.SEQUENTIAL, MiB, file="/fedprobe/file-1M")
    setup = small.clients[0].wall_s - model.copy_s(link, file_size=MiB)
    return dataclasses.replace(link, copy_setup_s=max(0.0, setup))


def crossover(lab: Lab, link: model.Link, read_size: int, repetitions: int) -> str:
    """Direct at four fractions and a copy, `repetitions` times; the crossover of each
    repetition's curves beside the model's, with the calibrated link and on the wire alone."""
    fractions = CROSSOVER_FRACTIONS[read_size]
    found, direct_s, copy_s = [], [], []
    for _ in range(repetitions):
        direct = [
            probe(lab, Method.DIRECT, Pattern.RANDOM, read_size, fraction=f) for f in fractions
        ]
        copy = probe(lab, Method.COPY, Pattern.RANDOM, read_size, fraction=fractions[-1])
        walls = [run.clients[0].wall_s for run in direct]
        direct_s.append(walls)
        copy_s.append(copy.clients[0].wall_s)
        gaps = [w - copy.clients[0].wall_s for w in walls]
        found += [x for x, rising in crossings(fractions, gaps) if rising][:1]
    predicted = model.crossover_fraction(link, file_size=SIZE, read_size=read_size)
    wire = dataclasses.replace(link, overhead_s=0.0, copy_setup_s=0.0)
    on_wire = model.crossover_fraction(wire, file_size=SIZE, read_size=read_size)
    label = "1 kB" if read_size == 1000 else "1 MiB"
    times = " / ".join(
        f"{f:.2%}: {statistics.median(w[i] for w in direct_s):.2f} s"
        for i, f in enumerate(fractions)
    )
    print(f"{label} random reads, direct {times}; copy {statistics.median(copy_s):.2f} s")
    measured = statistics.median(found) if found else None
    return (
        f"| {label} | {_pct(measured)} ({_pct(min(found, default=None))}-"
        f"{_pct(max(found, default=None))}, {len(found)} of {repetitions}) "
        f"| {_pct(predicted)} | {_pct(on_wire)} "
        f"| {_diff(measured, predicted)} |"
    )


def aggregate_bps(run: RunResult) -> float:
    """Bytes of all clients over their read phases, from the first start to the last end."""
    reads = [next((s, e) for name, s, e in c.phases if name == "read") for c in run.clients]
    span = max(e for _, e in reads) - min(s for s, _ in reads)
    return sum(c.bytes_read for c in run.clients) / span


def sweep(lab: Lab, link: model.Link, per_client_mib: float) -> None:
    fraction = per_client_mib * MiB / SIZE
    rates = []
    print("| clients | aggregate MB/s | per client MB/s | model MB/s | slowest open |")
    print("|---|---|---|---|---|")
    for clients in SWEEP:
        run = probe(
            lab, Method.DIRECT, Pattern.RANDOM, SWEEP_READ, fraction=fraction, clients=clients
        )
        rate = aggregate_bps(run)
        rates.append(rate)
        modelled = model.client_sweep(
            link, per_client_bps=rates[0], clients=clients, read_size=SWEEP_READ
        )
        slowest_open = max(c.open_s for c in run.clients)
        print(
            f"| {clients} | {rate / 1e6:.2f} | {rate / clients / 1e6:.2f} "
            f"| {modelled / 1e6:.2f} | {slowest_open:.2f} s |"
        )
    top = max(rates)
    plateau = model.PLATEAU
    knee = next(n for n, r in zip(SWEEP, rates, strict=True) if r >= plateau * top)
    predicted = model.knee(link, per_client_bps=rates[0], read_size=SWEEP_READ)
    lines_meet = model.knee(link, per_client_bps=rates[0])
    print(
        f"knee (first count at {plateau:.0%} of the top, {top / 1e6:.2f} MB/s): {knee} clients; "
        f"model: {predicted:g} (sync clients' closed loop), {lines_meet:g} (n x one client's "
        f"{rates[0] / 1e6:.2f} MB/s, at most the link)"
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def _diff(measured: float | None, predicted: float | None) -> str:
    if measured is None or not predicted:
        return "-"
    return f"{(measured - predicted) / predicted:+.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab-dir", default="/tmp/fedprobe-lab")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--sweep-mib", type=float, default=2.0, help="read by each client")
    parser.add_argument("--only", choices=("crossover", "sweep"))
    args = parser.parse_args()
    # 32 XrdCl clients starting at once send reverse DNS lookups (of the host's addresses,
    # for their login) that this VM's resolver drops now and then: glibc's default 5 s
    # retry would split the 32 into two groups; 1 s (as the lab's own probes use) shrinks it.
    os.environ.setdefault("RES_OPTIONS", "timeout:1 attempts:3")
    with running_lab(args.lab_dir, "paper", file_sizes=[MiB, SIZE], base_port=27100) as lab:
        near = lab.endpoint(NEAR)
        assert near.bandwidth_mbps is not None, "the near site's link has no cap"
        link = model.Link(rtt_s=near.rtt_ms / 1000, bandwidth_bps=near.bandwidth_mbps * 1e6)
        print(f"near site: {near.url}, RTT {near.rtt_ms:g} ms, link {near.bandwidth_mbps:g} MB/s")
        if args.only in (None, "crossover"):
            measured = calibrated(lab, link)
            print(
                f"model's link: RTT {measured.rtt_s * 1e3:g} ms, {near.bandwidth_mbps:g} MB/s, "
                f"overhead {measured.overhead_s * 1e3:.1f} ms per request, copy start "
                f"{measured.copy_setup_s:.2f} s"
            )
            rows = [
                crossover(lab, measured, size, args.repetitions) for size in CROSSOVER_FRACTIONS
            ]
            print("| reads | measured crossover (range, found) | model | wire only (RTT, cap) "
                  "| measured vs model |")  # fmt: skip
            print("|---|---|---|---|---|")
            print("\n".join(rows))
        if args.only in (None, "sweep"):
            sweep(lab, link, args.sweep_mib)


if __name__ == "__main__":
    main()
