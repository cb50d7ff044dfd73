"""Fixtures for engine tests: lab URLs and relays of our own in front of lab servers."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.servers import free_port
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
    """A writable xrootd of a test's own: `url` of its scratch directory (root://), the
    same over XrdHttp (`http_url`), and the local folder behind them (`folder`)."""

    url: str
    folder: Path
    http_url: str = ""

    def names(self) -> list[str]:
        return sorted(os.listdir(self.folder))


@pytest.fixture(scope="session")
def writable_door() -> Iterator[WritableDoor]:
    """An xrootd exporting / without r/o (the lab's doors are read-only), with server
    checksums (`xrootd.chksum adler32`), under /tmp with folders nobody can write."""
    base = Path(tempfile.mkdtemp(prefix="fedprobe-write-", dir="/tmp"))
    base.chmod(0o755)
    for folder in ("data/scratch", "admin", "logs"):
        (base / folder).mkdir(parents=True)
    port, http_port = free_port(), free_port()
    config = base / "xrootd.cfg"
    config.write_text(
        "\n".join(
            (
                "xrd.allow host 127.0.0.1",
                "xrd.network nodnr",
                f"xrd.port {port}",
                f"xrd.protocol XrdHttp:{http_port} libXrdHttp.so",
                f"all.adminpath {base / 'admin'}",
                f"all.pidpath {base / 'admin'}",
                "all.export /",
                "xrootd.chksum adler32",
                f"oss.localroot {base / 'data'}",
            )
        )
        + "\n"
    )
    argv = ["xrootd", "-c", str(config), "-l", str(base / "logs" / "xrootd.log"), "-n", "w"]
    if os.geteuid() == 0:
        argv += ["-R", "nobody"]
        uid, gid = pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid
        for path in (base, *base.rglob("*")):
            os.chown(path, uid, gid)
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    log = base / "logs" / "w" / "xrootd.log"
    try:
        give_up = time.monotonic() + 30
        while not re.search(r"xrootd w@\S+ initialization completed", _text_of(log)):
            assert process.poll() is None, f"xrootd ended: {_text_of(log)[-2000:]}"
            assert time.monotonic() < give_up, f"xrootd not ready: {_text_of(log)[-2000:]}"
            time.sleep(0.1)
        scratch = base / "data" / "scratch"
        yield WritableDoor(
            f"root://127.0.0.1:{port}//scratch", scratch, f"http://127.0.0.1:{http_port}/scratch"
        )
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(base, ignore_errors=True)


def _text_of(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
