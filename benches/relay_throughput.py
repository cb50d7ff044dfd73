"""Single-stream throughput and ping-pong round trip through the WAN relay on loopback.

Run: `.venv/bin/python benches/relay_throughput.py [--mb 1000] [--rtt-ms 0 26]`. The
servers run in their own processes, the relay as its own process
(`python -m workers.lab.relay`, as the lab runs it), the client in this one.

Results on the 2-core lab VM, 2026-11 (MB = 1e6 bytes; 1000 MB per stream; six runs
on a machine shared with other work, hence the spread; round trip = median of 200
64-byte ping-pongs):
    direct (no relay) : 2800-4800 MB/s, round trip 0.01-0.02 ms
    relay rtt 0 ms    : 1200-2150 MB/s, round trip 0.07-0.12 ms
    relay rtt 20 ms   : 1000-1620 MB/s, round trip 20.5-20.8 ms
    relay rtt 26 ms   :  950-1650 MB/s, round trip 26.4-26.8 ms
The stream figures include the first byte's rtt. With the select() loop (sub-millisecond
timers), a later run (500 MB per stream): rtt 0 ms 2117 MB/s, 0.10 ms round trip;
rtt 0.5 ms 1725 MB/s, 0.77 ms; rtt 26 ms 1477 MB/s, 26.73 ms. The relay's own two hops
cost ~0.1-0.3 ms of round trip.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PING = b"x" * 64


def stream_zeros(listener: socket.socket, total: int) -> None:
    """Send `total` zero bytes to each client, then close."""
    block = memoryview(bytes(1 << 20))
    while True:
        conn, _ = listener.accept()
        with conn, contextlib.suppress(OSError):
            remaining = total
            while remaining:
                remaining -= conn.send(block[: min(remaining, len(block))])


def echo(listener: socket.socket) -> None:
    while True:
        conn, _ = listener.accept()
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data)


def start_server(target: Callable[..., None], *args: object) -> int:
    listener = socket.create_server(("127.0.0.1", 0))
    multiprocessing.Process(target=target, args=(listener, *args), daemon=True).start()
    return int(listener.getsockname()[1])


def read_all(port: int) -> tuple[int, float]:
    buffer = bytearray(1 << 20)
    received = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        started = time.perf_counter()
        while n := sock.recv_into(buffer):
            received += n
        return received, time.perf_counter() - started


def round_trip_ms(port: int, count: int = 200) -> float:
    times = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            started = time.perf_counter()
            sock.sendall(PING)
            received = 0
            while received < len(PING):
                received += len(sock.recv(len(PING) - received))
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def relay_process(folder: Path, rtt_ms: float, targets: list[int]) -> Iterator[list[int]]:
    """Relay each target port with the given rtt; yields the relay ports."""
    ports = [free_port() for _ in targets]
    specs = [
        {"name": f"r{i}", "listen_port": port, "target_host": "127.0.0.1"}
        | {"target_port": target, "rtt_ms": rtt_ms}
        for i, (port, target) in enumerate(zip(ports, targets, strict=True))
    ]
    config, pid_file = folder / f"relay-{rtt_ms}.json", folder / f"relay-{rtt_ms}.pid"
    config.write_text(json.dumps({"relays": specs}))
    command = [sys.executable, "-m", "workers.lab.relay", "--config", str(config)]
    relay = subprocess.Popen([*command, "--pid-file", str(pid_file)], cwd=REPO)
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        yield ports
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.wait(10)


def report(label: str, total: int, stream_port: int, echo_port: int) -> None:
    received, elapsed_s = read_all(stream_port)
    assert received == total, (label, received)
    rate = received / elapsed_s / 1e6
    rtt = round_trip_ms(echo_port)
    print(f"{label:<18}: {rate:6.0f} MB/s ({elapsed_s:.2f} s), round trip {rtt:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000, help="MB (1e6 bytes) per stream")
    parser.add_argument("--rtt-ms", type=float, nargs="*", default=[0.0, 26.0])
    args = parser.parse_args()
    total = args.mb * 1_000_000
    stream_port, echo_port = start_server(stream_zeros, total), start_server(echo)
    report("direct (no relay)", total, stream_port, echo_port)
    with tempfile.TemporaryDirectory() as folder:
        for rtt_ms in args.rtt_ms:
            with relay_process(Path(folder), rtt_ms, [stream_port, echo_port]) as ports:
                report(f"relay rtt {rtt_ms:g} ms", total, *ports)


if __name__ == "__main__":
    main()
