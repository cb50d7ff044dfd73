"""Writes and metadata storms over XrdHttp (http://): one streaming PUT per file, the
server's Digest, DELETE; HEAD, a one-byte GET and PROPFIND Depth 1."""

from __future__ import annotations

import time

import pytest

from tests.workers.engine.conftest import MiB, WritableDoor
from workers.engine import RunParams, run_probe
from workers.engine.client_ops import WriteSource
from workers.engine.params import Operation

pytestmark = [pytest.mark.lab]


def test_http_write_is_checked_by_the_servers_digest_and_deleted(
    writable_door: WritableDoor,
) -> None:
    params = RunParams(
        urls=(writable_door.http_url,),
        operation=Operation.WRITE,
        clients=2,
        files=2,
        file_size=2 * MiB + 7,
        read_size=256 * 1024,
        run_tag="http",
    )
    run = run_probe(params).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["server_checksum"] == f"adler32:{WriteSource.of(params).adler32}"
    assert run["bytes_written"] == 2 * 2 * params.file_size
    assert run["latency_us"]["delete"]["count"] == 4
    assert [n for n in writable_door.names() if n.startswith("fedprobe-http-")] == []


@pytest.mark.parametrize("operation", [Operation.STAT, Operation.OPEN])
def test_http_file_storms_count_every_operation(
    writable_door: WritableDoor, operation: Operation
) -> None:
    (writable_door.folder / "http-storm").write_bytes(b"x" * 100)
    url = f"{writable_door.http_url}http-storm"
    run = run_probe(RunParams(urls=(url,), operation=operation, clients=2, ops=40)).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["latency_us"][str(operation)]["count"] == 80


def test_http_list_and_cleanup_see_the_collection(writable_door: WritableDoor) -> None:
    (writable_door.folder / "fedprobe-httpclean-c0-f0").write_bytes(b"x")
    run = run_probe(
        RunParams(urls=(writable_door.http_url,), operation=Operation.LIST, ops=20)
    ).to_json()
    assert run["status"] == "succeeded", run["errors"]
    from workers.engine.cleanup import cleanup_written

    deleted = cleanup_written(run_tag="httpclean", urls=[writable_door.http_url])
    assert deleted == [f"{writable_door.http_url}fedprobe-httpclean-c0-f0"]
    assert "fedprobe-httpclean-c0-f0" not in writable_door.names()


def test_http_missing_file_is_not_found(writable_door: WritableDoor) -> None:
    url = f"{writable_door.http_url}http-missing"
    run = run_probe(RunParams(urls=(url,), operation=Operation.STAT, ops=5)).to_json()
    assert run["errors"][0]["class"] == "not-found"


@pytest.mark.faults
def test_a_cancelled_http_write_abandons_its_put_and_deletes(writable_door: WritableDoor) -> None:
    def ours() -> list[str]:
        return [n for n in writable_door.names() if n.startswith("fedprobe-httpcancel-")]

    params = RunParams(
        urls=(writable_door.http_url,),
        operation=Operation.WRITE,
        file_size=1024 * MiB,
        read_size=16 * 1024,
        run_tag="httpcancel",
    )
    run = run_probe(params, should_cancel=lambda: bool(ours())).to_json()
    assert run["status"] == "cancelled"
    client = run["clients"][0]
    assert client["error"] is not None and client["error"]["class"] == "cancelled"
    assert "delete" in [p["phase"] for p in client["phases"]]
    time.sleep(1)  # an upload still streaming would show its file again by now
    assert ours() == []
