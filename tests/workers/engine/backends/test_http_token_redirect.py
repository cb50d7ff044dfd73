"""Where a bearer token goes when an https endpoint redirects (issue 17, item 2): to the
endpoint's own origin, and to another host only when it is listed for the endpoint
(`credential_hosts`). Two real TLS servers with the lab's certificate (valid for 127.0.0.1
and localhost): the endpoint at 127.0.0.1 sends every GET to a second server at localhost,
which records the Authorization it receives."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from workers.engine.backends.base import OpenOptions
from workers.engine.backends.http import HttpBackend
from workers.engine.credentials import Access, AuthMethod
from workers.engine.deadline import Deadline
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.urls import check_credential_hosts
from workers.lab.pki import LabPki

pytestmark = pytest.mark.lab

TOKEN = "eyJ0b2tlbiI6ImZvciB0aGUgZW5kcG9pbnQifQ.c2ln.bmF0dXJl"
SIZE = 1024


class Recorded:
    """An https server with the lab's certificate; each GET's Authorization is recorded and
    answered with `answer(path)`: (status, headers, body)."""

    def __init__(self, pki: LabPki, answer: Any) -> None:
        seen: list[str | None] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.headers.get("Authorization"))
                status, headers, body = answer(self.path)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.seen = seen
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(pki.lab.host_cert, pki.lab.host_key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def redirected(lab: Any) -> Iterator[tuple[Recorded, Recorded]]:
    """(the endpoint at 127.0.0.1, the server at localhost it redirects to)."""
    pki = LabPki(lab.state_dir / "pki", lab.state_dir / "certs")
    target = Recorded(pki, lambda path: (206, {"Content-Range": f"bytes 0-0/{SIZE}"}, b"x"))
    origin = Recorded(
        pki, lambda path: (302, {"Location": f"https://localhost:{target.port}{path}"}, b"")
    )
    yield origin, target
    origin.close()
    target.close()


def open_with_token(url: str, lab: Any, tmp_path: Path, hosts: tuple[str, ...]) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    access = Access(
        AuthMethod.TOKEN,
        token_file=str(token_file),
        ca_dir=str(lab.ca_dir()),
        credential_hosts=check_credential_hosts(hosts),
    )
    open_with(url, access)


def open_with(url: str, access: Access) -> None:
    options = OpenOptions(
        user="c0",
        streams=1,
        deadline=Deadline.after(20),
        egress=EgressPolicy.allowing(["127.0.0.0/8", "::1/128"]),
        access=access,
    )
    HttpBackend().open(url, options).close()


def test_a_redirect_to_another_host_gets_no_token_unless_it_is_listed(
    redirected: tuple[Recorded, Recorded], lab: Any, tmp_path: Path
) -> None:
    origin, target = redirected
    url = f"https://127.0.0.1:{origin.port}/store/f"
    open_with_token(url, lab, tmp_path, hosts=())
    assert origin.seen == [f"Bearer {TOKEN}"]
    assert target.seen == [None]  # followed, without the token
    open_with_token(url, lab, tmp_path, hosts=("localhost",))
    assert target.seen == [None, f"Bearer {TOKEN}"]
    open_with_token(url, lab, tmp_path, hosts=("127.0.0.1",))  # an address is no name
    assert target.seen[-1] is None


def test_a_proxy_is_not_taken_to_another_host_unless_it_is_listed(
    redirected: tuple[Recorded, Recorded], lab: Any, tmp_path: Path
) -> None:
    """A proxy is the TLS client certificate of every connection the client makes: it cannot
    be left off one hop as a token is, so the redirection is refused before any connection
    to that host (and followed once the host is listed)."""
    origin, target = redirected
    url = f"https://127.0.0.1:{origin.port}/store/f"
    proxy = str(lab.write_proxy(tmp_path / "proxy"))

    def access(hosts: tuple[str, ...]) -> Access:
        listed = check_credential_hosts(hosts)
        return Access(
            AuthMethod.X509, proxy_file=proxy, ca_dir=str(lab.ca_dir()), credential_hosts=listed
        )

    with pytest.raises(ProbeError) as refused:
        open_with(url, access(()))
    assert refused.value.error_class == ErrorClass.EGRESS
    assert f"a redirection to localhost:{target.port}" in refused.value.message
    assert "the run's proxy (the TLS client certificate) may not go" in refused.value.message
    assert (len(origin.seen), target.seen) == (1, [])
    open_with(url, access(("localhost",)))
    assert target.seen == [None]
