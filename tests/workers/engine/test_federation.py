"""The engine against the lab's redirector, XCache and GridFTP server."""

from __future__ import annotations

import random
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.workers.engine.conftest import FILE_4M, MiB, lab_file
from workers.engine import InvalidParams, Method, Pattern, RunParams, run_probe

pytestmark = pytest.mark.lab


def server_of(lab: Any, endpoint: str) -> str:
    return str(lab.endpoint(endpoint).url.split("://")[1].strip("/"))


@pytest.mark.parametrize(
    ("path_owner", "method"), [("fed-a", "direct"), ("fed-b", "direct"), ("fed-b", "copy")]
)
def test_redirector_run_names_the_data_server_that_holds_the_file(
    lab: Any, path_owner: str, method: str
) -> None:
    owner = lab.endpoint(f"{path_owner}-root")
    path = owner.files[0].path
    url = lab.endpoint("redirector-root").file_url(path)
    run = run_probe(RunParams(urls=(url,), method=Method(method), clients=2)).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["served_by"] == [server_of(lab, f"{path_owner}-root")]


@pytest.mark.parametrize("method", list(Method))
def test_served_by_names_the_server_as_the_client_reached_it_whatever_the_method(
    lab: Any, method: Method
) -> None:
    """The near site's xrootd sits behind the lab's relay: direct reads, copies and stages
    all name the relay's address the client connected to, not the port xrootd reports."""
    url, _ = lab_file(lab, "near-root", "/fedprobe/file-1M")
    run = run_probe(RunParams(urls=(url,), method=method, read_size=64 * 1024)).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["served_by"] == [server_of(lab, "near-root")]


def test_xcache_serves_a_warm_read_from_its_cache_without_crossing_the_wan(lab: Any) -> None:
    name = f"/fedprobe/xcache-{time.time_ns()}"
    data = random.Random(name).randbytes(8 * MiB)
    fresh = Path(lab.data_dir("far")) / name.lstrip("/")
    fresh.write_bytes(data)
    fresh.chmod(0o644)
    url = lab.endpoint("xcache-root").file_url(name)
    params = RunParams(
        urls=(url,), read_size=MiB, fraction=1.0, adler32=((url, f"{zlib.adler32(data):08x}"),)
    )
    origin = lab.relay_of("far-root")  # the cache's origin, behind the far site's emulated WAN
    try:
        before = origin_bytes(lab, origin)
        cold = run_probe(params).to_json()
        after_cold = origin_bytes(lab, origin)
        warm = run_probe(params).to_json()
        after_warm = origin_bytes(lab, origin)
    finally:
        fresh.unlink()
    assert cold["status"] == warm["status"] == "succeeded"
    assert cold["checksum"] == warm["checksum"] == "ok"
    # Cold: every block crosses the WAN from the origin. Warm: served from the cache's disk
    # (how much faster that is depends on the emulated RTT: benches, not this test).
    assert after_cold - before >= len(data)
    assert after_warm - after_cold < MiB // 8


def origin_bytes(lab: Any, relay: str) -> int:
    return int(lab.relay_stats()[relay]["bytes_down"])


def test_gridftp_copy_brings_the_whole_file_and_verifies_it(lab: Any) -> None:
    url, info = lab_file(lab, "local-ftp", FILE_4M)
    run = run_probe(
        RunParams(
            urls=(url,),
            method=Method.COPY,
            pattern=Pattern.RANDOM,
            clients=2,
            adler32=((url, info.adler32),),
        )
    ).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["bytes_wire"] == 2 * info.size
    assert run["checksum"] == "ok"


def test_gridftp_direct_read_is_refused_as_bad_input(lab: Any) -> None:
    url, _ = lab_file(lab, "local-ftp", FILE_4M)
    with pytest.raises(InvalidParams) as caught:
        run_probe(RunParams(urls=(url,), method=Method.DIRECT))
    assert caught.value.field == "method"


def test_far_site_sync_reads_pay_one_round_trip_each(lab: Any) -> None:
    url, _ = lab_file(lab, "far-root", FILE_4M)
    rtt_s = lab.endpoint("far-root").rtt_ms / 1000
    run = run_probe(
        RunParams(urls=(url,), pattern=Pattern.RANDOM, read_size=4096, fraction=0.005)
    ).to_json()
    assert run["status"] == "succeeded"
    assert run["op_latency_us"]["p50"] >= rtt_s * 1e6 * 0.95
    assert run["open_s"] >= rtt_s


def test_vector_reads_respect_the_servers_readv_limits(lab: Any) -> None:
    # 4 MiB requests exceed readv_ior_max (2097136 B): each is split into chunks it accepts.
    url, info = lab_file(lab, "local-root", "/fedprobe/file-16M")
    run = run_probe(
        RunParams(
            urls=(url,), pattern=Pattern.VECTOR, read_size=4 * MiB, fraction=1.0, vector_size=1024
        )
    ).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["bytes_read"] == info.size
    assert run["ops"] == 1  # 12 chunks of at most 2097136 B fit in one readv


def test_readv_limits_are_queried_from_the_server(lab: Any) -> None:
    from workers.engine.backends.xroot import query_vector_limits

    limits = query_vector_limits(lab.endpoint("local-root").url, timeout_s=10)
    assert (limits.max_chunks, limits.max_chunk_bytes) == (1024, 2097136)
