"""A TCP relay that adds a WAN round-trip time and a bandwidth cap in front of a loopback port.

The lab's kernel has no netem, so latency is emulated in user space: every chunk read from
one side is written to the other side rtt/2 later, in order, without waiting for earlier
chunks to be acknowledged, so a stream pipelines as it would over a long fat link. At most
`window_bytes` per direction and connection are held (reading pauses above it), which plays
the part of the TCP window. The bandwidth cap is a link's, shared by all its connections:
relays whose specs name the same `link` (a site's ports) share one rate in each direction
(`workers.lab.relay_link.Link`). For fault tests a relay can be told to hang (forward
nothing) or to cut every connection after N more bytes towards the clients.

Delays run on loop timers with sub-millisecond resolution (see `new_event_loop`): on the
lab VM a ping-pong through a 0.5 ms relay takes ~0.8 ms, through a 26 ms relay 26.6-26.8
ms, and one stream still moves 1-2 GB/s (benches/relay_throughput.py).

Run as a process by the lab: `python -m workers.lab.relay --config relays.json`; in a
test, `RelayHost` runs relays in a thread, or `Relay` runs on a loop of your own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import selectors
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TypeVar, cast

from workers.lab.relay_link import BlackHole, ClientSide, Connection, Link, Refused, reset

log = logging.getLogger(__name__)

MODES = ("normal", "hang", "cut")
LISTEN_HOST = "127.0.0.1"
# Each relay listens on both loopback addresses, on one port (the IPv4 one's, when the spec
# asks for any port): a site answers over IPv4 and IPv6, through the same link.
LISTEN_HOST_V6 = "::1"

_CONTROL_LINE_MAX = 64 * 1024
_CONTROL_READ_S = 5.0
_HOST_CALL_S = 10.0

_T = TypeVar("_T")


@dataclass(frozen=True)
class RelaySpec:
    """One relayed port: where it listens, where it forwards, and the link it emulates.

    `bandwidth_mbps` (MB/s, 1e6 bytes/s; None = unlimited) is the rate of `link` (default:
    the relay's own name), shared by every connection of every relay naming that link.
    """

    name: str
    listen_port: int
    target_host: str
    target_port: int
    rtt_ms: float = 0.0
    bandwidth_mbps: float | None = None
    window_bytes: int = 32 * 1024 * 1024
    link: str = ""

    @property
    def link_name(self) -> str:
        return self.link or self.name

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("relay name must not be empty")
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"relay {self.name!r}: listen_port {self.listen_port} out of range")
        if not self.target_host:
            raise ValueError(f"relay {self.name!r}: target_host must not be empty")
        if not 1 <= self.target_port <= 65535:
            raise ValueError(f"relay {self.name!r}: target_port {self.target_port} out of range")
        if not (math.isfinite(self.rtt_ms) and self.rtt_ms >= 0):
            raise ValueError(f"relay {self.name!r}: rtt_ms must be >= 0, got {self.rtt_ms}")
        bandwidth = self.bandwidth_mbps
        if bandwidth is not None and not (math.isfinite(bandwidth) and bandwidth > 0):
            raise ValueError(f"relay {self.name!r}: bandwidth_mbps must be > 0 or null")
        if self.window_bytes < 1:
            raise ValueError(f"relay {self.name!r}: window_bytes must be >= 1")

    def to_json(self) -> dict[str, object]:
        return {field.name: getattr(self, field.name) for field in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> RelaySpec:
        if not isinstance(data, Mapping):
            raise ValueError(f"relay spec must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {field.name for field in fields(cls)})
        if unknown:
            raise ValueError(f"relay spec has unknown keys: {', '.join(unknown)}")
        bandwidth = data.get("bandwidth_mbps")
        return cls(
            name=_json_str(data, "name"),
            listen_port=_json_int(data, "listen_port"),
            target_host=_json_str(data, "target_host"),
            target_port=_json_int(data, "target_port"),
            rtt_ms=_json_float(data, "rtt_ms", 0.0),
            bandwidth_mbps=None if bandwidth is None else _json_float(data, "bandwidth_mbps", 0),
            window_bytes=_json_int(data, "window_bytes", 32 * 1024 * 1024),
            link=_json_str(data, "link", ""),
        )


def _json_str(data: Mapping[str, object], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"relay spec: {key!r} must be a string, got {value!r}")
    return value


def _json_int(data: Mapping[str, object], key: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"relay spec: {key!r} must be an integer, got {value!r}")
    return value


def _json_float(data: Mapping[str, object], key: str, default: float) -> float:
    value = data.get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"relay spec: {key!r} must be a number, got {value!r}")
    return float(value)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose timers fire within a fraction of a millisecond, for running relays.

    asyncio's default epoll selector, and poll(), wait in whole milliseconds (rounded up),
    which turns the paper profile's 0.5 ms local site into ~2.3 ms. select() takes
    microseconds: measured here, 0.5 / 2 / 26 ms relays give 0.8 / 2.25 / 26.6 ms ping-pong
    round trips (the rest is the relay's own two hops). select() handles descriptors below
    1024: ~500 relayed connections per relay process, plenty for a lab.
    """
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


@dataclass
class RelayStats:
    """Byte and connection counters of one relay at one moment."""

    bytes_up: int
    bytes_down: int
    connections_total: int
    connections_open: int


def has_ipv6_loopback() -> bool:
    """Can a server listen on ::1 here? Not where IPv6 is off (some containers)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind((LISTEN_HOST_V6, 0))
    except OSError:
        return False
    return True


class Relay:
    """One listening port on 127.0.0.1 and ::1 relaying to one target through an emulated link.

    Mode "hang": open connections stop forwarding both ways (until the mode changes back);
    new ones are accepted and never answered: their bytes are read, counted as bytes_up and
    discarded, and they are never connected onwards, not even after the hang. With `spare`
    N, the N open connections that have delivered the most bytes to their clients go on as
    if nothing happened (one client of many ends, the others hang mid-read). Mode "cut":
    once `cut_after` more bytes have been delivered to clients (0 or None: at once), every
    connection is reset and new ones are reset on accept, until the mode is set again.
    Counters count bytes handed to the other side's socket. Methods are not thread-safe;
    use RelayHost from other threads. `link` is the capped link this relay shares with
    others (RelayHost passes it); without one, a capped spec gets a link of its own.
    """

    def __init__(self, spec: RelaySpec, link: Link | None = None) -> None:
        if link is None and spec.bandwidth_mbps is not None:
            link = Link(spec.link_name, spec.bandwidth_mbps)
        self.spec = spec
        self.link = link
        self.mode = "normal"
        self.cut_after: int | None = None
        self.spare = 0
        self.hang = False
        self.cut_budget: int | None = None
        self.cut_fired = False
        self.bytes_up = 0
        self.bytes_down = 0
        self.connections_total = 0
        self.connections_open = 0
        self.connections: set[Connection] = set()
        self.black_holes: set[BlackHole] = set()
        self._server: asyncio.Server | None = None
        self._server_v6: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The port actually listened on (differs from spec.listen_port when that is 0)."""
        if self._server is None:
            return self.spec.listen_port
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def stats(self) -> RelayStats:
        return RelayStats(
            bytes_up=self.bytes_up,
            bytes_down=self.bytes_down,
            connections_total=self.connections_total,
            connections_open=self.connections_open,
        )

    def describe(self) -> dict[str, object]:
        """Counters and mode as the control socket reports them."""
        return {
            "bytes_up": self.bytes_up,
            "bytes_down": self.bytes_down,
            "connections_total": self.connections_total,
            "connections_open": self.connections_open,
            "mode": self.mode,
            "cut_after": self.cut_after,
            "cut_fired": self.cut_fired,
            "spare": self.spare,
        }

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError(f"relay {self.spec.name!r} already started")
        self._server = await self._listen(LISTEN_HOST, self.spec.listen_port)
        if not has_ipv6_loopback():
            return  # IPv6 off here: the lab's endpoints then say IPv4 only
        try:
            self._server_v6 = await self._listen(LISTEN_HOST_V6, self.port)
        except OSError:
            self._server.close()
            self._server = None
            raise

    async def _listen(self, host: str, port: int) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        try:
            return await loop.create_server(self._new_protocol, host, port)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"relay {self.spec.name!r}: cannot listen on {host}:{port}: {exc.strerror}",
            ) from exc

    async def stop(self) -> None:
        server, self._server = self._server, None
        server_v6, self._server_v6 = self._server_v6, None
        for listening in (server, server_v6):
            if listening is not None:
                listening.close()
        connect_tasks = [conn.connect_task for conn in self.connections]
        for conn in list(self.connections):
            conn.abort()
        for hole in list(self.black_holes):
            hole.transport.abort()
        await asyncio.gather(*connect_tasks, return_exceptions=True)
        for listening in (server, server_v6):
            if listening is not None:
                await listening.wait_closed()
        await asyncio.sleep(0)  # let the aborted transports report connection_lost

    def set_mode(self, mode: str, cut_after: int | None = None, spare: int = 0) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown relay mode {mode!r}; expected one of {', '.join(MODES)}")
        if cut_after is not None:
            _check_count("cut_after", cut_after)
            if mode != "cut":
                raise ValueError(f"cut_after only applies to mode 'cut', not {mode!r}")
        _check_count("spare", spare)
        if spare and mode != "hang":
            raise ValueError(f"spare only applies to mode 'hang', not {mode!r}")
        was_hanging = self.hang
        self.mode = mode
        self.cut_after = cut_after
        self.spare = spare
        self.hang = mode == "hang"
        by_bytes = sorted(self.connections, key=lambda conn: conn.bytes_down, reverse=True)
        for rank, conn in enumerate(by_bytes):
            conn.spared = rank < spare
        self.cut_fired = False
        self.cut_budget = cut_after if mode == "cut" else None
        if mode == "cut" and not cut_after:
            self.fire_cut()
        if was_hanging and not self.hang:
            for conn in list(self.connections):
                conn.up.kick()
                conn.down.kick()
            for hole in list(self.black_holes):
                if hole.client_ended:
                    hole.transport.close()

    def fire_cut(self) -> None:
        self.cut_budget = None
        self.cut_fired = True
        for conn in list(self.connections):
            conn.cut()
        for hole in list(self.black_holes):
            reset(hole.transport)

    def connection_opened(self) -> None:
        self.connections_total += 1
        self.connections_open += 1

    def connection_closed(self) -> None:
        self.connections_open -= 1

    def _new_protocol(self) -> asyncio.Protocol:
        if self.cut_fired:
            return Refused(self)
        if self.hang:
            return BlackHole(self)
        return ClientSide(self)


