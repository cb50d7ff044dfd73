"""`manage.py probe` and `python -m workers.engine` as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.contract import RUN_KEYS
from tests.workers.engine.conftest import FILE_4M, lab_file

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[3]


def probe(
    lab: Any, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if k != "FEDPROBE_CA_DIR"}
    env = dict(inherited, FEDPROBE_LAB_DIR=str(lab.state_dir), **(env or {}))
    return subprocess.run(
        [sys.executable, "manage.py", "probe", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_probe_json_carries_the_run_fields_and_checks_the_lab_checksum(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_4M)
    done = probe(lab, url, "--read-size", "1M", "--fraction", "1", "--clients", "2", "--json")
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run.keys() >= RUN_KEYS
    assert run["checksum"] == "ok"  # the adler32 came from the running lab's manifest
    assert set(run["op_latency_us"]) >= {"p50", "p90", "p99", "max"}
    assert len(run["clients"]) == 2


def test_probe_prints_a_summary_table(lab: Any) -> None:
    url, _ = lab_file(lab, "local-http", FILE_4M)
    done = probe(lab, url, "--pattern", "random", "--read-size", "4k", "--clients", "2")
    assert done.returncode == 0, done.stderr
    for label in ("status", "succeeded", "throughput", "latency us p50", "served by"):
        assert label in done.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--clients", "0"], "clients"),
        (["--clients", "300"], "clients"),
        (["--fraction", "1.5"], "fraction"),
        (["--fraction", "0"], "fraction"),
        (["--read-size", "0"], "read_size"),
        (["--read-size", "65M"], "read_size"),
        (["--read-size", "8M"], "read_size"),  # larger than the 4 MiB file
    ],
)
def test_bad_input_exits_2_naming_the_field_and_starts_nothing(
    lab: Any, relay_to: Any, args: list[str], field: str
) -> None:
    host, url = relay_to("local-root", FILE_4M)
    done = probe(lab, url, *args)
    assert done.returncode == 2
    assert field in done.stderr
    # Out-of-bounds values never reach the endpoint; the file-size check needs one stat.
    assert host.stats()["test"].connections_total <= (1 if field == "read_size" else 0)


@pytest.mark.parametrize("url", ["gopher://127.0.0.1/x", "-rf", "--version=1"])
def test_bad_url_exits_2(lab: Any, url: str) -> None:
    done = probe(lab, "--", url)
    assert done.returncode == 2
    assert "url" in done.stderr


def test_unparseable_size_exits_2_naming_the_option() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "workers.engine", "file:///x", "--read-size", "4q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "--read-size" in done.stderr
    assert "usage:" not in done.stderr  # one line naming the option, not the whole usage
    assert done.stderr.count("\n") == 1


def _engine(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workers.engine", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_failed_run_shows_dashes_where_nothing_was_measured() -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    done = _engine(f"root://127.0.0.1:{port}//nothing", "--anonymous")
    assert done.returncode == 1
    rows = dict(line.split(None, 1) for line in done.stdout.splitlines()[:14] if line.strip())
    assert rows["wall"].strip() == "-"
    assert rows["throughput"].strip() == "-"
    assert rows["cpu"].strip() == "-"
    assert "0.00" not in done.stdout
    assert "run error: refused" in done.stdout


def test_a_checksum_failure_keeps_the_first_byte_time(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_4M)
    done = probe(
        lab, url, "--read-size", "16k", "--fraction", "1", "--adler32", "00000001", "--json"
    )
    assert done.returncode == 1
    (client,) = json.loads(done.stdout)["clients"]
    assert client["error"]["class"] == "checksum"
    assert client["ops"] == 256
    assert 0 < client["open_s"] < client["ttfb_s"] < client["wall_s"]


def test_a_skip_plan_that_cannot_reach_the_fraction_is_warned_about(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_4M)
    done = _engine(url, "--pattern", "skip", "--skip", "3", "--fraction", "0.5", "--json")
    assert done.returncode == 0, done.stderr
    assert "warning: fraction: pattern skip with skip 3 reads one block in 4" in done.stderr
    assert "this run reads 25%, not 50%" in done.stderr
    assert json.loads(done.stdout)["bytes_requested"] == 4 * 1024 * 1024 // 4
    quiet = _engine(url, "--pattern", "skip", "--skip", "3", "--fraction", "0.25", "--json")
    assert "warning" not in quiet.stderr


def test_run_from_a_script_on_stdin_works(lab: Any) -> None:
    """multiprocessing would re-run the caller's __main__ in each client: not for us."""
    url, _ = lab_file(lab, "local-root", FILE_4M)
    script = (
        "from workers.engine import RunParams, run_probe\n"
        f"print(run_probe(RunParams(urls=({url!r},), clients=2)).status)\n"
    )
    done = subprocess.run(
        [sys.executable, "-"],
        input=script,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "succeeded", done.stderr


def test_manage_py_probe_verifies_against_the_workers_ca_folder(lab: Any, tmp_path: Path) -> None:
    """Embedded mode: VAR_DIR/ca (made by `lab register`) is FEDPROBE_CA_DIR, for probe too."""
    shutil.copytree(lab.ca_dir(), tmp_path / "ca", symlinks=True)
    token = tmp_path / "token"
    token.write_text(lab.mint_token())
    url = lab.endpoint("local-roots").file_url("/fedprobe/file-1M")
    done = probe(
        lab, url, "--token-file", str(token), "--json", env={"FEDPROBE_VAR_DIR": str(tmp_path)}
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert json.loads(done.stdout)["auth"] == "token"
