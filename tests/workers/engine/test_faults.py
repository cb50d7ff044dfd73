"""Endpoints that hang, cut connections or are cancelled: runs end on time, records kept."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.workers.engine.conftest import FILE_16M, MiB, lab_file
from workers.engine import Method, Pattern, RunParams, run_probe
from workers.engine import params as engine_params
from workers.engine.driver import KILL_GRACE_S
from workers.engine.params import Operation

pytestmark = [pytest.mark.lab, pytest.mark.faults]


def test_hanging_endpoint_ends_as_timeout_within_the_deadline(lab: Any, relay_to: Any) -> None:
    host, url = relay_to("local-root", FILE_16M)
    host.set_mode("test", "hang")
    started = time.monotonic()
    run = run_probe(RunParams(urls=(url,), clients=2, timeout_s=4.0)).to_json()
    elapsed = time.monotonic() - started
    assert run["status"] == "timeout"
    assert elapsed < 4.0 + 3.0  # the deadline plus the kill grace, never XRootD's 1800 s
    assert {e["class"] for e in run["errors"]} == {"timeout"}


def test_endpoint_that_hangs_mid_read_times_out_and_other_clients_are_kept(
    lab: Any, relay_to: Any
) -> None:
    host, slow_url = relay_to("local-root", FILE_16M)
    fast_url, _ = lab_file(lab, "local-root", FILE_16M)
    hang_once_reading(host, after_bytes=2 * MiB)
    started = time.monotonic()
    # Client 0 reads through the relay, client 1 straight from the server.
    run = run_probe(
        RunParams(
            urls=(slow_url, fast_url), clients=2, read_size=64 * 1024, fraction=1.0, timeout_s=5.0
        )
    ).to_json()
    assert time.monotonic() - started < 5.0 + 3.0
    assert run["status"] == "partial"
    hung, kept = run["clients"]
    assert hung["status"] == "timeout"
    assert 2 * MiB <= hung["bytes_read"] < 16 * MiB
    assert kept["status"] == "ok" and kept["bytes_read"] == 16 * MiB


def test_endpoint_that_hangs_mid_read_times_out_by_the_derived_deadline(
    lab: Any, relay_to: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No --timeout: the deadline is derived from the plan (a short margin keeps this quick).
    monkeypatch.setattr(engine_params, "DEADLINE_MARGIN_S", 2.0)
    host, url = relay_to("local-root", FILE_16M, rtt_ms=5.0)
    hang_once_reading(host, after_bytes=MiB)
    started = time.monotonic()
    run = run_probe(RunParams(urls=(url,), read_size=64 * 1024, fraction=0.25)).to_json()
    elapsed = time.monotonic() - started
    assert run["status"] == "timeout"
    (client,) = run["clients"]
    assert MiB <= client["bytes_read"] < 4 * MiB
    assert run["preflight_rtt_ms"] > 0
    assert elapsed < run["deadline_s"] + KILL_GRACE_S + 3.0


def hang_once_reading(host: Any, after_bytes: int) -> None:
    """Switch the relay to hang once the clients have pulled `after_bytes` through it."""

    def watch() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if host.stats()["test"].bytes_down >= after_bytes:
                host.set_mode("test", "hang")
                return
            time.sleep(0.002)

    threading.Thread(target=watch, daemon=True).start()


@pytest.mark.parametrize("endpoint", ["local-root", "local-http"])
def test_connection_cut_mid_read_is_an_error_with_the_bytes_read_so_far(
    lab: Any, relay_to: Any, endpoint: str
) -> None:
    host, url = relay_to(endpoint, FILE_16M)
    run_probe(RunParams(urls=(url,), fraction=0.01))  # the preflight path works
    host.set_mode("test", "cut", cut_after=3 * MiB)
    run = run_probe(
        RunParams(urls=(url,), read_size=256 * 1024, fraction=1.0, timeout_s=20.0)
    ).to_json()
    assert run["status"] == "failed"
    (client,) = run["clients"]
    assert client["status"] in {"short-read", "refused"}
    assert 0 < client["bytes_read"] <= 3 * MiB
    assert client["error"]["wasted_s"] > 0


def test_cancel_stops_every_client_quickly_and_keeps_their_records(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_16M)
    started = time.monotonic()
    run = run_probe(
        RunParams(
            urls=(url,),
            clients=3,
            read_size=1024,
            fraction=1.0,
            method=Method.DIRECT,
            pattern=Pattern.RANDOM,
        ),
        should_cancel=lambda: time.monotonic() - started > 0.5,
    ).to_json()
    assert run["status"] == "cancelled"
    assert time.monotonic() - started < 5
    assert len(run["clients"]) == 3
    assert all(c["status"] == "cancelled" for c in run["clients"])
    assert sum(c["bytes_read"] for c in run["clients"]) > 0


def test_missing_file_fails_as_not_found_before_any_client_starts(lab: Any) -> None:
    url = lab.endpoint("local-root").file_url("/fedprobe/no-such-file")
    run = run_probe(RunParams(urls=(url,), clients=4)).to_json()
    assert run["status"] == "failed"
    assert run["errors"] == [
        {"class": "not-found", "message": run["errors"][0]["message"], "client": None}
    ]
    assert run["clients"] == []


def test_refused_port_fails_as_refused() -> None:
    run = run_probe(RunParams(urls=("root://127.0.0.1:9//f",), timeout_s=10)).to_json()
    assert run["status"] == "failed"
    assert run["errors"][0]["class"] == "refused"


def test_cancel_during_a_copy_stops_the_copy_tool_too(lab: Any, relay_to: Any) -> None:
    _, url = relay_to("local-root", FILE_16M, bandwidth_mbps=2.0)  # 16 MiB take ~8 s
    port = url.split(":")[2].split("/")[0]
    started = time.monotonic()
    run = run_probe(
        RunParams(urls=(url,), method=Method.COPY, clients=2),
        should_cancel=lambda: time.monotonic() - started > 1.0,
    ).to_json()
    assert run["status"] == "cancelled"
    assert time.monotonic() - started < 5
    assert copy_tools_reading_from(port) == []


def test_a_copy_whose_endpoint_hangs_mid_copy_ends_as_timeout_by_the_deadline(
    lab: Any, relay_to: Any
) -> None:
    """xrdcp, hung mid-transfer, is ended by the run's deadline, not by XRootD's own
    timeouts (60 s and more), and no xrdcp is left behind."""
    host, url = relay_to("local-root", FILE_16M, bandwidth_mbps=2.0)  # 16 MiB take ~8 s
    hang_once_reading(host, after_bytes=2 * MiB)
    started = time.monotonic()
    run = run_probe(RunParams(urls=(url,), method=Method.COPY, clients=2, timeout_s=6.0)).to_json()
    elapsed = time.monotonic() - started
    assert host.stats()["test"].bytes_down >= 2 * MiB  # the copies had started when it hung
    assert run["status"] == "timeout", run["errors"]
    assert {c["status"] for c in run["clients"]} == {"timeout"}
    assert elapsed < 6.0 + KILL_GRACE_S + 5.0
    assert copy_tools_reading_from(port_of(url)) == []


def test_a_copy_from_a_slow_drip_is_cut_off_at_the_deadline(lab: Any, relay_to: Any) -> None:
    """20 kB/s: the open and the stat pass, the 16 MiB copy would take 14 minutes."""
    host, url = relay_to("local-root", FILE_16M, bandwidth_mbps=0.02)
    started = time.monotonic()
    run = run_probe(RunParams(urls=(url,), method=Method.COPY, timeout_s=6.0)).to_json()
    elapsed = time.monotonic() - started
    assert run["status"] == "timeout", run["errors"]
    (client,) = run["clients"]
    assert client["status"] == "timeout"
    assert host.stats()["test"].bytes_down > 64 * 1024  # xrdcp was receiving the drip
    assert elapsed < 6.0 + KILL_GRACE_S + 5.0
    assert copy_tools_reading_from(port_of(url)) == []


def test_a_direct_read_from_a_slow_root_drip_is_cut_off_with_the_bytes_it_read(
    lab: Any, relay_to: Any
) -> None:
    """The root:// counterpart of the HTTP drip below (issue 10, item 2)."""
    host, url = relay_to("local-root", FILE_16M, bandwidth_mbps=0.02)
    started = time.monotonic()
    run = run_probe(
        RunParams(urls=(url,), read_size=16 * 1024, fraction=1.0, timeout_s=6.0)
    ).to_json()
    elapsed = time.monotonic() - started
    assert run["status"] == "timeout", run["errors"]
    (client,) = run["clients"]
    assert client["status"] == "timeout"
    assert elapsed < 6.0 + KILL_GRACE_S + 5.0
    assert 0 < client["bytes_read"] <= host.stats()["test"].bytes_down


