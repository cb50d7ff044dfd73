"""What the egress guard costs: per connection, and per open of a real run.

    .venv/bin/python benches/egress_guard.py connect [--connects 3000] [--trials 9]
    .venv/bin/python benches/egress_guard.py opens [--lab-dir DIR] [--runs 40]

`connect`: in a process forked as the engine forks its clients, a loop of TCP connects to a
listener on loopback (accepted and closed by a thread of this process), unguarded and then
under the guard (the filter cannot be removed once installed, hence that order inside each
trial; each trial is a fresh process). Median connect time over the loop; medians over
trials with their interquartile ranges.

`opens`: run_probe of one 4 KiB read of /fedprobe/file-1M at the lab's local site (no relay,
no added RTT), so every open is a fresh client process's first connection, over root://
(the protocol the guard is for: HTTP runs are not guarded, their backend checks its own
connections), with no policy (unguarded) and with FEDPROBE_EGRESS_ALLOW's lab default
(127.0.0.0/8, ::1/128: guarded), alternating. The client's open time (open_s) and the
preflight's round trip; medians with interquartile ranges. Without a running lab in
--lab-dir, starts one (profile test, on a free base port) and stops it after.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benches.common import in_client_process, running_lab
from workers.engine import EgressPolicy, Method, RunParams, run_probe
from workers.engine.egress_guard import EgressGuard, GuardLink
from workers.lab.files import MiB
from workers.lab.ports import free_base_port

LAB_DEFAULT = EgressPolicy.allowing(["127.0.0.0/8", "::1/128"])


def spread(values: list[float]) -> tuple[float, float, float]:
    q1, p50, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return p50, q1, q3


def ms(values: list[float]) -> str:
    p50, q1, q3 = spread(values)
    return f"{p50 * 1e3:.3f} ms (IQR {q1 * 1e3:.3f}-{q3 * 1e3:.3f})"


def _connect_times(port: int, connects: int) -> list[float]:
    times = []
    for _ in range(connects):
        started = time.perf_counter()
        sock = socket.create_connection(("127.0.0.1", port))
        times.append(time.perf_counter() - started)
        sock.close()
    return times


def connect_trial(link: GuardLink, port: int, connects: int) -> tuple[float, float]:
    """(median unguarded connect, median guarded connect) in one client-like process."""
    bare = statistics.median(_connect_times(port, connects))
    link.attach("bench")
    guarded = statistics.median(_connect_times(port, connects))
    return bare, guarded


def _accept_forever(server: socket.socket) -> None:
    while True:
        try:
            connection, _ = server.accept()
        except OSError:
            return
        connection.close()


def connect(args: argparse.Namespace) -> None:
    server = socket.create_server(("127.0.0.1", 0), backlog=1024)
    threading.Thread(target=_accept_forever, args=(server,), daemon=True).start()
    port = server.getsockname()[1]
    bare, guarded = [], []
    for _ in range(args.trials):
        with EgressGuard.running(LAB_DEFAULT) as guard:
            assert guard is not None
            b, g = in_client_process(connect_trial, guard.link, port, args.connects)
        bare.append(b)
        guarded.append(g)
    server.close()
    print(f"TCP connect on loopback, {args.connects} per loop, {args.trials} trials")
    print(f"  unguarded  {ms(bare)}")
    print(f"  guarded    {ms(guarded)}")
    extra = [g - b for b, g in zip(bare, guarded, strict=True)]
    print(f"  the guard adds {ms(extra)} per connection")


def opens(args: argparse.Namespace) -> None:
    with running_lab(args.lab_dir, "test", [1 * MiB], base_port=free_base_port()) as lab:
        urls = {"root": lab.endpoint("local-root").file_url("/fedprobe/file-1M")}
        for door, url in urls.items():
            seen: dict[str, dict[str, list[float]]] = {"unguarded": {}, "guarded": {}}
            for k in range(args.runs):
                order = ("unguarded", "guarded") if k % 2 == 0 else ("guarded", "unguarded")
                for mode in order:
                    policy = LAB_DEFAULT if mode == "guarded" else None
                    open_s, rtt_s = _one_open(url, policy)
                    seen[mode].setdefault("open", []).append(open_s)
                    seen[mode].setdefault("rtt", []).append(rtt_s)
            print(f"{door}:// at the local site, {args.runs} runs each")
            for mode, figures in seen.items():
                print(f"  {mode:10} open {ms(figures['open'])}, preflight RTT {ms(figures['rtt'])}")


def _one_open(url: str, policy: EgressPolicy | None) -> tuple[float, float]:
    run = run_probe(
        RunParams(urls=(url,), method=Method.DIRECT, read_size=4096, fraction=4096 / MiB,
                  egress=policy)
    )  # fmt: skip
    if run.status != "succeeded":
        raise SystemExit(f"{url}: {run.status}: {run.to_json()['errors']}")
    (client,) = run.clients
    return client.open_s, run.preflight_rtt_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sections = parser.add_subparsers(dest="section", required=True)
    c = sections.add_parser("connect")
    c.add_argument("--connects", type=int, default=3000)
    c.add_argument("--trials", type=int, default=9)
    o = sections.add_parser("opens")
    o.add_argument("--lab-dir")
    o.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    run: Callable[[argparse.Namespace], Any] = {"connect": connect, "opens": opens}[args.section]
    run(args)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
