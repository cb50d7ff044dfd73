"""The WAN relay against small real TCP servers on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from workers.lab.relay import Relay, RelayHost, RelaySpec, control, new_event_loop

REPO = Path(__file__).resolve().parents[3]
PATTERN = bytes(range(256)) * 4096  # 1 MiB


class TcpServer:
    """A loopback server running `handle` in a thread per accepted connection."""

    def __init__(self, handle: Callable[[TcpServer, socket.socket], None]) -> None:
        self._handle = handle
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.accepted = 0
        self.bytes_sent = 0
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def close(self) -> None:
        self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._sock.close()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError, EOFError):
            self._handle(self, conn)


def echo(server: TcpServer, conn: socket.socket) -> None:
    while data := conn.recv(1 << 20):
        conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)


def stream_on_request(server: TcpServer, conn: socket.socket) -> None:
    """Read an 8-byte count, send that many bytes of PATTERN (repeated), then close."""
    (remaining,) = struct.unpack("!Q", recv_exactly(conn, 8))
    view = memoryview(PATTERN)
    while remaining:
        n = conn.send(view[: min(remaining, len(view))])
        server.bytes_sent += n
        remaining -= n


def expected_stream(n: int) -> bytes:
    return (PATTERN * (n // len(PATTERN) + 1))[:n]


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"EOF after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


def recv_until_closed(sock: socket.socket) -> tuple[bytes, str]:
    """All bytes until the peer closes, and how it closed: "eof" or "reset"."""
    data = bytearray()
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except ConnectionResetError:
            return bytes(data), "reset"
        if not chunk:
            return bytes(data), "eof"
        data += chunk


def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])


def spec(target_port: int, name: str = "r", **link: Any) -> RelaySpec:
    return RelaySpec(name, 0, "127.0.0.1", target_port, **link)


@pytest.fixture
def servers() -> Iterator[Callable[..., TcpServer]]:
    started: list[TcpServer] = []

    def start(handle: Callable[[TcpServer, socket.socket], None] = echo) -> TcpServer:
        server = TcpServer(handle)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def streamer(servers: Callable[..., TcpServer]) -> TcpServer:
    return servers(stream_on_request)


@pytest.fixture
def relays() -> Iterator[Callable[..., RelayHost]]:
    hosts: list[RelayHost] = []

    def start(*specs: RelaySpec, control_socket: Path | None = None) -> RelayHost:
        host = RelayHost(specs, control_socket=control_socket)
        host.start()
        hosts.append(host)
        return host

    yield start
    for host in hosts:
        host.stop()


def connect(host: RelayHost, name: str = "r") -> socket.socket:
    return socket.create_connection(("127.0.0.1", host.relay(name).port), timeout=5)


def read_new_connection(host: RelayHost) -> tuple[bytes, str]:
    """Connect and read until closed; a reset may already arrive during connect()."""
    try:
        sock = connect(host)
    except ConnectionResetError:
        return b"", "reset"
    with sock:
        return recv_until_closed(sock)


def request_stream(sock: socket.socket, n: int) -> None:
    sock.sendall(struct.pack("!Q", n))


def test_bytes_pass_through_intact_both_ways(servers, relays) -> None:
    host = relays(spec(servers().port, rtt_ms=10))
    payload = os.urandom(4 << 20)
    with connect(host) as sock:

        def send() -> None:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)

        sender = threading.Thread(target=send)
        sender.start()
        echoed, how = recv_until_closed(sock)
        sender.join()
    assert how == "eof"
    assert hashlib.sha256(echoed).digest() == hashlib.sha256(payload).digest()


def reply_after_eof(server: TcpServer, conn: socket.socket) -> None:
    received = 0
    while data := conn.recv(1 << 20):
        received += len(data)
    conn.sendall(f"got {received}".encode())


def test_half_close_reaches_the_server_which_can_still_answer(servers, relays) -> None:
    host = relays(spec(servers(reply_after_eof).port, rtt_ms=10))
    with connect(host) as sock:
        sock.sendall(b"x" * 100_000)
        sock.shutdown(socket.SHUT_WR)
        assert recv_until_closed(sock) == (b"got 100000", "eof")
    assert wait_for(lambda: host.stats()["r"].connections_open == 0)


def reset_at_once(server: TcpServer, conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_target_reset_closes_the_client_connection(servers, relays) -> None:
    host = relays(spec(servers(reset_at_once).port, rtt_ms=5))
    with connect(host) as sock:
        sock.sendall(b"hello")
        assert recv_until_closed(sock)[0] == b""
    assert wait_for(lambda: host.stats()["r"].connections_open == 0)


def count_timers_while_relaying(rtt_ms: float, target_port: int) -> int:
    loop = new_event_loop()
    timers = 0
    schedule = loop.call_at

    def counting_call_at(*args, **kwargs):
        nonlocal timers
        timers += 1
        return schedule(*args, **kwargs)

    async def relay_a_megabyte() -> None:
        relay = Relay(spec(target_port, rtt_ms=rtt_ms))
        await relay.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        writer.write(os.urandom(1 << 20))
        writer.write_eof()
        assert len(await reader.read()) == 1 << 20
        writer.close()
        await relay.stop()

    loop.call_at = counting_call_at
    try:
        loop.run_until_complete(relay_a_megabyte())
    finally:
        loop.close()
    return timers


def test_zero_rtt_adds_no_timers(servers) -> None:
    target_port = servers().port
    assert count_timers_while_relaying(0.0, target_port) == 0
    assert count_timers_while_relaying(2.0, target_port) > 0


def test_counters_count_delivered_bytes_in_each_direction(streamer, relays) -> None:
    host = relays(spec(streamer.port, rtt_ms=2))
    with connect(host) as sock:
        request_stream(sock, 300_000)
        data, how = recv_until_closed(sock)
    assert (len(data), how) == (300_000, "eof")
    assert wait_for(lambda: host.stats()["r"].connections_open == 0)
    stats = host.stats()["r"]
    assert (stats.bytes_up, stats.bytes_down, stats.connections_total) == (8, 300_000, 1)


@pytest.mark.parametrize("rtt_ms", [0.0, 30.0])
def test_ping_pong_round_trip_takes_at_least_the_rtt(servers, relays, rtt_ms) -> None:
    host = relays(spec(servers().port, rtt_ms=rtt_ms))
    with connect(host) as sock:
        for _ in range(5):
            started = time.monotonic()
            sock.sendall(b"ping")
            assert recv_exactly(sock, 4) == b"ping"
            assert time.monotonic() - started >= rtt_ms / 1000


def test_streaming_is_not_limited_to_one_chunk_per_round_trip(streamer, relays) -> None:
    # 20 MB at one 64 KiB read per 40 ms would take 12 s; pipelined it takes a fraction.
    host = relays(spec(streamer.port, rtt_ms=40))
    with connect(host) as sock:
        started = time.monotonic()
        request_stream(sock, 20_000_000)
        data, _ = recv_until_closed(sock)
        elapsed_s = time.monotonic() - started
    assert len(data) == 20_000_000
    assert elapsed_s < 2.0


def test_bandwidth_cap_holds_the_transfer_to_the_configured_rate(streamer, relays) -> None:
    host = relays(spec(streamer.port, bandwidth_mbps=5.0))
    with connect(host) as sock:
        started = time.monotonic()
        request_stream(sock, 1_000_000)
        data, _ = recv_until_closed(sock)
        elapsed_s = time.monotonic() - started
    assert data == expected_stream(1_000_000)
    assert elapsed_s >= 0.9 * 1_000_000 / 5e6


def timed_stream(host: RelayHost, name: str, n: int, took: dict[str, float]) -> None:
    with connect(host, name) as sock:
        started = time.monotonic()
        request_stream(sock, n)
        data, _ = recv_until_closed(sock)
        took[f"{name}-{threading.get_ident()}"] = time.monotonic() - started
    assert data == expected_stream(n)


@pytest.mark.parametrize("relay_names", [("r", "r"), ("r", "s")], ids=["one-relay", "two-relays"])
def test_bandwidth_cap_is_shared_by_every_connection_on_the_link(
    streamer, relays, relay_names
) -> None:
    # A WAN link's rate is shared: two connections at once each get about half of it, also
    # through two relays of one site. Capped per connection, each would take 0.2 s; shared,
    # each waits for the other's slices and ends after ~0.4 s (a lower bound: load on the
    # machine only makes it longer).
    host = relays(
        spec(streamer.port, name="r", bandwidth_mbps=5.0, link="site"),
        spec(streamer.port, name="s", bandwidth_mbps=5.0, link="site"),
    )
    took: dict[str, float] = {}
    threads = [
        threading.Thread(target=timed_stream, args=(host, name, 1_000_000, took))
        for name in relay_names
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(took) == 2
    assert min(took.values()) >= 0.8 * 2_000_000 / 5e6


def test_a_capped_link_with_a_delay_delivers_a_long_stream_intact(streamer, relays) -> None:
    # Chunks falling due while the link releases others once made it spin forever on a
    # stale clock (about one such stream in three stalled).
    host = relays(spec(streamer.port, rtt_ms=1.0, bandwidth_mbps=100.0))
    with connect(host) as sock:
        sock.settimeout(10)
        request_stream(sock, 20_000_000)
        data, how = recv_until_closed(sock)
    assert (len(data), how) == (20_000_000, "eof")
    assert data == expected_stream(20_000_000)


def test_relays_sharing_a_link_must_agree_on_its_bandwidth(streamer) -> None:
    with pytest.raises(ValueError, match="link 'site' has bandwidth_mbps 5 in another relay"):
        RelayHost(
            [
                spec(streamer.port, name="r", bandwidth_mbps=5.0, link="site"),
                spec(streamer.port, name="s", bandwidth_mbps=8.0, link="site"),
            ]
        )
    with pytest.raises(ValueError, match="link 'site' is capped in some relays"):
        RelayHost(
            [
                spec(streamer.port, name="r", bandwidth_mbps=5.0, link="site"),
                spec(streamer.port, name="s", link="site"),
            ]
        )


def test_window_stops_reading_from_the_target_while_the_client_does_not_read(
    streamer, relays
) -> None:
    host = relays(spec(streamer.port, rtt_ms=2, window_bytes=256 * 1024))
    total = 64 << 20
    with connect(host) as sock:
        request_stream(sock, total)
        time.sleep(0.5)
        # Kernel socket buffers on loopback hold ~20 MB at most along the way; without the
        # window the relay would have read all 64 MB into memory by now.
        assert streamer.bytes_sent < 48 << 20
        data, _ = recv_until_closed(sock)
    assert data == expected_stream(total)


@pytest.mark.parametrize("rtt_ms", [0.0, 10.0])
def test_hang_mode_stalls_open_connections_until_normal(servers, relays, rtt_ms) -> None:
    host = relays(spec(servers().port, rtt_ms=rtt_ms))
    with connect(host) as sock:
        sock.sendall(b"before")
        assert recv_exactly(sock, 6) == b"before"
        host.set_mode("r", "hang")
        sock.sendall(b"during")
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(1)
        host.set_mode("r", "normal")
        sock.settimeout(5)
        assert recv_exactly(sock, 6) == b"during"


def test_hang_mode_accepts_new_connections_but_never_answers(servers, relays) -> None:
    server = servers()
    host = relays(spec(server.port))
    host.set_mode("r", "hang")
    with connect(host) as sock:
        sock.sendall(b"hello?")
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(1)
        assert wait_for(lambda: host.stats()["r"].bytes_up == 6)
    assert server.accepted == 0


def test_connections_accepted_while_hanging_are_released_once_client_and_hang_end(
    servers, relays
) -> None:
    host = relays(spec(servers().port))
    host.set_mode("r", "hang")
    with connect(host) as sock:
        sock.sendall(b"hello?")
    time.sleep(0.1)
    assert host.stats()["r"].connections_open == 1
    host.set_mode("r", "normal")
    assert wait_for(lambda: host.stats()["r"].connections_open == 0)


@pytest.mark.parametrize("rtt_ms", [0.0, 5.0])
def test_hang_can_spare_the_connections_that_received_the_most(servers, relays, rtt_ms) -> None:
    host = relays(spec(servers().port, rtt_ms=rtt_ms))
    ahead, behind = connect(host), connect(host)
    with ahead, behind:
        for sock, size in ((ahead, 3000), (behind, 1000)):
            sock.sendall(b"a" * size)
            assert recv_exactly(sock, size) == b"a" * size
        host.set_mode("r", "hang", spare=1)
        assert host.relay("r").describe()["spare"] == 1
        ahead.sendall(b"ping")
        behind.sendall(b"pong")
        assert recv_exactly(ahead, 4) == b"ping"
        behind.settimeout(0.3)
        with pytest.raises(TimeoutError):
            behind.recv(4)
        behind.settimeout(5)
        host.set_mode("r", "normal")
        assert recv_exactly(behind, 4) == b"pong"
        assert host.relay("r").describe()["spare"] == 0


@pytest.mark.parametrize("rtt_ms", [0.0, 10.0])
def test_cut_mode_delivers_exactly_n_bytes_then_resets(streamer, relays, rtt_ms) -> None:
    host = relays(spec(streamer.port, rtt_ms=rtt_ms))
    with connect(host) as sock:
        host.set_mode("r", "cut", cut_after=123_457)
        request_stream(sock, 10_000_000)
        data, how = recv_until_closed(sock)
    assert data == expected_stream(123_457)
    assert how == "reset"
    assert host.stats()["r"].bytes_down == 123_457


def test_cut_mode_resets_new_connections_until_mode_is_set_again(streamer, relays) -> None:
    host = relays(spec(streamer.port))
    host.set_mode("r", "cut", cut_after=0)
    assert read_new_connection(host) == (b"", "reset")
    host.set_mode("r", "normal")
    with connect(host) as sock:
        request_stream(sock, 1000)
        assert recv_until_closed(sock) == (expected_stream(1000), "eof")


def test_cut_budget_is_shared_by_all_connections(streamer, relays) -> None:
    host = relays(spec(streamer.port, rtt_ms=5))
    first, second = connect(host), connect(host)
    with first, second:
        host.set_mode("r", "cut", cut_after=500_000)
        request_stream(first, 400_000)
        assert recv_until_closed(first) == (expected_stream(400_000), "eof")
        request_stream(second, 400_000)
        data, how = recv_until_closed(second)
    assert (data, how) == (expected_stream(100_000), "reset")


def test_unreachable_target_closes_the_client_and_the_relay_keeps_serving(relays) -> None:
    host = relays(spec(free_port()))
    for _ in range(2):
        assert read_new_connection(host)[0] == b""
    assert wait_for(lambda: host.stats()["r"].connections_open == 0)
    assert host.stats()["r"].connections_total == 2


def test_stop_closes_the_listener_and_every_connection(servers) -> None:
    host = RelayHost([spec(servers().port, rtt_ms=5)])
    host.start()
    port = host.relay("r").port
    try:
        with connect(host) as sock:
            sock.sendall(b"ping")
            assert recv_exactly(sock, 4) == b"ping"
            host.set_mode("r", "hang")
            sock.sendall(b"stalled")
            host.stop()
            assert recv_until_closed(sock)[0] == b""
    finally:
        host.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_set_mode_rejects_bad_input_with_clear_errors(servers, relays) -> None:
    host = relays(spec(servers().port))
    with pytest.raises(ValueError, match="unknown relay mode 'slow'"):
        host.set_mode("r", "slow")
    with pytest.raises(ValueError, match="cut_after must be >= 0"):
        host.set_mode("r", "cut", cut_after=-1)
    with pytest.raises(ValueError, match="only applies to mode 'cut'"):
        host.set_mode("r", "hang", cut_after=10)
    with pytest.raises(ValueError, match="spare must be >= 0"):
        host.set_mode("r", "hang", spare=-1)
    with pytest.raises(ValueError, match="spare only applies to mode 'hang'"):
        host.set_mode("r", "cut", spare=1)
    with pytest.raises(KeyError, match="no relay named 'nope'"):
        host.set_mode("nope", "normal")
    assert host.relay("r").mode == "normal"


def test_a_relay_answers_on_both_loopback_addresses_on_one_port(streamer, relays) -> None:
    # One relay, one port, one set of counters, whichever family the client uses: a site
    # reached over IPv6 crosses the same link as over IPv4.
    host = relays(spec(streamer.port, rtt_ms=2))
    port = host.relay("r").port
    for address in ("127.0.0.1", "::1"):
        with socket.create_connection((address, port), timeout=5) as sock:
            request_stream(sock, 100_000)
            assert recv_until_closed(sock) == (expected_stream(100_000), "eof")
    assert wait_for(lambda: host.stats()["r"].connections_open == 0)
    stats = host.stats()["r"]
    assert (stats.connections_total, stats.bytes_down) == (2, 200_000)


def test_the_cap_of_a_link_is_shared_by_its_ipv4_and_ipv6_clients(streamer, relays) -> None:
    host = relays(spec(streamer.port, bandwidth_mbps=5.0, link="site"))
    port, took = host.relay("r").port, {}

    def stream(address: str) -> None:
        with socket.create_connection((address, port), timeout=5) as sock:
            started = time.monotonic()
            request_stream(sock, 1_000_000)
            assert recv_until_closed(sock)[0] == expected_stream(1_000_000)
            took[address] = time.monotonic() - started

    threads = [threading.Thread(target=stream, args=(a,)) for a in ("127.0.0.1", "::1")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(took) == 2
    assert min(took.values()) >= 0.8 * 2_000_000 / 5e6


def test_stop_closes_the_ipv6_listener_too(servers) -> None:
    host = RelayHost([spec(servers().port)])
    host.start()
    port = host.relay("r").port
    socket.create_connection(("::1", port), timeout=5).close()
    host.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("::1", port), timeout=5)


def test_host_start_fails_clearly_when_the_ipv6_port_is_taken() -> None:
    with socket.create_server(("::1", 0), family=socket.AF_INET6) as taken:
        port = taken.getsockname()[1]
        host = RelayHost([RelaySpec("a", port, "127.0.0.1", 1)])
        with pytest.raises(OSError, match=f"relay 'a': cannot listen on ::1:{port}"):
            host.start()
        socket.create_connection(("::1", port), timeout=5).close()  # still the other's


def test_host_start_fails_clearly_when_a_port_is_taken(servers) -> None:
    taken = servers()
    host = RelayHost([spec(taken.port, name="a"), RelaySpec("b", taken.port, "127.0.0.1", 1)])
    with pytest.raises(OSError, match=f"relay 'b': cannot listen on 127.0.0.1:{taken.port}"):
        host.start()


def test_spec_round_trips_through_json_and_rejects_bad_fields() -> None:
    original = RelaySpec(
        "site", 9000, "127.0.0.1", 1094, rtt_ms=26, bandwidth_mbps=12.5, link="near"
    )
    assert RelaySpec.from_json(json.loads(json.dumps(original.to_json()))) == original
    with pytest.raises(ValueError, match="unknown keys: rtt"):
        RelaySpec.from_json({**original.to_json(), "rtt": 3})
    with pytest.raises(ValueError, match="'target_port' must be an integer"):
        RelaySpec.from_json({**original.to_json(), "target_port": "1094"})
    with pytest.raises(ValueError, match="rtt_ms must be >= 0"):
        RelaySpec("site", 9000, "127.0.0.1", 1094, rtt_ms=-1)


def test_control_socket_reports_stats_and_changes_mode(streamer, relays, tmp_path) -> None:
    path = tmp_path / "c.sock"
    host = relays(spec(streamer.port), control_socket=path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with connect(host) as sock:
        request_stream(sock, 1000)
        recv_until_closed(sock)
    assert control(path, {"op": "mode", "relay": "r", "mode": "cut", "cut_after": 5}) == {
        "ok": True
    }
    answer = control(path, {"op": "stats"})
    assert answer["ok"] is True
    relay = answer["relays"]["r"]
    assert relay["bytes_up"] == 8
    assert relay["bytes_down"] == 1000
    assert relay["connections_total"] == 1
    assert (relay["mode"], relay["cut_after"]) == ("cut", 5)
    assert control(path, {"op": "mode", "relay": "r", "mode": "hang", "spare": 2}) == {"ok": True}
    assert relay_stats(path, "r")["spare"] == 2


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ({"op": "reboot"}, "unknown op 'reboot'"),
        ({"op": "mode", "relay": "x", "mode": "hang"}, "unknown relay 'x'"),
        ({"op": "mode", "relay": "r", "mode": "slow"}, "unknown relay mode 'slow'"),
        ({"op": "mode", "relay": "r", "mode": "cut", "cut_after": -3}, "cut_after must be >= 0"),
        ({"op": "mode", "relay": "r", "mode": "cut", "cut_after": "3"}, "must be an integer"),
        ({"op": "mode", "relay": "r", "mode": "hang", "spare": True}, "spare must be an integer"),
        ({"op": "mode", "relay": "r", "mode": "normal", "spare": 2}, "only applies to mode 'hang'"),
        ({"op": "stats", "verbose": True}, "takes no other keys"),
    ],
)
def test_control_socket_names_the_problem_in_bad_requests(
    servers, relays, tmp_path, request_, error
) -> None:
    path = tmp_path / "c.sock"
    relays(spec(servers().port), control_socket=path)
    answer = control(path, request_)
    assert answer["ok"] is False
    assert error in str(answer["error"])


def test_control_socket_answers_malformed_json(servers, relays, tmp_path) -> None:
    path = tmp_path / "c.sock"
    relays(spec(servers().port), control_socket=path)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(str(path))
        sock.sendall(b"{not json\n")
        answer = json.loads(sock.makefile("rb").readline())
    assert answer == {"ok": False, "error": "request is not one line of JSON"}


def start_cli(tmp_path: Path, *specs: RelaySpec) -> tuple[subprocess.Popen[bytes], Path, Path]:
    config = tmp_path / "relays.json"
    config.write_text(json.dumps({"relays": [s.to_json() for s in specs]}))
    sock_path, pid_path = tmp_path / "c.sock", tmp_path / "relay.pid"
    command = [sys.executable, "-m", "workers.lab.relay", "--config", str(config)]
    command += ["--control", str(sock_path), "--pid-file", str(pid_path)]
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE)
    return process, sock_path, pid_path


def relay_stats(sock_path: Path, name: str = "site-a") -> dict[str, object]:
    relays = control(sock_path, {"op": "stats"})["relays"]
    assert isinstance(relays, dict)
    return relays[name]


def test_cli_serves_until_sigterm_and_removes_pid_file_and_socket(servers, tmp_path) -> None:
    port = free_port()
    process, sock_path, pid_path = start_cli(
        tmp_path, RelaySpec("site-a", port, "127.0.0.1", servers().port, rtt_ms=4)
    )
    try:
        assert wait_for(pid_path.exists, timeout_s=10)
        assert int(pid_path.read_text()) == process.pid
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"hello")
            assert recv_exactly(sock, 5) == b"hello"
        assert wait_for(lambda: relay_stats(sock_path)["connections_open"] == 0)
        assert relay_stats(sock_path) == {
            "bytes_up": 5,
            "bytes_down": 5,
            "connections_total": 1,
            "connections_open": 0,
            "mode": "normal",
            "cut_after": None,
            "cut_fired": False,
            "spare": 0,
        }
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
    finally:
        process.kill()
    assert process.returncode == 0
    assert not pid_path.exists()
    assert not sock_path.exists()
    assert f"relay site-a: 127.0.0.1:{port} -> 127.0.0.1:" in stderr.decode()


def test_cli_exits_with_an_error_when_the_port_is_taken(servers, tmp_path) -> None:
    taken = servers()
    process, sock_path, pid_path = start_cli(
        tmp_path, RelaySpec("site-a", taken.port, "127.0.0.1", taken.port)
    )
    _, stderr = process.communicate(timeout=10)
    assert process.returncode == 1
    assert f"cannot listen on 127.0.0.1:{taken.port}" in stderr.decode()
    assert not pid_path.exists()
    assert not sock_path.exists()


def test_relay_imports_neither_django_nor_celery() -> None:
    code = "import sys, workers.lab.relay; print(sorted({m.split('.')[0] for m in sys.modules}))"
    modules = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert "django" not in modules
    assert "celery" not in modules
