"""Writes against a real writable xrootd (and file://): what the server stored is checked by
its own checksum, and the files written are deleted always (a failure, the deadline, a
cancel), or by the cleanup when the worker was killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.workers.engine.conftest import MiB, WritableDoor
from workers.engine import RunParams, run_probe
from workers.engine.backends.xroot import STREAM_TIMEOUT_FLOOR_S
from workers.engine.cleanup import cleanup_written
from workers.engine.client_ops import WriteSource
from workers.engine.credentials import Credential
from workers.engine.driver import KILL_GRACE_S
from workers.engine.errors import InvalidParams
from workers.engine.params import Operation, written_name

pytestmark = [pytest.mark.lab]

REPO = Path(__file__).resolve().parents[3]


def ours(door: WritableDoor, tag: str) -> list[str]:
    return [name for name in door.names() if name.startswith(f"fedprobe-{tag}-")]


def test_clients_write_their_files_verified_by_the_server_checksum_and_delete_them(
    writable_door: WritableDoor,
) -> None:
    size = 3 * MiB + 123  # not a whole number of requests: the last one is short
    params = RunParams(
        urls=(writable_door.url,),
        operation=Operation.WRITE,
        clients=3,
        files=2,
        file_size=size,
        read_size=256 * 1024,
        run_tag="several",
    )
    run = run_probe(params).to_json()
    assert run["status"] == "succeeded", run["errors"]
    source = WriteSource.of(params)
    written = b"".join(source.requests())
    assert len(written) == size
    assert run["server_checksum"] == f"adler32:{zlib.adler32(written):08x}"
    assert run["checksum"] == "ok"
    assert run["operation"] == "write"
    assert run["bytes_written"] == 3 * 2 * size
    assert run["bytes_read"] == 0
    assert run["latency_us"]["write"]["count"] == 3 * 2 * 13  # 12 full requests and a short one
    assert run["latency_us"]["delete"]["count"] == 3 * 2
    assert run["ops"] == run["latency_us"]["write"]["count"]
    assert run["throughput_mbps"] > 0
    assert run["ops_per_s"] is None
    assert run["tpc"] is None
    assert (run["address_family"], run["address"]) == ("4", "127.0.0.1")  # the lab's local site
    for client in run["clients"]:
        assert client["files"] == 2
        assert client["server_checksum"] == run["server_checksum"]
        phases = [p["phase"] for p in client["phases"]]
        assert phases == ["open", "write", "close", "checksum", "delete"] * 2
    assert ours(writable_door, "several") == []


def test_a_local_write_is_checked_and_deleted(tmp_path: Path) -> None:
    folder = tmp_path / "scratch"
    folder.mkdir()
    params = RunParams(
        urls=(folder.as_uri(),),
        operation=Operation.WRITE,
        clients=2,
        file_size=2 * MiB,
        read_size=MiB,
        run_tag="local",
    )
    run = run_probe(params).to_json()
    assert run["status"] == "succeeded", run["errors"]
    assert run["server_checksum"] == f"adler32:{WriteSource.of(params).adler32}"
    assert run["bytes_written"] == 2 * 2 * MiB
    assert os.listdir(folder) == []


def test_a_write_never_overwrites_a_file_of_the_same_name(writable_door: WritableDoor) -> None:
    existing = writable_door.folder / written_name("taken", 0, 0)
    existing.write_bytes(b"not ours to overwrite")
    try:
        params = RunParams(
            urls=(writable_door.url,), operation=Operation.WRITE, file_size=MiB, run_tag="taken"
        )
        run = run_probe(params).to_json()
        assert run["status"] == "failed"
        assert "file exists" in run["errors"][0]["message"]
    finally:
        existing.unlink(missing_ok=True)


def test_a_write_to_a_missing_directory_fails_before_the_clients(
    writable_door: WritableDoor,
) -> None:
    params = RunParams(urls=(writable_door.url + "nowhere/",), operation=Operation.WRITE)
    run = run_probe(params).to_json()
    assert run["status"] == "failed"
    assert run["errors"][0]["class"] == "not-found"
    assert run["clients"] == []


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"urls": ("root://127.0.0.1:1094//scratch?x=1",)}, "url"),
        ({"urls": ("root://127.0.0.1:1094//scratch#f",)}, "url"),
        ({"urls": ("root://127.0.0.1:1094//scratch/fedprobe-a-c0-f0",)}, "url"),
        ({"run_tag": "../up"}, "run_tag"),
        ({"run_tag": "a*"}, "run_tag"),
        ({"run_tag": ""}, "run_tag"),
    ],
)
def test_a_write_anywhere_but_a_directory_by_our_names_is_refused(
    changes: dict[str, object], field: str
) -> None:
    values: dict[str, object] = {
        "urls": ("root://127.0.0.1:1094//scratch",),
        "operation": Operation.WRITE,
        "run_tag": "ok",
        **changes,
    }
    with pytest.raises(InvalidParams) as refused:
        RunParams(**values).validate()  # type: ignore[arg-type]
    assert refused.value.field == field


def test_cleanup_refuses_a_tag_that_could_match_other_names() -> None:
    with pytest.raises(InvalidParams) as refused:
        cleanup_written(run_tag="*", urls=["root://127.0.0.1:1094//scratch"])
    assert refused.value.field == "run_tag"


# A file that takes seconds to write on loopback (small requests): long enough to stop the
# run while it is being written.
SLOW = {"file_size": 1024 * MiB, "read_size": 16 * 1024}


@pytest.mark.faults
def test_a_cancelled_write_deletes_what_it_wrote(writable_door: WritableDoor) -> None:
    params = RunParams(
        urls=(writable_door.url,), operation=Operation.WRITE, clients=2, run_tag="cancel", **SLOW
    )
    run = run_probe(params, should_cancel=lambda: len(ours(writable_door, "cancel")) == 2)
    record = run.to_json()
    assert record["status"] == "cancelled"
    assert 0 < record["bytes_written"] < 2 * params.file_size
    for client in record["clients"]:
        assert client["error"] is not None and client["error"]["class"] == "cancelled"
        # The client deleted its file itself (SIGTERM), before the run's sweep.
        assert "delete" in [p["phase"] for p in client["phases"]]
    assert ours(writable_door, "cancel") == []


@pytest.mark.faults
def test_a_write_past_its_deadline_deletes_what_it_wrote(writable_door: WritableDoor) -> None:
    params = RunParams(
        urls=(writable_door.url,),
        operation=Operation.WRITE,
        run_tag="late",
        # 2 s: XrdCl's StreamTimeout has a floor (configure_client, 5 s), so its stream
        # outlives the deadline; the requests and the driver's kill end the client. (At 1 s a
        # loaded machine could spend the whole deadline on the create: no write phase.)
        timeout_s=2.0,
        **SLOW,
    )
    record = run_probe(params).to_json()
    assert record["status"] == "timeout", record["errors"]
    assert not any("3004" in e["message"] for e in record["errors"]), record["errors"]
    client = record["clients"][0]
    phases = {p["phase"]: p for p in client["phases"]}
    # Held to the deadline all the same: asked to stop KILL_GRACE_S past it, then deleted.
    assert phases["write"]["end_s"] < record["deadline_s"] + KILL_GRACE_S + 1.0, phases
    assert "delete" in phases
    assert ours(writable_door, "late") == []


# One client's write loop in a process of its own (XrdCl's settings are the process's):
# configured as a client with a 1 s deadline, then writing 16 KiB requests past it for
# BUSY_S (the client's loop goes on until the driver stops it), as XRootDWritableFile does.
_BUSY_WRITER = """
import sys, time
from workers.engine.backends import backend_for
from workers.engine.backends.base import OpenOptions
from workers.engine.backends.xroot import configure_client
from workers.engine.deadline import Deadline
from XRootD import client as xrd