def port_of(url: str) -> str:
    return str(urlsplit(url).port)


def copy_tools_reading_from(port: str) -> list[int]:
    """Pids of xrdcp processes whose command line names this port."""
    time.sleep(0.2)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        is_copy = argv[0].endswith(b"xrdcp") and port.encode() in b" ".join(argv)
        if is_copy and state != "Z":  # Z: dead, waiting to be reaped
            found.append(int(entry.name))
    return found


class DripServer:
    """An HTTP server that answers the open (HEAD, the one-byte GET) at once and then sends
    every other range a few bytes at a time: a slow drip the deadline has to cut off."""

    SIZE = MiB

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/drip"

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join()

    def _serve(self) -> None:
        self.listener.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            reader = conn.makefile("rb")
            while not self.stop.is_set():
                request = [line for line in iter(reader.readline, b"\r\n") if line]
                if not request:
                    return
                method = request[0].split()[0]
                ranges = next((r for r in request if r.lower().startswith(b"range:")), b"")
                if method == b"HEAD":
                    conn.sendall(self._head(200, f"Content-Length: {self.SIZE}"))
                elif b"bytes=0-0" in ranges:
                    conn.sendall(self._head(206, f"Content-Range: bytes 0-0/{self.SIZE}") + b"x")
                else:
                    self._drip(conn, ranges)

    def _drip(self, conn: socket.socket, ranges: bytes) -> None:
        first, last = (int(x) for x in ranges.split(b"=")[1].strip().split(b"-"))
        header = f"Content-Range: bytes {first}-{last}/{self.SIZE}"
        conn.sendall(self._head(206, header, length=last - first + 1))
        while not self.stop.is_set():
            conn.sendall(b"y" * 16)
            time.sleep(0.05)

    @staticmethod
    def _head(status: int, header: str, length: int = 1) -> bytes:
        lines = [f"HTTP/1.1 {status} X", header, "Connection: keep-alive"]
        if not header.startswith("Content-Length"):
            lines.append(f"Content-Length: {length if status == 206 else 0}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_a_slow_drip_is_cut_off_at_the_deadline_with_the_bytes_it_sent() -> None:
    drip = DripServer()
    try:
        started = time.monotonic()
        run = run_probe(
            RunParams(urls=(drip.url,), read_size=MiB, fraction=1.0, timeout_s=3.0)
        ).to_json()
        elapsed = time.monotonic() - started
    finally:
        drip.close()
    assert run["status"] == "timeout"
    assert elapsed < 3.0 + KILL_GRACE_S + 2.0
    (client,) = run["clients"]
    message = client["error"]["message"]
    assert "deadline passed after" in message
    received = int(message.split("deadline passed after ")[1].split(" of ")[0])
    assert received > 0
    assert client["bytes_read"] == received  # what the endpoint sent before the cut counts
    assert client["bytes_wire"] == received
    assert run["bytes_read"] == received


def test_a_storm_whose_endpoint_hangs_ends_by_its_own_requests_timeout(
    lab: Any, relay_to: Any
) -> None:
    """Every request of a storm carries the time left (deadline.Countdown, asked once a
    second): the client ends itself with class timeout by the deadline, not killed by the
    driver past it (whose message is "no answer by the run's deadline"). The endpoint hangs
    5 s into an 8 s run: a request carrying only XrdCl's RequestTimeout (the whole run's
    length, set as the client starts) would expire at ~12 s, past the kill at 10 s."""
    host, url = relay_to("local-root", FILE_16M)
    threading.Timer(5.0, host.set_mode, ("test", "hang")).start()
    started = time.monotonic()
    run = run_probe(
        RunParams(urls=(url,), operation=Operation.STAT, ops=engine_params.MAX_OPS, timeout_s=8.0)
    ).to_json()
    elapsed = time.monotonic() - started
    assert elapsed < 8.0 + KILL_GRACE_S + 3.0
    assert run["status"] == "timeout"
    (client,) = run["clients"]
    assert 0 < client["ops"] < engine_params.MAX_OPS
    assert client["error"]["class"] == "timeout"
    assert "no answer by the run's deadline" not in client["error"]["message"]
