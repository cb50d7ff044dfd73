"""Misbehaving servers for the error paths of the protocol backends."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator, Sequence

import pytest

ScriptServer = Callable[[Sequence[bytes]], int]


def _serve(listener: socket.socket, answers: Sequence[bytes], stop: threading.Event) -> None:
    """Answer the n-th connection's first request with answers[n] (the last one once they run
    out), then hang up. With no answers, accept connections and never say a word."""
    listener.settimeout(0.05)
    held = []
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        held.append(conn)
        if answers:
            _answer(conn, answers[min(len(held), len(answers)) - 1])
    for conn in held:
        conn.close()


def _answer(conn: socket.socket, answer: bytes) -> None:
    conn.settimeout(5)
    request = b""
    while b"\r\n\r\n" not in request and (data := conn.recv(65536)):
        request += data
    conn.sendall(answer)
    conn.close()


@contextlib.contextmanager
def _serving(answers: Sequence[bytes]) -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(listener, answers, stop), daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()


@pytest.fixture
def script_server() -> Iterator[ScriptServer]:
    """Starts loopback servers answering their n-th connection with answers[n], raw bytes;
    returns the port. Stopped after the test."""
    with contextlib.ExitStack() as stack:
        yield lambda answers: stack.enter_context(_serving(answers))


@pytest.fixture
def silent_port(script_server: ScriptServer) -> int:
    """A loopback port whose server accepts connections and never says a word."""
    return script_server(())


@pytest.fixture
def refused_port() -> int:
    """A loopback port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
