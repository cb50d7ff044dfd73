"""HTTP connections are checked against the egress policy as they are made, redirects too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from workers.engine import EgressPolicy, ErrorClass, ProbeError
from workers.engine.backends.base import OpenOptions
from workers.engine.backends.http import HttpBackend, HttpFile
from workers.engine.deadline import Deadline
from workers.engine.httpclient import ClientConfig
from workers.engine.tls import ssl_context

ScriptServer = Callable[[Sequence[bytes]], int]

pytestmark = pytest.mark.lab

FILE = "/fedprobe/file-4M"


def options(egress: EgressPolicy | None) -> OpenOptions:
    return OpenOptions(user="c0", streams=1, deadline=Deadline.after(10), egress=egress)


def redirect_to(location: str) -> bytes:
    return f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode()


@pytest.fixture(scope="module")
def lab_port(lab: Any) -> int:
    port = urlsplit(lab.endpoint("local-http").url).port
    assert port is not None
    return port


def test_open_refuses_an_address_outside_the_policy_without_a_preflight(lab: Any) -> None:
    url = lab.endpoint("local-http").file_url(FILE)
    with pytest.raises(ProbeError) as refused:
        HttpBackend().open(url, options(EgressPolicy()))
    assert refused.value.error_class is ErrorClass.EGRESS


def test_a_redirect_to_an_address_outside_the_policy_is_refused(
    script_server: ScriptServer, lab_port: int
) -> None:
    # The first server is allowed (127.0.0.1); it sends the client on to 127.0.0.2.
    port = script_server([redirect_to(f"http://127.0.0.2:{lab_port}{FILE}")])
    url = f"http://127.0.0.1:{port}{FILE}"
    with pytest.raises(ProbeError) as refused:
        HttpBackend().open(url, options(EgressPolicy.allowing(["127.0.0.1/32"])))
    assert refused.value.error_class is ErrorClass.EGRESS
    assert "127.0.0.2" in refused.value.message


def test_a_redirect_inside_the_policy_is_followed(
    script_server: ScriptServer, lab_port: int
) -> None:
    port = script_server([redirect_to(f"http://127.0.0.2:{lab_port}{FILE}")])
    remote = HttpBackend().open(
        f"http://127.0.0.1:{port}{FILE}", options(EgressPolicy.allowing(["127.0.0.0/8"]))
    )
    remote.close()
    assert remote.served_by == f"127.0.0.2:{lab_port}"
    assert remote.size == 4 * 1024 * 1024


def test_async_read_connections_are_checked_too(lab: Any) -> None:
    url = lab.endpoint("local-http").file_url(FILE)
    with httpx.Client() as opener:
        config = ClientConfig(egress=EgressPolicy(), context=ssl_context(None), auth=None)
        remote = HttpFile(opener, url, Deadline.after(10), config)
        with pytest.raises(ProbeError) as refused:
            remote.read_async([(0, 4096), (8192, 4096)], 2, lambda _ns, _n: None)
    assert refused.value.error_class is ErrorClass.EGRESS
