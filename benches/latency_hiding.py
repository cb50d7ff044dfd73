"""Paper 002 at the near site: sync reads pay one RTT each; async and vector hide it, up to
the link's rate.

    .venv/bin/python benches/latency_hiding.py [--lab-dir DIR] [--reads 400]

Needs the near site at 26 ms (lab profile paper, link 8 MB/s): uses a running paper lab in
--lab-dir, else starts one with small files and stops it after. Prints ops/s and MB/s per
client for sync random 4 KiB reads, async with depth 64 and vector reads of 1024 chunks,
the speed-ups, and the advice's model (webapp/advice/model.py) for each on this link.
"""

from __future__ import annotations

import argparse

from common import running_lab

from webapp.advice import model
from workers.engine import Pattern, RunParams, run_probe

MiB = 1024 * 1024
FILE = "/fedprobe/file-16M"


def rate(url: str, pattern: Pattern, reads: int, **extra: int) -> tuple[float, float]:
    """(data operations per second of the read phase, p50 latency in ms)."""
    fraction = reads * 4096 / (16 * MiB)
    run = run_probe(
        RunParams(urls=(url,), pattern=pattern, read_size=4096, fraction=fraction, **extra)
    )  # type: ignore[arg-type]
    (client,) = run.clients
    assert client.ok, client.error
    chunks = client.bytes_read // 4096
    p50 = run.to_json()["op_latency_us"]["p50"]  # type: ignore[index]
    return chunks / client.read_s, float(p50) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lab-dir", default="/tmp/fedprobe-lab")
    parser.add_argument("--reads", type=int, default=400, help="sync reads (async/vector: x10)")
    args = parser.parse_args()
    with running_lab(args.lab_dir, "paper", file_sizes=[16 * MiB], base_port=27000) as lab:
        endpoint = lab.endpoint("near-root")
        url = endpoint.file_url(FILE)
        cap = endpoint.bandwidth_mbps
        link = model.Link(rtt_s=endpoint.rtt_ms / 1000, bandwidth_bps=cap and cap * 1e6)
        print(f"near site: {url}, emulated RTT {endpoint.rtt_ms} ms, link {cap or '-'} MB/s")
        sync, sync_p50 = rate(url, Pattern.RANDOM, args.reads)
        many = 10 * args.reads
        asynchronous, _ = rate(url, Pattern.ASYNC, many, depth=64)
        vector, _ = rate(url, Pattern.VECTOR, many, vector_size=1024)
        predicted = {
            "sync": model.sync_rate(link, read_size=4096),
            "async": model.async_rate(link, read_size=4096, depth=64),
            "vector": model.vector_rate(link, read_size=4096, chunks=1024),
        }
        print("| mode | 4 KiB reads/s per client | MB/s | vs sync | model reads/s (MB/s) |")
        print("|---|---|---|---|---|")
        rows = [
            (f"sync (p50 {sync_p50:.1f} ms; 1/RTT = {1000 / endpoint.rtt_ms:.1f}/s)", sync),
            ("async, depth 64", asynchronous),
            ("vector, 1024 chunks", vector),
        ]
        for (label, measured), expected in zip(rows, predicted.values(), strict=True):
            print(
                f"| {label} | {measured:,.1f} | {measured * 4096 / 1e6:.2f} "
                f"| {measured / sync:.0f}x | {expected:,.0f} ({expected * 4096 / 1e6:.2f}) |"
            )


if __name__ == "__main__":
    main()
