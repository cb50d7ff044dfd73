"""Fixtures for engine tests: lab URLs and relays of our own in front of lab servers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
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


@dataclass(frozen=True)
class WritableDoor:
    """A writable door: the lab's local site's scratch folder as a directory URL over root://
    (`url`) and http:// (`http_url`), both ending in "/", and the folder behind them."""

    url: str
    folder: Path
    http_url: str

    def names(self) -> list[str]:
        return sorted(os.listdir(self.folder))


@pytest.fixture(scope="session")
def writable_door(lab: Any) -> WritableDoor:
    """The local site's scratch (docs/lab.md, "Writes and address families"): its anonymous
    doors take writes there, with server checksums (`xrootd.chksum adler32`)."""
    root, http = lab.endpoint("local-root"), lab.endpoint("local-http")
    path = root.scratch_path
    assert path, "the lab's local-root takes no writes"
    folder = Path(lab.state_dir) / "data" / "scratch" / root.site
    # The export is the folder with its "/": a stat of /scratch/local is refused.
    return WritableDoor(root.file_url(path), folder, http.file_url(path))
