"""`bin/run` as a new user runs it: everything up on the embedded defaults (SQLite, the
filesystem broker, the lab), a campaign measured, and a Ctrl-C that stops it all.

A terminal's Ctrl-C signals the whole foreground process group; the tests send SIGINT (as
Ctrl-C) or SIGTERM to bin/run's group the same way (bin/run traps both).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import free_port
from workers.lab.ports import free_base_port

REPO = Path(__file__).resolve().parent.parent
UP_TIMEOUT_S = 180.0

pytestmark = pytest.mark.lab


def _get(url: str, token: str | None = None) -> object:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Token {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def _post(url: str, token: str) -> object:
    request = urllib.request.Request(url, method="POST", data=b"")
    request.add_header("Authorization", f"Token {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def _wait(
    condition: object, timeout_s: float, what: str, log: Path, run: subprocess.Popen[bytes]
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if run.poll() is not None:
            raise AssertionError(f"bin/run exited ({run.returncode})\n{log.read_text()[-3000:]}")
        try:
            if condition():  # type: ignore[operator]
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s\n{log.read_text()[-3000:]}")
        time.sleep(1)


@pytest.fixture
def lab_dir() -> Iterator[Path]:
    """Under /tmp with every parent searchable: the lab's servers run as nobody."""
    path = Path(tempfile.mkdtemp(prefix="fedprobe-bin-run-lab-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class BinRun:
    process: subprocess.Popen[bytes]
    log: Path
    web: str
    env: dict[str, str]

    def wait(self, condition: object, timeout_s: float, what: str) -> None:
        _wait(condition, timeout_s, what, self.log, self.process)


def _start(tmp_path: Path, lab_dir: Path) -> BinRun:
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_URL", "FEDPROBE_", "DJANGO_"))
    }
    env |= {
        "FEDPROBE_PORT": str(port),
        "FEDPROBE_VAR_DIR": str(tmp_path / "var"),
        "FEDPROBE_LAB_DIR": str(lab_dir),
        "FEDPROBE_LAB_BASE_PORT": str(free_base_port()),
    }
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            # As a terminal starts it: Ctrl-C and Ctrl-\ not ignored. A harness run in the
            # background of a script (`.ci/run &`) ignores SIGINT and SIGQUIT, and bash can
            # neither trap nor reset a signal ignored when it starts (env execs bin/run).
            ["env", "--default-signal=INT,QUIT", "bin/run"], cwd=REPO, env=env, stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    run = BinRun(process, log, f"http://127.0.0.1:{port}", env)
    run.wait(lambda: _get(f"{run.web}/healthz") == {"status": "ok"}, UP_TIMEOUT_S, "web up")
    return run


def _measure_the_auth_example(run: BinRun) -> list[dict[str, str]]:
    token = _token(run)
    campaigns = _get(f"{run.web}/api/v1/campaigns/", token)["results"]  # type: ignore[index]
    example = next(c for c in campaigns if c["name"] == AUTH_EXAMPLE)
    launched = _post(f"{run.web}/api/v1/campaigns/{example['id']}/launch/", token)
    ids = set(launched["runs"])  # type: ignore[index]
    assert ids
    runs_url = f"{run.web}/api/v1/runs/?campaign={example['id']}&limit=100"

    def launched_runs() -> list[dict[str, str]]:
        runs = _get(runs_url, token)["results"]  # type: ignore[index]
        return [r for r in runs if r["id"] in ids]

    def all_ended() -> bool:
        return all(r["status"] not in ("queued", "running") for r in launched_runs())

    run.wait(all_ended, 240, "the example campaign measured by bin/run's worker")
    return launched_runs()


def _ctrl_c(
    run: BinRun, tmp_path: Path, lab_dir: Path, signum: signal.Signals = signal.SIGTERM
) -> None:
    """Signals bin/run's whole process group, as a terminal's Ctrl-C does (SIGINT), and
    checks that nothing is left: no process naming this test's folders or VAR_DIR."""
    os.killpg(run.process.pid, signum)
    exit_code = run.process.wait(timeout=90)
    assert run.log.read_text().count("run: stopping") == 1
    assert exit_code in (0, 128 + signum, -signum)
    assert _survivors(tmp_path) == []
    assert _survivors(lab_dir) == []
    assert _processes_of(tmp_path) == []


def test_bin_run_serves_measures_and_stops_everything_on_ctrl_c(
    tmp_path: Path, lab_dir: Path
) -> None:
    run = _start(tmp_path, lab_dir)
    try:
        runs = _measure_the_auth_example(run)
        # The lab's authenticated doors, with the credentials the lab registered for them.
        assert {(r["status"], r["auth"]) for r in runs} == {
            ("succeeded", "none"),
            ("succeeded", "token"),
            ("succeeded", "gsi"),
            ("succeeded", "x509"),
        }, runs
        # The runs' credentials went to this instance's own folder, each run's removed after.
        secrets = tmp_path / "var" / "secrets"
        assert secrets.is_dir() and secrets.stat().st_mode & 0o777 == 0o700
        assert list(secrets.iterdir()) == []
    finally:
        _ctrl_c(run, tmp_path, lab_dir)


@pytest.mark.faults
def test_bin_run_starts_a_worker_that_died_again_and_it_measures(
    tmp_path: Path, lab_dir: Path
) -> None:
    run = _start(tmp_path, lab_dir)
    try:
        (worker,) = _workers(tmp_path)
        os.kill(worker, signal.SIGKILL)  # as the kernel's OOM killer would
        run.wait(lambda: len(_workers(tmp_path) - {worker}) == 1, 60, "a new worker")
        assert "run: worker exited (status 137); starting it again in 1 s" in run.log.read_text()
        assert _session(worker) == [], "the dead worker's pool process is left"

        runs = _measure_the_auth_example(run)
        assert {r["status"] for r in runs} == {"succeeded"}, runs
    finally:
        _ctrl_c(run, tmp_path, lab_dir, signal.SIGINT)


def _workers(tmp_path: Path) -> set[int]:
    """bin/run's Celery workers: each leads a session of its own (not its pool processes)."""
    found = set()
    for pid in _processes_of(tmp_path):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"worker" in cmdline and os.getsid(pid) == pid:
            found.add(pid)
    return found


def _session(sid: int) -> list[int]:
    """Live processes of session `sid`."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[3]) == sid and stat[0] != "Z":
                found.append(int(proc.name))
    return found


def _processes_of(tmp_path: Path) -> list[int]:
    """Live processes whose environment names this test's VAR_DIR."""
    marker = f"FEDPROBE_VAR_DIR={tmp_path / 'var'}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and marker in (proc / "environ").read_bytes().split(b"\0")
                and (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


AUTH_EXAMPLE = "Lab example: what TLS and each authentication cost per door"


def _token(run: BinRun) -> str:
    """The API token bin/run printed (kept in VAR_DIR/api-token: the same at every start)."""

    def printed() -> re.Match[str] | None:
        return re.search(r"^  token +([0-9a-f]{40})$", run.log.read_text(), re.MULTILINE)

    run.wait(printed, 60, "the token printed")
    found = printed()
    assert found is not None
    return found.group(1)


def _survivors(tmp_path: Path) -> list[str]:
    """Processes still running whose command line names this test's folder."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().split()[2]
        except OSError:
            continue
        if str(tmp_path) in cmdline and state != "Z":
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found