class RelayHost:
    """Many relays on one asyncio loop, run in a daemon thread or in the foreground."""

    def __init__(self, specs: Sequence[RelaySpec], control_socket: Path | None = None) -> None:
        self._relays: dict[str, Relay] = {}
        ports: set[int] = set()
        links = _links(specs)
        for spec in specs:
            if spec.name in self._relays:
                raise ValueError(f"duplicate relay name {spec.name!r}")
            if spec.listen_port and spec.listen_port in ports:
                raise ValueError(f"relay {spec.name!r}: listen_port {spec.listen_port} used twice")
            ports.add(spec.listen_port)
            self._relays[spec.name] = Relay(spec, links.get(spec.link_name))
        self._control_path = control_socket
        self._control_server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("relay host already started")
        loop = new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="relay-host", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            asyncio.run_coroutine_threadsafe(self._start_async(), loop).result(_HOST_CALL_S)
        except BaseException:
            self._halt_loop()
            raise
        for relay in self._relays.values():
            spec = relay.spec
            bandwidth = f"{spec.bandwidth_mbps:g} MB/s" if spec.bandwidth_mbps else "unlimited"
            log.info(
                "relay %s: %s:%d -> %s:%d rtt %g ms bandwidth %s (link %s)",
                spec.name,
                LISTEN_HOST,
                relay.port,
                spec.target_host,
                spec.target_port,
                spec.rtt_ms,
                bandwidth,
                spec.link_name,
            )

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop_async(), loop).result(_HOST_CALL_S)
        finally:
            self._halt_loop()

    def relay(self, name: str) -> Relay:
        try:
            return self._relays[name]
        except KeyError:
            raise KeyError(f"no relay named {name!r}") from None

    def set_mode(self, name: str, mode: str, cut_after: int | None = None, spare: int = 0) -> None:
        relay = self.relay(name)
        self._in_loop(lambda: relay.set_mode(mode, cut_after, spare))

    def stats(self) -> dict[str, RelayStats]:
        return self._in_loop(lambda: {name: r.stats for name, r in self._relays.items()})

    def serve_forever(self, ready: Callable[[], None] | None = None) -> None:
        """Run until SIGTERM or SIGINT; call `ready` once every relay listens."""
        signals = {signal.SIGTERM, signal.SIGINT}
        # Blocked before the loop thread exists, so it inherits the mask and sigwait here
        # is the only place the signals can land.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
        try:
            self.start()
            try:
                if ready is not None:
                    ready()
                signal.sigwait(signals)
            finally:
                self.stop()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def _in_loop(self, call: Callable[[], _T]) -> _T:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or thread.ident == threading.get_ident():
            return call()

        async def run() -> _T:
            return call()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(_HOST_CALL_S)

    def _halt_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_HOST_CALL_S)
        if not thread.is_alive():
            loop.close()

    async def _start_async(self) -> None:
        try:
            for relay in self._relays.values():
                await relay.start()
            if self._control_path is not None:
                self._control_server = await self._start_control(self._control_path)
        except BaseException:
            await self._stop_async()
            raise

    async def _stop_async(self) -> None:
        if self._control_server is not None:
            self._control_server.close()
            await self._control_server.wait_closed()
            self._control_server = None
            if self._control_path is not None:
                self._control_path.unlink(missing_ok=True)
        for relay in self._relays.values():
            await relay.stop()

    async def _start_control(self, path: Path) -> asyncio.Server:
        _remove_stale_socket(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            os.fchmod(sock.fileno(), 0o600)  # the socket file takes this mode at bind
            sock.bind(str(path))
            os.chmod(path, 0o600)
        except OSError:
            sock.close()
            raise
        return await asyncio.start_unix_server(
            self._serve_control, sock=sock, limit=_CONTROL_LINE_MAX
        )

    async def _serve_control(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            try:
                line = await asyncio.wait_for(reader.readline(), _CONTROL_READ_S)
                answer = self._answer(line)
            except ValueError:
                answer = _failure(f"request longer than {_CONTROL_LINE_MAX} bytes")
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    def _answer(self, line: bytes) -> dict[str, object]:
        try:
            request = json.loads(line)
        except ValueError:
            return _failure("request is not one line of JSON")
        if not isinstance(request, dict):
            return _failure("request must be a JSON object")
        op = request.get("op")
        if op == "stats":
            return self._answer_stats(request)
        if op == "mode":
            return self._answer_mode(request)
        return _failure(f"unknown op {op!r}; expected 'stats' or 'mode'")

    def _answer_stats(self, request: dict[str, object]) -> dict[str, object]:
        if set(request) != {"op"}:
            return _failure("op 'stats' takes no other keys")
        relays = {name: relay.describe() for name, relay in self._relays.items()}
        return {"ok": True, "relays": relays}

    def _answer_mode(self, request: dict[str, object]) -> dict[str, object]:
        unknown = sorted(set(request) - {"op", "relay", "mode", "cut_after", "spare"})
        if unknown:
            return _failure(f"op 'mode' does not take {', '.join(unknown)}")
        name, mode, cut_after = request.get("relay"), request.get("mode"), request.get("cut_after")
        spare = request.get("spare", 0)
        if not isinstance(name, str) or name not in self._relays:
            return _failure(f"unknown relay {name!r}")
        if not isinstance(mode, str):
            return _failure(f"mode must be a string, got {mode!r}")
        try:
            self._relays[name].set_mode(mode, cast(int | None, cut_after), cast(int, spare))
        except ValueError as exc:
            return _failure(str(exc))
        return {"ok": True}


def _links(specs: Sequence[RelaySpec]) -> dict[str, Link]:
    """One shared Link per capped link name; relays naming one link must agree on its rate."""
    links: dict[str, Link] = {}
    for spec in specs:
        name, bandwidth = spec.link_name, spec.bandwidth_mbps
        known = links.get(name)
        if known is None and bandwidth is not None:
            if any(s.link_name == name and s.bandwidth_mbps is None for s in specs):
                raise ValueError(f"relay {spec.name!r}: link {name!r} is capped in some relays")
            links[name] = Link(name, bandwidth)
        elif known is not None and bandwidth != known.bandwidth_mbps:
            raise ValueError(
                f"relay {spec.name!r}: link {name!r} has bandwidth_mbps {known.bandwidth_mbps:g}"
                f" in another relay, not {bandwidth}"
            )
    return links


def _check_count(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _failure(message: str) -> dict[str, object]:
    return {"ok": False, "error": message}


def _remove_stale_socket(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(f"control socket path {path} exists and is not a socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink()
            return
    raise OSError(f"control socket {path} is in use by another process")


def control(
    socket_path: Path, request: dict[str, object], timeout_s: float = 5.0
) -> dict[str, object]:
    """Send one request to a relay process's control socket and return its answer.

    Raises OSError (TimeoutError included) when the socket does not answer and ValueError
    when the answer is not a JSON object; an answer with "ok": false is returned as is.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(socket_path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        answer = bytearray()
        while not answer.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    decoded = json.loads(answer)
    if not isinstance(decoded, dict):
        raise ValueError(f"control answer is not a JSON object: {bytes(answer)!r}")
    return cast(dict[str, object], decoded)


def load_config(path: Path) -> list[RelaySpec]:
    """Read `{"relays": [spec, ...]}` as written by the lab."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    relays = data.get("relays") if isinstance(data, dict) else None
    if not isinstance(relays, list):
        raise ValueError(f'{path}: expected {{"relays": [...]}}')
    specs = []
    for index, item in enumerate(relays):
        try:
            specs.append(RelaySpec.from_json(item))
        except ValueError as exc:
            raise ValueError(f"{path}: relays[{index}]: {exc}") from exc
    return specs


def _write_pid_file(path: Path) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(f"{os.getpid()}\n")
    partial.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.lab.relay",
        description="Relay loopback ports through an emulated WAN link (latency, bandwidth).",
    )
    parser.add_argument("--config", type=Path, required=True, help='JSON {"relays": [...]}')
    parser.add_argument("--control", type=Path, help="UNIX socket for stats and mode changes")
    parser.add_argument("--pid-file", type=Path, help="written once every relay listens")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s relay[%(process)d] %(message)s"
    )
    pid_file: Path | None = args.pid_file
    wrote_pid_file = False

    def ready() -> None:
        nonlocal wrote_pid_file
        if pid_file is not None:
            _write_pid_file(pid_file)
            wrote_pid_file = True

    try:
        host = RelayHost(load_config(args.config), control_socket=args.control)
        host.serve_forever(ready)
    except (OSError, ValueError) as exc:
        log.error("%s", exc)
        return 1
    finally:
        if wrote_pid_file and pid_file is not None:
            pid_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