url, busy_s = sys.argv[1], float(sys.argv[2])
options = OpenOptions(user="busy", streams=1, deadline=Deadline.after(1.0))
configure_client(options)
print("StreamTimeout", xrd.EnvGetInt("StreamTimeout"), flush=True)
backend = backend_for("root")
file = backend.create(url, 0, options)
data, offset, ends = b"x" * 16384, 0, time.monotonic() + busy_s
try:
    while time.monotonic() < ends:
        file.write(offset, data, options.deadline.timeout_s())
        offset += len(data)
    print("wrote", offset, flush=True)
finally:
    file.abort()
    backend.delete(url, OpenOptions(user="busy", streams=1, deadline=Deadline.after(10)))
"""
# Before the floor, a writer configured so met the false stream timeout within 10 s in every
# try on the lab (the runs with a 1 s deadline, writing ~3 s, one in three).
BUSY_S = 12.0


@pytest.mark.faults
def test_a_busy_stream_outlives_a_1_s_deadline(writable_door: WritableDoor) -> None:
    url = writable_door.url + written_name("busy", 0, 0)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _BUSY_WRITER, url, str(BUSY_S)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=BUSY_S + 60,
            check=False,
        )
    finally:  # a writer whose stream was taken for dead could not delete its file
        cleanup_written(run_tag="busy", urls=[writable_door.url])
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"StreamTimeout {STREAM_TIMEOUT_FLOOR_S}" in done.stdout
    assert "wrote" in done.stdout, done.stdout  # and deleted (a failed delete raises)


@pytest.mark.faults
def test_files_of_a_writer_killed_outright_are_deleted_by_the_cleanup_and_nothing_else(
    writable_door: WritableDoor,
) -> None:
    others = ["fedprobe-killed2-c0-f0", "fedprobe-other-c0-f0", "not-ours"]
    for name in others:
        (writable_door.folder / name).write_bytes(b"keep me")
    argv = [
        sys.executable, "-m", "workers.engine", writable_door.url,
        "--operation", "write", "--clients", "2", "--run-tag", "killed",
        "--file-size", str(SLOW["file_size"]), "--read-size", str(SLOW["read_size"]),
    ]  # fmt: skip
    worker = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        give_up = time.monotonic() + 60
        while len(ours(writable_door, "killed")) < 2:
            assert worker.poll() is None and time.monotonic() < give_up
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)  # no finally, no sweep: the worker is just gone
        worker.wait()
        left = _when_still(writable_door, "killed")
        assert left == ["fedprobe-killed-c0-f0", "fedprobe-killed-c1-f0"]
        deleted = cleanup_written(run_tag="killed", urls=[writable_door.url])
        assert deleted == [f"{writable_door.url}{name}" for name in left]
        assert ours(writable_door, "killed") == []
        for name in others:
            assert (writable_door.folder / name).read_bytes() == b"keep me"
    finally:
        if worker.poll() is None:
            worker.kill()
        for name in others:
            (writable_door.folder / name).unlink(missing_ok=True)
        cleanup_written(run_tag="killed", urls=[writable_door.url])


def _when_still(door: WritableDoor, tag: str) -> list[str]:
    """Our names once their sizes stop changing (the clients die with their worker)."""
    sizes: dict[str, int] = {}
    for _ in range(100):
        now = {name: (door.folder / name).stat().st_size for name in ours(door, tag)}
        if now == sizes:
            return sorted(now)
        sizes = now
        time.sleep(0.2)
    raise AssertionError(f"still being written: {sizes}")


def _token_write(lab: Any, kind: str, tag: str) -> dict[str, Any]:
    endpoint = lab.endpoint("local-roots")
    url = endpoint.file_url(endpoint.scratch_path)
    token = Credential.token(lab.token_file(kind).read_text().strip())
    params = RunParams(
        urls=(url,),
        operation=Operation.WRITE,
        file_size=MiB,
        read_size=256 * 1024,
        run_tag=tag,
        credential=token,
        ca_dir=str(lab.ca_dir()),
    )
    return dict(run_probe(params).to_json())


def test_a_write_token_writes_over_roots_and_a_read_token_is_refused(
    lab: Any, writable_door: WritableDoor
) -> None:
    written = _token_write(lab, "write", "tokwrite")
    assert written["status"] == "succeeded", written["errors"]
    assert written["auth"] == "token"
    assert written["server_checksum"] is not None
    refused = _token_write(lab, "read", "tokread")
    assert refused["status"] == "failed"
    assert refused["errors"][0]["class"] == "auth"
    assert "permission denied" in refused["errors"][0]["message"]
    assert ours(writable_door, "tokwrite") == ours(writable_door, "tokread") == []
