"""VAR_DIR (the SQLite database with sessions and password hashes, the credential key, the
embedded broker, bin/run's logs) is its owner's only: folders 0700, files 0600, whatever
the umask, as the embedded defaults make it."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.servers import free_port
from workers.lab.ports import free_base_port

REPO = Path(__file__).resolve().parent.parent


def embedded_env(var: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FEDPROBE_", "DJANGO_", "DATABASE_URL"))
    }
    return {**env, "FEDPROBE_VAR_DIR": str(var)}


def manage(var: Path, *args: str) -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO, env=embedded_env(var), umask=0o022,
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def modes(var: Path) -> dict[str, str]:
    found = {".": oct(stat.S_IMODE(var.stat().st_mode))}
    for path in var.rglob("*"):
        found[str(path.relative_to(var))] = oct(stat.S_IMODE(path.lstat().st_mode))
    return found


def assert_private(var: Path) -> None:
    found = modes(var)
    loose = {name: mode for name, mode in found.items() if int(mode, 8) & 0o077}
    assert loose == {}, found
    assert found["."] == "0o700"


def test_embedded_defaults_make_var_dir_private(tmp_path: Path) -> None:
    var = tmp_path / "var"
    manage(var, "migrate", "--noinput")
    make_key = "from webapp.accounts.crypto import credential_keys; credential_keys()"
    manage(var, "shell", "-c", make_key)
    found = modes(var)
    assert found["fedprobe.sqlite3"] == "0o600"
    assert found["broker"] == found["broker/queues"] == found["broker/control"] == "0o700"
    assert found["credential.key"] == "0o600"
    assert_private(var)


def test_a_world_readable_var_dir_of_an_older_version_is_tightened(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    var.chmod(0o755)
    sqlite3.connect(var / "fedprobe.sqlite3").close()
    (var / "fedprobe.sqlite3").chmod(0o644)
    manage(var, "migrate", "--noinput")
    assert_private(var)


@pytest.mark.lab
def test_bin_run_keeps_its_logs_and_database_private(tmp_path: Path) -> None:
    var, lab_dir = tmp_path / "var", Path(tempfile.mkdtemp(prefix="fedprobe-var-lab-", dir="/tmp"))
    lab_dir.chmod(0o755)  # the lab's servers may run as nobody
    port = free_port()
    env = embedded_env(var) | {
        "FEDPROBE_PORT": str(port),
        "FEDPROBE_LAB_DIR": str(lab_dir),
        "FEDPROBE_LAB_BASE_PORT": str(free_base_port()),
    }
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        run = subprocess.Popen(
            ["bin/run"], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, umask=0o022,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while "fedprobe is running" not in log.read_text():
            assert run.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        found = modes(var)
    finally:
        os.killpg(run.pid, signal.SIGTERM)
        run.wait(timeout=120)
        shutil.rmtree(lab_dir, ignore_errors=True)
    assert found["."] == "0o700", found
    private = ("web.log", "worker.log", "beat.log", "fedprobe.sqlite3", "admin-password")
    assert {name: found[name] for name in private} == dict.fromkeys(private, "0o600"), found
