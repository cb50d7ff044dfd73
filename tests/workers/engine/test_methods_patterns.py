"""Every method x pattern against the lab's real root://, http:// and file:// endpoints."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.workers.engine.conftest import FILE_4M, MiB, lab_file
from workers.engine import Method, Pattern, RunParams, run_probe

pytestmark = pytest.mark.lab

READ_SIZE = 64 * 1024
FRACTION = 0.25
CLIENTS = 2


@pytest.mark.parametrize("endpoint", ["local-root", "local-http", "local-file"])
@pytest.mark.parametrize("pattern", list(Pattern))
@pytest.mark.parametrize("method", list(Method))
def test_every_method_and_pattern_reads_what_was_planned(
    lab: Any, endpoint: str, method: Method, pattern: Pattern
) -> None:
    url, info = lab_file(lab, endpoint, FILE_4M)
    params = RunParams(
        urls=(url,),
        method=method,
        pattern=pattern,
        read_size=READ_SIZE,
        fraction=FRACTION,
        clients=CLIENTS,
        vector_size=8,
        depth=4,
        adler32=((url, info.adler32),),
    )
    run = run_probe(params).to_json()

    assert run["status"] == "succeeded", run["errors"]
    planned = math.ceil(FRACTION * info.size)
    assert run["bytes_requested"] == run["bytes_read"] == CLIENTS * planned
    assert run["ops"] == CLIENTS * expected_ops(pattern, planned, params.vector_size)
    assert run["ttfb_s"] > 0
    assert run["op_latency_us"]["p50"] > 0
    assert len(run["clients"]) == CLIENTS
    if method == Method.DIRECT:
        assert run["open_s"] > 0 and run["ttfb_s"] >= run["open_s"]
        assert run["bytes_wire"] >= run["bytes_read"]
        assert run["served_by"] == [expected_server(lab, endpoint)]
        assert run["checksum"] is None
    else:
        assert run["bytes_wire"] == CLIENTS * info.size  # the whole file crossed the wire
        assert run["checksum"] == "ok"
        assert all(c["copy_s"] > 0 for c in run["clients"])
        # The copy tool opened the remote file within copy_s: no open time of the endpoint
        # (the local copy's open, microseconds, had read as an endpoint opening in no time).
        assert run["open_s"] is None
        assert all(c["open_s"] == 0 for c in run["clients"])
    for client in run["clients"]:
        phases = [phase["phase"] for phase in client["phases"]]
        assert "read" in phases and "open" in phases
        assert client["cpu_s"] > 0


def expected_ops(pattern: Pattern, planned: int, vector_size: int) -> int:
    reads = math.ceil(planned / READ_SIZE)
    return math.ceil(reads / vector_size) if pattern == Pattern.VECTOR else reads


def expected_server(lab: Any, endpoint: str) -> str:
    if endpoint == "local-file":
        return "localhost"
    return lab.endpoint(endpoint).url.split("://")[1].strip("/")


def test_stage_reads_every_file_of_the_collection_and_copies_them(lab: Any) -> None:
    urls = [lab_file(lab, "local-root", path)[0] for path in (FILE_4M, "/fedprobe/file-1M")]
    run = run_probe(
        RunParams(
            urls=tuple(urls),
            method=Method.STAGE,
            pattern=Pattern.RANDOM,
            read_size=READ_SIZE,
            fraction=0.5,
            clients=2,
            files=2,
        )
    ).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["bytes_wire"] == 2 * (4 * MiB + 1 * MiB)
    for client in run["clients"]:
        assert client["files"] == 2
        assert [p["phase"] for p in client["phases"]].count("copy") == 2


def test_full_sequential_read_verifies_the_checksum(lab: Any) -> None:
    url, info = lab_file(lab, "local-root", FILE_4M)
    good = run_probe(
        RunParams(urls=(url,), read_size=MiB, fraction=1.0, adler32=((url, info.adler32),))
    ).to_json()
    assert good["checksum"] == "ok"
    bad = run_probe(
        RunParams(urls=(url,), read_size=MiB, fraction=1.0, adler32=((url, "00000001"),))
    ).to_json()
    assert bad["status"] == "failed"
    assert bad["errors"][0]["class"] == "checksum"


def test_readahead_moves_more_bytes_than_random_reads_need(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_4M)
    base = {"urls": (url,), "pattern": Pattern.RANDOM, "read_size": 4096, "fraction": 0.05}
    unbuffered = run_probe(RunParams(**base)).to_json()  # type: ignore[arg-type]
    buffered = run_probe(RunParams(**base, readahead=256 * 1024)).to_json()  # type: ignore[arg-type]
    assert unbuffered["bytes_wire"] == unbuffered["bytes_read"]
    assert buffered["bytes_read"] == unbuffered["bytes_read"]
    assert buffered["bytes_wire"] > 10 * buffered["bytes_read"]


def test_readahead_serves_sequential_reads_from_its_window(lab: Any) -> None:
    url, _ = lab_file(lab, "local-http", FILE_4M)
    run = run_probe(RunParams(urls=(url,), read_size=4096, fraction=1.0, readahead=MiB)).to_json()
    assert run["status"] == "succeeded"
    assert run["bytes_wire"] == run["bytes_read"] == 4 * MiB
    assert run["ops"] == 1024  # the reader's reads; the wire saw only 4 fetches


def test_each_client_has_its_own_connection(lab: Any, relay_to: Any) -> None:
    host, url = relay_to("local-root", FILE_4M)
    run = run_probe(RunParams(urls=(url,), clients=4, fraction=0.1)).to_json()
    assert run["status"] == "succeeded"
    # One connection for the preflight stat, then one per client.
    assert host.stats()["test"].connections_total == 1 + 4


def test_progress_is_reported_and_reaches_the_plan(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_4M)
    seen = []
    run_probe(
        RunParams(urls=(url,), read_size=4096, fraction=1.0, clients=2), on_progress=seen.append
    )
    assert seen, "no progress reported"
    assert seen[-1].bytes_planned == 2 * 4 * MiB
    assert seen[-1].client_bytes == (4 * MiB, 4 * MiB)
    assert [p.bytes_done for p in seen] == sorted(p.bytes_done for p in seen)


def test_streams_open_parallel_tcp_substreams(lab: Any, relay_to: Any) -> None:
    host, url = relay_to("local-root", "/fedprobe/file-16M")
    connections = []
    for streams in (1, 4):
        before = host.stats()["test"].connections_total
        run = run_probe(RunParams(urls=(url,), streams=streams, read_size=MiB, fraction=1.0))
        assert run.status == "succeeded"
        connections.append(host.stats()["test"].connections_total - before)
    assert connections[0] == 2  # the preflight's and the client's
    assert connections[1] > 2  # XRD_SUBSTREAMSPERCHANNEL: the client opened substreams
