"""A test host of the test's own: a network namespace joined to this one by a veth pair, that
reaches only the ports the test forwards to it (docs/workers.md#tests).

Inside, `127.0.0.1:PORT` of each forwarded port leads to `127.0.0.1:PORT` here (socat on the
namespace's loopback, to socat on this side's veth address), so URLs naming loopback work
unchanged from there; every other service of this host, PostgreSQL among them, is out of
reach (they listen on this namespace's loopback, which the namespace does not share). Made by
the test itself and removed after, processes stopped by their pids.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

SETTLE_TIMEOUT_S = 10.0


@dataclass
class TestHost:
    """The namespace `name`, its veth address `address` and this side's `gateway`."""

    __test__ = False  # not a pytest test class

    name: str
    address: str
    gateway: str
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the namespace (`ip netns exec` execs it: same pid)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def forward(self, ports: Sequence[int]) -> None:
        """Make each of `ports` on 127.0.0.1 here reachable as 127.0.0.1:PORT in there."""
        for port in ports:
            # This side listens on a port of its own: a server here listening on every
            # address (xrootd does) already holds `port` on the veth address too.
            relay = _unused_port()
            outside = f"TCP-LISTEN:{relay},bind={self.gateway},reuseaddr,fork"
            inside = f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork"
            self._start(["socat", outside, f"TCP:127.0.0.1:{port}"])
            self._start(self.command(["socat", inside, f"TCP:{self.gateway}:{relay}"]))
        for port in ports:
            self._wait_listening(port)

    def _start(self, argv: list[str]) -> None:
        self._processes.append(
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )

    def _wait_listening(self, port: int) -> None:
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), 1).close()"
        give_up = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < give_up:
            done = subprocess.run(
                self.command(["python3", "-c", probe]), capture_output=True, check=False
            )
            if done.returncode == 0:
                return
            time.sleep(0.1)
        raise AssertionError(f"port {port} is not forwarded into {self.name}")

    def reaches(self, host: str, port: int) -> bool:
        """Whether a TCP connection from inside to host:port is accepted."""
        probe = f"import socket; socket.create_connection(({host!r}, {port}), 3).close()"
        done = subprocess.run(
            self.command(["python3", "-c", probe]), capture_output=True, check=False, timeout=10
        )
        return done.returncode == 0

    def close(self) -> None:
        for process in self._processes:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # Whatever else still runs in there (a test's processes that outlived it).
        pids = subprocess.run(
            ["ip", "netns", "pids", self.name], capture_output=True, text=True, check=False
        ).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", self.name], check=False)
        veth = _veth(self.name)
        give_up = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < give_up and _link_exists(veth):
            time.sleep(0.01)  # the host side lingers a few ms after the namespace goes


@contextlib.contextmanager
def remote_host(ports: Sequence[int]) -> Iterator[TestHost]:
    """A namespace reaching `ports` of this host's loopback, and nothing else of it."""
    tag = f"{os.getpid() % 100000:05d}"
    name, veth = f"fp{tag}", _veth(f"fp{tag}")
    subnet = os.getpid() % 250
    gateway, address = f"10.231.{subnet}.1", f"10.231.{subnet}.2"
    _ip("netns", "add", name)
    host = TestHost(name, address, gateway)
    try:
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
        _ip("addr", "add", f"{gateway}/30", "dev", veth)
        _ip("link", "set", veth, "up")
        _ip("-n", name, "addr", "add", f"{address}/30", "dev", "eth0")
        _ip("-n", name, "link", "set", "eth0", "up")
        _ip("-n", name, "link", "set", "lo", "up")
        host.forward(ports)
        yield host
    finally:
        host.close()


def _unused_port() -> int:
    """A port no socket of this namespace holds, on any address."""
    with socket.socket(socket.AF_INET6) as probe:
        probe.bind(("::", 0))
        return int(probe.getsockname()[1])


def _veth(name: str) -> str:
    return f"{name}h"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _link_exists(name: str) -> bool:
    done = subprocess.run(["ip", "link", "show", name], capture_output=True, check=False)
    return done.returncode == 0
