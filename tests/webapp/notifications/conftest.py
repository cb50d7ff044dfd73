"""Real receivers for notification tests: an HTTP server (http.server, on a thread) and an
SMTP server (aiosmtpd), on loopback ports chosen before they start, so that a test can
send to a receiver that is down (its port closed) and then start it. And regressions to
notify about, moved through their states by watch.states, as the watch moves them."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from tests.webapp.factories import EndpointFactory, VantagePointFactory
from webapp.watch.models import Regression, RegressionEvent
from webapp.watch.states import regression_set_state

T0 = datetime(2026, 11, 20, 3, 0, tzinfo=UTC)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Received:
    """One request the HTTP receiver got."""

    path: str
    headers: dict[str, str]
    body: Any
    at: float = field(default_factory=time.time)


@dataclass
class HttpReceiver:
    """A webhook receiver on 127.0.0.1:`port`: records each POST, answers `status` (and
    `location`); with `hold` set it records the request, then waits for `release`."""

    port: int = field(default_factory=free_port)
    status: int = 200
    location: str = ""
    hold: bool = False
    received: list[Received] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def keys(self) -> list[str]:
        return [r.headers["Idempotency-Key"] for r in self.received]

    def start(self) -> HttpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                receiver.received.append(
                    Received(self.path, dict(self.headers.items()), json.loads(raw or b"null"))
                )
                receiver.arrived.set()
                if receiver.hold:
                    receiver.release.wait(60)
                self.send_response(receiver.status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Mailbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.original_content))
        return "250 OK"


@dataclass
class SmtpReceiver:
    """A real SMTP server (aiosmtpd) on 127.0.0.1:`port`; `messages` as received."""

    port: int = field(default_factory=free_port)
    _mailbox: _Mailbox = field(default_factory=_Mailbox)
    _controller: Controller | None = None

    @property
    def messages(self) -> list[Message]:
        return self._mailbox.messages

    def start(self) -> SmtpReceiver:
        self._controller = Controller(self._mailbox, hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    """An HTTP receiver, not started: call .start() (a test may first find it down)."""
    receiver = HttpReceiver()
    yield receiver
    receiver.stop()


@pytest.fixture
def smtp_receiver(settings: Any) -> Iterator[SmtpReceiver]:
    """A started SMTP server, and Django's mail settings pointing at it."""
    receiver = SmtpReceiver().start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = receiver.port
    yield receiver
    receiver.stop()


def regression(**fields: Any) -> Regression:
    """A pending regression of a new endpoint's series, seen on the night of T0."""
    endpoint = fields.pop("endpoint", None) or EndpointFactory()
    values: dict[str, Any] = {
        "key": f"series:{endpoint.pk}:throughput_mbps:{Regression.objects.count()}",
        "tier": Regression.Tier.SHIFT,
        "metric": "throughput_mbps",
        "verdict": Regression.Verdict.REGRESSION,
        "severity": Regression.Severity.WARNING,
        "summary": f"throughput of {endpoint.name} fell 35% (120 -> 78 MB/s)",
        "site": endpoint.site,
        "endpoint": endpoint,
        "vantage_point": VantagePointFactory(),
        "blame": {"target": f"site {endpoint.site.name}", "rule": "one site, every vantage point"},
        "last_night": date(2026, 11, 20),
        "opened_at": T0,
        **fields,
    }
    return Regression.objects.create(**values)


def move(row: Regression, *states: str, at: datetime = T0) -> list[RegressionEvent]:
    return [regression_set_state(regression=row, state=state, at=at) for state in states]
