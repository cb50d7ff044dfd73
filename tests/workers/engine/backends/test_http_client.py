"""The HTTP client's one-request API (workers/engine/httpclient.py `exchange`), which new
request kinds use: against the lab's real XrdHttp, and servers that answer what we script."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from workers.engine.deadline import Deadline
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.httpclient import ClientConfig, exchange

ScriptServer = Callable[[Sequence[bytes]], int]

FILE = "/fedprobe/file-4M"


def config() -> ClientConfig:
    return ClientConfig.for_tls(egress=None, ca_dir=None)


def answer(status: str, headers: str = "", body: bytes = b"") -> bytes:
    head = f"HTTP/1.1 {status}\r\n{headers}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


@pytest.mark.lab
def test_exchange_answers_the_expected_status_with_the_body_unread(lab: Any) -> None:
    url = lab.endpoint("local-http").file_url(FILE)
    with config().client() as client:
        response = exchange(client, "HEAD", url, Deadline.after(30))
        response.close()
        missing = url.replace("file-4M", "no-such-file")
        with pytest.raises(ProbeError) as caught:
            exchange(client, "HEAD", missing, Deadline.after(30))
    assert (response.status_code, response.headers["Content-Length"]) == (200, str(4 * 1024**2))
    assert caught.value.error_class == ErrorClass.NOT_FOUND
    assert caught.value.message.startswith(f"HEAD {missing}: 404")


def test_exchange_follows_a_redirection_keeping_the_method(script_server: ScriptServer) -> None:
    """A 307 keeps the method; after a 302 the request is a GET (as browsers do)."""
    target = script_server([answer("204 No Content")])
    moved = f"Location: http://127.0.0.1:{target}/f\r\n"
    methods = []
    for status in ("307 Temporary Redirect", "302 Found"):
        first = script_server([answer(status, moved)])
        with config().client() as client:
            response = exchange(
                client, "DELETE", f"http://127.0.0.1:{first}/f", Deadline.after(10), expect=(204,)
            )
            response.close()
        assert (response.status_code, response.url.port) == (204, target)
        methods.append(response.request.method)
    assert methods == ["DELETE", "GET"]


def test_an_unexpected_status_is_a_probe_error_quoting_the_server(
    script_server: ScriptServer,
) -> None:
    port = script_server([answer("507 Insufficient Storage", body=b"disk full"), answer("200 OK")])
    url = f"http://127.0.0.1:{port}/f"
    with config().client() as client:
        with pytest.raises(ProbeError) as full:
            exchange(client, "PUT", url, Deadline.after(10), expect=(201,), what="writing f")
        with pytest.raises(ProbeError) as ok:
            exchange(client, "DELETE", url, Deadline.after(10), expect=(204,))
    assert full.value.error_class == ErrorClass.SERVER_ERROR
    assert full.value.message == "writing f: 507 Insufficient Storage: disk full"
    # A 200 to a request without Range says only that: no word of Range.
    assert ok.value.message == f"DELETE {url}: 200 OK"


def test_no_answer_is_a_probe_error_of_its_class(refused_port: int) -> None:
    with config().client() as client, pytest.raises(ProbeError) as caught:
        exchange(client, "HEAD", f"http://127.0.0.1:{refused_port}/f", Deadline.after(10))
    assert caught.value.error_class == ErrorClass.REFUSED
    with config().client() as client, pytest.raises(ProbeError) as late:
        exchange(client, "HEAD", f"http://127.0.0.1:{refused_port}/f", Deadline.after(-1))
    assert late.value.error_class == ErrorClass.TIMEOUT
