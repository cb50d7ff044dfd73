"""`python -m workers.engine --operation ...` and `... cleanup` as a user runs them, and
what the parameters of the operations beyond reads imply (deadline, the bytes written)."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tests.workers.engine.conftest import MiB, WritableDoor
from workers.engine.client_ops import WRITE_PATTERN_BYTES, WriteSource
from workers.engine.params import Operation, RunParams

ROOT = Path(__file__).resolve().parents[3]


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.engine", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.lab
def test_write_from_the_command_line_says_what_it_did(writable_door: WritableDoor) -> None:
    done = engine(
        writable_door.url, "--operation", "write", "--file-size", "2M", "--clients", "2",
        "--run-tag", "cliwrite",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "write 1 file(s) of 2 MiB per client in 4 KiB requests" in done.stdout
    assert "server checksum   adler32:" in done.stdout
    assert "written           4 MiB" in done.stdout
    assert [n for n in writable_door.names() if n.startswith("fedprobe-cliwrite-")] == []


@pytest.mark.lab
def test_stat_storm_json_has_the_stable_shape(writable_door: WritableDoor) -> None:
    (writable_door.folder / "cli-stat").write_bytes(b"x")
    url = f"{writable_door.url}cli-stat"
    done = engine(url, "--operation", "stat", "--ops", "20", "--rate", "0", "--json")
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["ops"] == 20 and run["ops_per_s"] > 0
    assert run["params"]["operation"] == "stat"
    for key in ("bytes_written", "server_checksum", "address_family", "address", "tpc"):
        assert key in run


@pytest.mark.lab
def test_cleanup_command_deletes_the_tagged_files_only(writable_door: WritableDoor) -> None:
    for name in ("fedprobe-cli-c0-f0", "fedprobe-cli-c3-f1", "fedprobe-clix-c0-f0"):
        (writable_door.folder / name).write_bytes(b"x")
    done = engine("cleanup", "--run-tag", "cli", writable_door.url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"deleted {writable_door.url}fedprobe-cli-c0-f0",
        f"deleted {writable_door.url}fedprobe-cli-c3-f1",
    ]
    assert "fedprobe-clix-c0-f0" in writable_door.names()
    (writable_door.folder / "fedprobe-clix-c0-f0").unlink()


def test_cleanup_command_refuses_a_bad_tag_naming_it() -> None:
    done = engine("cleanup", "--run-tag", "a/b", "root://127.0.0.1:1094//scratch")
    assert done.returncode == 2
    assert done.stderr.startswith("error: run_tag:")


def test_write_source_is_the_file_size_with_its_adler32() -> None:
    params = RunParams(
        urls=("file:///tmp",), operation=Operation.WRITE, file_size=3 * MiB + 5, read_size=MiB
    )
    source = WriteSource.of(params)
    data = b"".join(source.requests())
    assert len(data) == params.file_size
    assert source.adler32 == f"{zlib.adler32(data):08x}"


def test_written_bytes_are_distinct_over_a_whole_period() -> None:
    """Random requests for WRITE_PATTERN_BYTES, then repeated: nothing to compress away."""
    params = RunParams(urls=("file:///tmp",), operation=Operation.WRITE, read_size=64 * 1024)
    source = WriteSource.of(params)
    assert len(set(source.chunks)) == WRITE_PATTERN_BYTES // (64 * 1024)


def test_a_write_deadline_grows_with_the_file_and_its_requests() -> None:
    small = RunParams(urls=("file:///tmp",), operation=Operation.WRITE, file_size=MiB)
    large = RunParams(urls=("file:///tmp",), operation=Operation.WRITE, file_size=1024 * MiB)
    assert large.deadline_s(large.file_size) - small.deadline_s(small.file_size) >= 1000
    assert large.round_trips(large.file_size) > small.round_trips(small.file_size)
    assert large.wire_bytes(large.file_size) == large.file_size


def test_a_paced_storm_deadline_covers_its_schedule() -> None:
    paced = RunParams(urls=("file:///tmp",), operation=Operation.STAT, ops=1000, rate=10)
    flat = RunParams(urls=("file:///tmp",), operation=Operation.STAT, ops=1000)
    assert paced.deadline_s(0) - flat.deadline_s(0) == pytest.approx(100)
    assert flat.round_trips(0) > 1000
