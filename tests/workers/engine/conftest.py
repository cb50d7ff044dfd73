"""Fixtures for engine tests: lab URLs and relays of our own in front of lab servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from workers.lab.relay import RelayHost, RelaySpec

# tests/conftest.py starts the lab with files of these sizes.
MiB = 1024 * 1024
FILE_4M = "/fedprobe/file-4M"
FILE_16M = "/fedprobe/file-16M"


def lab_file(lab: Any, endpoint: str, path: str) -> tuple[str, Any]:
    """(url, LabFile) of a lab file on one endpoint."""
    ep = lab.endpoint(endpoint)
    info = next(f for f in ep.files if f.path == path)
    return ep.file_url(path), info


@pytest.fixture
def relay_to(lab: Any) -> Iterator[Callable[..., tuple[RelayHost, str]]]:
    """relay_to("local-root", path, rtt_ms=0, bandwidth_mbps=None) -> (host, url via a relay)."""
    hosts: list[RelayHost] = []

    def make(
        endpoint: str, path: str, rtt_ms: float = 0.0, bandwidth_mbps: float | None = None
    ) -> tuple[RelayHost, str]:
        base = urlsplit(lab.endpoint(endpoint).url)
        assert base.hostname is not None and base.port is not None
        spec = RelaySpec(
            "test", 0, base.hostname, base.port, rtt_ms=rtt_ms, bandwidth_mbps=bandwidth_mbps
        )
        host = RelayHost([spec])
        host.start()
        hosts.append(host)
        port = host.relay("test").port
        separator = "//" if base.scheme == "root" else "/"
        return host, f"{base.scheme}://127.0.0.1:{port}{separator}{path.lstrip('/')}"

    yield make
    for host in hosts:
        host.stop()
