"""Replaying a real recorded job (tests/workers/engine/data) against the lab's endpoints."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.workers.engine.conftest import lab_file
from tests.workers.engine.test_cli import probe
from workers.engine import RunParams, run_probe
from workers.engine.credentials import Credential
from workers.engine.driver import Progress
from workers.engine.errors import InvalidParams
from workers.engine.params import Operation, ReplayTiming
from workers.engine.replay import plan_steps
from workers.engine.trace import load_trace

pytestmark = pytest.mark.lab

DATA = Path(__file__).parent / "data"
JOB = DATA / "recorded-job.csv"  # file-4M then file-1M (test_trace.py says what it does)
XRDCP = DATA / "xrdcp-16M.csv"
CLIENTS = 2
# The recorded job's steps, each waiting for its answer before the next: 2 opens, 6 reads,
# 1 readv, 1 group of async reads, 2 closes.
SYNC_STEPS = 12


def replay(urls: tuple[str, ...], trace: Path, **options: Any) -> dict[str, Any]:
    params = RunParams(urls=urls, operation=Operation.REPLAY, trace=str(trace), **options)
    progress: list[Progress] = []
    run = dict(run_probe(params, on_progress=progress.append).to_json())
    run["bytes_planned"] = {p.bytes_planned for p in progress}
    return run


def job_urls(lab: Any, endpoint: str) -> tuple[str, str]:
    """The lab's copies of the recorded job's files, in the order it opened them."""
    return tuple(lab_file(lab, endpoint, f"/fedprobe/file-{size}")[0] for size in ("4M", "1M"))  # type: ignore[return-value]


@pytest.mark.parametrize("endpoint", ["local-root", "local-http"])
def test_replay_as_fast_as_possible_does_the_recorded_ops_and_bytes(
    lab: Any, endpoint: str
) -> None:
    trace = load_trace(str(JOB))

    run = replay(job_urls(lab, endpoint), JOB, clients=CLIENTS)

    assert run["status"] == "succeeded", run["errors"]
    assert run["bytes_read"] == run["bytes_requested"] == CLIENTS * trace.bytes_read
    assert run["bytes_planned"] == {CLIENTS * trace.bytes_read}  # what the progress bar shows
    counts = {kind: summary["count"] for kind, summary in run["latency_us"].items()}
    assert counts == {
        "open": CLIENTS * 2,
        "read": CLIENTS * 6,
        "readv": CLIENTS * 1,
        "async_read": CLIENTS * 3,
        "close": CLIENTS * 2,
    }  # no lag: nothing was paced
    assert run["ops"] == CLIENTS * 10
    for client in run["clients"]:
        assert client["files"] == 2
        assert [p["phase"] for p in client["phases"]] == ["replay"]
        # open_s sums both opens; the first byte came after the first one only.
        assert client["open_s"] > 0 and client["ttfb_s"] > 0


@pytest.mark.parametrize("endpoint", ["local-https", "local-roots"])
def test_replay_over_tls_with_a_token_does_the_recorded_ops_and_bytes(
    lab: Any, endpoint: str
) -> None:
    trace = load_trace(str(JOB))

    run = replay(
        job_urls(lab, endpoint),
        JOB,
        credential=Credential.token(lab.mint_token()),
        ca_dir=str(lab.ca_dir()),
    )

    assert run["status"] == "succeeded", run["errors"]
    assert run["auth"] == "token" and run["tls"]["version"].startswith("TLSv1")
    assert run["bytes_read"] == trace.bytes_read
    assert run["latency_us"]["readv"]["count"] == 1
    assert run["latency_us"]["async_read"]["count"] == 3


def test_replay_at_the_recorded_times_keeps_the_recorded_spacing(lab: Any, tmp_path: Path) -> None:
    # The recording stretched 5 times (about 0.54 s, gaps of 50 ms between its reads): the
    # replay may not start a step before its recorded time, so it lasts at least until the
    # last step's start; and each step starts at most LATE_S after its time. A loopback
    # step takes about a millisecond and a sleep overshoots by ~0.1 ms: 100 ms covers a
    # busy 2-core test host's scheduling, and is still less than the spacing stretched.
    stretched = stretch(JOB, tmp_path / "slow.csv", factor=5)
    last_start_s = plan_steps(load_trace(str(stretched)))[-1].at_ns / 1e9
    late_s = 0.1

    run = replay(job_urls(lab, "local-root"), stretched, replay_timing=ReplayTiming.RECORDED)

    assert run["status"] == "succeeded", run["errors"]
    (client,) = run["clients"]
    (phase,) = client["phases"]
    assert phase["end_s"] - phase["start_s"] >= last_start_s
    lag = run["latency_us"]["lag"]
    assert lag["count"] == len(plan_steps(load_trace(str(stretched))))
    assert lag["max"] < late_s * 1e6
    asap = replay(job_urls(lab, "local-root"), stretched)
    assert asap["wall_s"] < last_start_s < run["wall_s"]


def test_a_far_endpoint_replays_slower_by_a_round_trip_per_waiting_step(lab: Any) -> None:
    rtt_s = lab.endpoint("far-root").rtt_ms / 1000

    near = replay(job_urls(lab, "local-root"), JOB)
    far = replay(job_urls(lab, "far-root"), JOB)

    assert near["status"] == far["status"] == "succeeded", (near["errors"], far["errors"])
    assert near["bytes_read"] == far["bytes_read"]
    # Each step the job waited for costs the far site at least its round trip (its relay
    # holds every packet for it); the local one answers in about a millisecond.
    (phase,) = far["clients"][0]["phases"]
    assert phase["end_s"] - phase["start_s"] >= SYNC_STEPS * rtt_s
    assert far["latency_us"]["read"]["p50"] >= rtt_s * 1e6 > near["latency_us"]["read"]["p50"]
    assert far["wall_s"] > near["wall_s"] + (SYNC_STEPS - 2) * rtt_s


def test_an_xrdcp_recording_replays_its_overlapping_reads(lab: Any) -> None:
    url, info = lab_file(lab, "local-root", "/fedprobe/file-16M")

    run = replay((url,), XRDCP)

    assert run["status"] == "succeeded", run["errors"]
    assert run["bytes_read"] == info.size
    assert run["latency_us"]["async_read"]["count"] == 2


def test_urls_not_matching_the_trace_files_are_refused_before_anything_runs(lab: Any) -> None:
    four, one = job_urls(lab, "local-root")

    with pytest.raises(InvalidParams) as caught:
        replay((four,), JOB)
    assert caught.value.field == "urls"
    assert "the trace reads 2 files (root://recorded.example:1094//fedprobe/file-4M;" in (
        caught.value.message
    )

    with pytest.raises(InvalidParams) as caught:
        replay((one, one), JOB)
    assert caught.value.field == "trace"
    assert f"{one} has 1048576 bytes; the trace reads up to byte 3162112" in caught.value.message


def test_probe_replays_a_trace_given_with_its_timing(lab: Any) -> None:
    urls = job_urls(lab, "local-root")
    done = probe(lab, "--trace", str(JOB), "--replay-timing", "recorded", "--json", *urls)

    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["params"]["operation"] == "replay"
    assert run["params"]["replay_timing"] == "recorded"
    assert run["params"]["trace"] == str(JOB)
    assert run["bytes_read"] == load_trace(str(JOB)).bytes_read
    assert run["latency_us"]["lag"]["count"] == len(plan_steps(load_trace(str(JOB))))


def test_probe_refuses_a_bad_trace_naming_its_line(lab: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(JOB.read_text().replace('"Read"', '"Reed"', 1))

    done = probe(lab, "--trace", str(bad), *job_urls(lab, "local-root"))

    assert done.returncode == 2
    assert "error: trace: line 3: action 'Reed' is not one of" in done.stderr


def stretch(source: Path, target: Path, *, factor: float) -> Path:
    """The recording with every time from its first start multiplied by `factor`."""
    rows = list(csv.reader(source.read_text().splitlines()))
    t0 = min(float(row[2]) for row in rows)
    for row in rows:
        for column in (2, 4):
            row[column] = f"{t0 + (float(row[column]) - t0) * factor:.9f}"
    with target.open("w", newline="") as handle:
        csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return target
