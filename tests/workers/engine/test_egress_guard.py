"""The egress guard: every connection a run's processes make passes the policy when it is
made, XrdCl's and xrdcp's redirections included (docs/engine.md, "Egress policy")."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from tests.redirecting_server import wait_listening
from tests.servers import free_port
from workers.engine.driver import run_probe
from workers.engine.egress import EgressPolicy
from workers.engine.egress_guard import EgressGuard, GuardLink, parse_sockaddr
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.params import Method, Pattern, RunParams
from workers.engine.processes import client_context
from workers.lab.servers import SERVER_USER, runs_as_root, server_user_ids

KiB = 1024
# The setup: the policy allows the server at 127.0.0.1 and nothing else on loopback.
ONLY_127_0_0_1 = EgressPolicy.allowing(["127.0.0.1/32"])
ALL_LOOPBACK = EgressPolicy.allowing(["127.0.0.0/8"])
ELSEWHERE = "127.0.0.2"


@dataclass
class Listener:
    """A TCP listener at 127.0.0.2 that records every connection reaching it."""

    port: int
    peers: list[tuple[str, int]] = field(default_factory=list)


@pytest.fixture
def elsewhere() -> Iterator[Listener]:
    server = socket.create_server((ELSEWHERE, 0))
    listener = Listener(server.getsockname()[1])

    def accept() -> None:
        while True:
            try:
                connection, peer = server.accept()
            except OSError:
                return
            listener.peers.append(peer)
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener
    server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join(timeout=5)


@pytest.fixture
def redirecting_server(elsewhere: Listener) -> Iterator[str]:
    """A plain data server (not a manager) at 127.0.0.1 whose /store is redirected, by
    xrootd.redirect, to the listener at 127.0.0.2; yields the URL of a 1 MiB file there."""
    folder = Path(tempfile.mkdtemp(prefix="fedprobe-redirecting-", dir="/tmp"))
    (folder / "data" / "store").mkdir(parents=True)
    (folder / "data" / "store" / "file").write_bytes(os.urandom(1024 * KiB))
    (folder / "admin").mkdir()
    port = free_port()
    config = folder / "xrootd.cfg"
    config.write_text(
        "\n".join(
            (
                "all.role server",
                f"xrd.port {port}",
                "xrd.allow host 127.0.0.1",
                "xrd.network nodnr",
                "all.export /store r/o",
                f"oss.localroot {folder / 'data'}",
                f"all.adminpath {folder / 'admin'}",
                f"all.pidpath {folder / 'admin'}",
                f"xrootd.redirect {ELSEWHERE}:{elsewhere.port} /store",
            )
        )
        + "\n"
    )
    argv = ["xrootd", "-c", str(config), "-l", str(folder / "admin" / "xrootd.log")]
    if runs_as_root():
        argv += ["-R", SERVER_USER]
        folder.chmod(0o755)
        uid, gid = server_user_ids()
        os.chown(folder / "admin", uid, gid)
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        wait_listening(port, process)
        yield f"root://127.0.0.1:{port}//store/file"
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def _params(url: str, method: Method, policy: EgressPolicy, **more: object) -> RunParams:
    return RunParams(
        urls=(url,), method=method, read_size=64 * KiB, clients=2, egress=policy, timeout_s=30,
        **more,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize("method", [Method.DIRECT, Method.COPY])
def test_a_data_server_redirecting_to_a_refused_address_ends_egress_and_nothing_reaches_it(
    redirecting_server: str, elsewhere: Listener, method: Method
) -> None:
    """XrdCl (direct) and xrdcp (copy) follow the redirection themselves: the guard stops
    their connect() to 127.0.0.2 before anything is sent."""
    result = run_probe(_params(redirecting_server, method, ONLY_127_0_0_1))
    assert result.run_error is None  # the preflight's stat is not redirected: clients are
    assert len(result.clients) == 2
    for client in result.clients:
        assert client.error is not None
        assert client.error.error_class == ErrorClass.EGRESS
        assert f"a connection to {ELSEWHERE}:{elsewhere.port}" in client.error.message
        assert "127.0.0.0/8 (loopback), which is not allowed here" in client.error.message
    assert elsewhere.peers == []


def test_the_preflight_is_guarded_too(redirecting_server: str, elsewhere: Listener) -> None:
    """A direct vector run opens the file in the preflight (to ask its readv limits)."""
    params = _params(redirecting_server, Method.DIRECT, ONLY_127_0_0_1, pattern=Pattern.VECTOR)
    result = run_probe(params)
    assert result.run_error is not None
    error_class, message = result.run_error
    assert error_class == ErrorClass.EGRESS
    assert f"a connection to {ELSEWHERE}:{elsewhere.port}" in message
    assert result.clients == []
    assert elsewhere.peers == []


@pytest.fixture
def passive_elsewhere(elsewhere: Listener) -> Iterator[str]:
    """An anonymous FTP server at 127.0.0.1 with one 1 MiB file whose passive-mode reply
    names the listener at 127.0.0.2 for the data connection (a server, or someone between us
    and it, sending the client's data connection to another host); yields the file's URL.
    It answers what globus-url-copy asks: the size (MLST) and the copy (PASV, RETR)."""
    server = socket.create_server(("127.0.0.1", 0))
    high, low = divmod(elsewhere.port, 256)
    replies = {
        "USER": "331 password please",
        "PASS": "230 logged in",
        "TYPE": "200 ok",
        "MODE": "200 ok",
        "MLST": "250- Listing\r\n Type=file;Size=1048576; /store/file\r\n250 End",
        "PASV": f"227 Entering Passive Mode (127,0,0,2,{high},{low})",
        "RETR": "150 Opening BINARY mode data connection",
        "QUIT": "221 bye",
    }

    def control(connection: socket.socket) -> None:
        with connection, connection.makefile("rwb", buffering=0) as channel:
            channel.write(b"220 fake ftp ready\r\n")
            for line in channel:
                verb = line.decode(errors="replace").split(" ", 1)[0].strip().upper()
                channel.write(replies.get(verb, "500 not understood").encode() + b"\r\n")
                if verb == "QUIT":
                    return

    def accept() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=control, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"ftp://127.0.0.1:{server.getsockname()[1]}/store/file"
    server.close()


def test_a_gridftp_passive_reply_naming_another_address_is_refused_before_it_connects(
    passive_elsewhere: str, elsewhere: Listener
) -> None:
    """globus-url-copy opens the data connection where the server's PASV reply says: the
    guard holds that connect() to the policy like any other (the size, on the control
    channel, is asked as usual)."""
    result = run_probe(_params(passive_elsewhere, Method.COPY, ONLY_127_0_0_1))
    assert result.run_error is None
    assert len(result.clients) == 2
    for client in result.clients:
        assert client.error is not None
        assert client.error.error_class == ErrorClass.EGRESS
        assert f"a connection to {ELSEWHERE}:{elsewhere.port}" in client.error.message
    assert elsewhere.peers == []
    # Where the policy allows 127.0.0.2, the same reply does take the data connections there.
    # (The server never ends the transfer: a short deadline ends the run.)
    allowed = run_probe(replace(_params(passive_elsewhere, Method.COPY, ALL_LOOPBACK), timeout_s=4))
    assert all(client.error is not None for client in allowed.clients)  # no data is sent
    assert {peer[0] for peer in elsewhere.peers} == {"127.0.0.1"}


def test_where_the_policy_allows_the_redirection_it_is_followed(
    redirecting_server: str, elsewhere: Listener
) -> None:
    """The setup above does redirect: allowed, XrdCl reaches 127.0.0.2 (a listener that
    speaks no XRootD, so the run fails there, but not with class egress)."""
    result = run_probe(_params(redirecting_server, Method.DIRECT, ALL_LOOPBACK))
    assert elsewhere.peers
    assert all(
        c.error is not None and c.error.error_class != ErrorClass.EGRESS for c in result.clients
    )


# -- the guard on its own ------------------------------------------------------------------


def connect_outcome(address: str, port: int) -> str:
    """'connected', or 'refused: ' and why."""
    try:
        socket.create_connection((address, port), timeout=5).close()
    except OSError as exc:
        return f"refused: {exc.strerror}"
    return "connected"


def _guarded_child(sink: Connection, link: GuardLink, allowed: int, refused: int) -> None:
    """In a process forked as clients are: attach, then connect in several ways."""
    link.attach("client 7")
    seen = {
        "allowed": connect_outcome("127.0.0.1", allowed),
        "refused": connect_outcome(ELSEWHERE, refused),
        "resolves": str(socket.getaddrinfo("localhost", allowed)[0][4][0]),
    }
    program = f"import socket; socket.create_connection(({ELSEWHERE!r}, {refused}))"
    tool = subprocess.run(
        [sys.executable, "-c", program], check=False, capture_output=True, text=True
    )
    seen["program"] = tool.stderr.strip().splitlines()[-1] if tool.returncode else "connected"
    sink.send(seen)


def answer_from_child(
    target: Callable[..., None], *args: object, then: Callable[[], None] = lambda: None
) -> dict[str, Any]:
    """Run `target(sink, *args)` in a client-like process; `then` runs while it waits."""
    ctx = client_context()
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=target, args=(sender, *args), daemon=True)
    process.start()
    sender.close()
    try:
        then()
        assert receiver.poll(60), "the child did not answer"
        answer: dict[str, Any] = receiver.recv()
        return answer
    finally:
        process.join(timeout=10)


def test_a_guarded_process_and_the_programs_it_starts_connect_only_where_allowed(
    elsewhere: Listener,
) -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as here,
        EgressGuard.running(ONLY_127_0_0_1) as guard,
    ):
        assert guard is not None
        seen = answer_from_child(_guarded_child, guard.link, here.getsockname()[1], elsewhere.port)
        refusal = guard.refusal("client 7")
    assert seen["allowed"] == "connected"
    assert seen["refused"] == "refused: Permission denied"
    assert seen["program"] == "PermissionError: [Errno 13] Permission denied"
    assert seen["resolves"] in ("127.0.0.1", "::1")  # names still resolve under the guard
    assert elsewhere.peers == []
    assert refusal is not None
    assert f"a connection to {ELSEWHERE}:{elsewhere.port}" in refusal


def _orphaned_child(sink: Connection, link: GuardLink, port: int, attached: Any, gone: Any) -> None:
    link.attach("client 0")
    attached.set()
    gone.wait(30)
    sink.send({"connect": connect_outcome("127.0.0.1", port)})


def test_a_guarded_process_cannot_connect_once_its_guard_is_gone() -> None:
    """Fails closed: no answer means no connection, at once (not a hang)."""
    ctx = client_context()
    attached, gone = ctx.Event(), ctx.Event()
    with (
        socket.create_server(("127.0.0.1", 0)) as here,
        EgressGuard.running(ALL_LOOPBACK) as guard,
    ):
        assert guard is not None

        def close_the_guard() -> None:
            assert attached.wait(30)
            guard.close()
            gone.set()

        port = here.getsockname()[1]
        seen = answer_from_child(
            _orphaned_child, guard.link, port, attached, gone, then=close_the_guard
        )
    assert seen["connect"] == "refused: Function not implemented"


def test_a_host_without_seccomp_user_notification_refuses_guarded_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A kernel listing no user_notif action: a run with a policy does not start."""
    actions = tmp_path / "actions_avail"
    actions.write_text("kill_process kill_thread trap errno trace log allow\n")
    monkeypatch.setattr("workers.engine.egress_guard._ACTIONS_AVAILABLE", actions)
    result = run_probe(_params("root://127.0.0.1:1//f", Method.DIRECT, ALL_LOOPBACK))
    assert result.run_error is not None
    error_class, message = result.run_error
    assert error_class == ErrorClass.EGRESS
    assert "connections cannot be guarded on this host" in message
    with (
        pytest.raises(ProbeError, match="seccomp user notification"),
        EgressGuard.running(ALL_LOOPBACK),
    ):
        pass


def test_socket_addresses_are_read_as_the_kernel_lays_them_out() -> None:
    v4 = (
        socket.AF_INET.to_bytes(2, sys.byteorder) + (1094).to_bytes(2, "big") + bytes([10, 0, 0, 7])
    )
    assert parse_sockaddr(v4 + bytes(8)) == (parse_sockaddr(v4)[0], 1094)  # type: ignore[index]
    assert str(parse_sockaddr(v4)[0]) == "10.0.0.7"  # type: ignore[index]
    v6 = (
        socket.AF_INET6.to_bytes(2, sys.byteorder) + (443).to_bytes(2, "big") + bytes(4)
        + bytes.fromhex("20010db8000000000000000000000001") + bytes(4)
    )  # fmt: skip
    address, port = parse_sockaddr(v6)  # type: ignore[misc]
    assert (str(address), port) == ("2001:db8::1", 443)
    unix = socket.AF_UNIX.to_bytes(2, sys.byteorder) + b"/run/nscd/socket"
    assert parse_sockaddr(unix) is None
    assert parse_sockaddr(b"") is None
