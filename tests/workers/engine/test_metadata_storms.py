"""Metadata storms (stat, open-close, list) against a real xrootd and file://: counts,
rates, the error classes, and a target rate held by a schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workers.engine.conftest import WritableDoor
from workers.engine import RunParams, run_probe
from workers.engine.params import Operation

pytestmark = [pytest.mark.lab]


@pytest.fixture(scope="module")
def two_files(writable_door: WritableDoor) -> list[str]:
    """Two files of the door's scratch directory, as URLs."""
    names = ["storm-a", "storm-b"]
    for name in names:
        (writable_door.folder / name).write_bytes(b"x" * 1000)
    return [f"{writable_door.url}{name}" for name in names]


@pytest.mark.parametrize("operation", [Operation.STAT, Operation.OPEN])
def test_file_storm_counts_every_operation_of_every_client(
    two_files: list[str], operation: Operation
) -> None:
    params = RunParams(urls=tuple(two_files), operation=operation, clients=2, files=2, ops=150)
    run = run_probe(params).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["ops"] == 300
    assert run["latency_us"][str(operation)]["count"] == 300
    assert run["op_latency_us"]["count"] == 300
    assert [c["ops"] for c in run["clients"]] == [150, 150]
    assert run["ops_per_s"] is not None and run["ops_per_s"] > 0
    assert run["operation"] == str(operation)
    assert run["bytes_written"] == 0


def test_list_storm_lists_the_directory(writable_door: WritableDoor, two_files: list[str]) -> None:
    params = RunParams(urls=(writable_door.url,), operation=Operation.LIST, clients=2, ops=100)
    run = run_probe(params).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["latency_us"]["list"]["count"] == 200


def test_local_storms_count_too(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    for operation, url in [
        (Operation.STAT, (tmp_path / "f").as_uri()),
        (Operation.OPEN, (tmp_path / "f").as_uri()),
        (Operation.LIST, tmp_path.as_uri()),
    ]:
        run = run_probe(RunParams(urls=(url,), operation=operation, ops=50)).to_json()
        assert run["status"] == "succeeded", run["errors"]
        assert run["latency_us"][str(operation)]["count"] == 50


def test_a_missing_file_is_class_not_found(writable_door: WritableDoor) -> None:
    params = RunParams(urls=(f"{writable_door.url}missing",), operation=Operation.STAT, ops=10)
    run = run_probe(params).to_json()
    assert run["status"] == "failed"
    assert run["errors"][0]["class"] == "not-found"


def test_a_file_gone_mid_storm_ends_its_client_as_not_found(
    writable_door: WritableDoor,
) -> None:
    """The preflight saw the file; it is removed while the clients stat it."""
    doomed = writable_door.folder / "storm-doomed"
    doomed.write_bytes(b"x")

    def remove_once_running() -> bool:
        doomed.unlink(missing_ok=True)
        return False

    params = RunParams(
        urls=(f"{writable_door.url}storm-doomed",), operation=Operation.STAT, ops=100, rate=20
    )
    run = run_probe(params, should_cancel=remove_once_running).to_json()
    assert run["status"] == "failed"
    assert run["errors"][0]["class"] == "not-found"
    assert 0 < run["clients"][0]["ops"] < 100


def test_a_storm_at_a_target_rate_keeps_it(two_files: list[str]) -> None:
    """2 clients at 25 stats/s each: 50/s for the run. The schedule puts operation k at
    k / rate, so the run's span is (ops - 1) / rate plus the last operation's latency and
    the first one's connection (ms against 1.96 s): the measured rate is within 5% of the
    target; a loop that slept 1/rate after each operation would drift below it by each
    operation's latency and every oversleep, and a flat-out one would run at thousands/s.
    10% allows for a machine shared by several test runs."""
    params = RunParams(urls=(two_files[0],), operation=Operation.STAT, clients=2, ops=50, rate=25)
    run = run_probe(params).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["ops_per_s"] == pytest.approx(50, rel=0.10)
    # Latencies are the operations' own, never the waits between them.
    assert run["latency_us"]["stat"]["p50"] < 1e6 / 25
