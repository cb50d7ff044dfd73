"""`python -m workers.engine URL --nagios` against the real lab, as a monitoring core runs it:
one status line by the guidelines, exit 0/1/2/3."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import ManagementUtility

from tests.workers.engine.conftest import FILE_4M, lab_file
from tests.workers.engine.test_plugin import check_plugin_line

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[3]


def plugin(*args: str) -> tuple[int, str, list[str], str]:
    """Run the plugin: (exit status, state, perfdata items, line)."""
    env = {k: v for k, v in os.environ.items() if k != "FEDPROBE_CA_DIR"}
    done = subprocess.run(
        [sys.executable, "-m", "workers.engine", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.count("\n") == 1, done.stdout + done.stderr  # one line, nothing else
    state, perf = check_plugin_line(done.stdout)
    return done.returncode, state, perf, done.stdout


def labels(perf: list[str]) -> dict[str, str]:
    return {item.split("=")[0].strip("'"): item.split("=", 1)[1] for item in perf}


def test_a_healthy_endpoint_is_ok_with_perfdata_and_the_thresholds_that_applied(lab: Any) -> None:
    url, _ = lab_file(lab, "local-http", FILE_4M)
    code, state, perf, line = plugin(
        url,
        "--nagios",
        "--clients",
        "2",
        "--warning",
        "throughput=0.001:,open_time=~:30",
        "--critical",
        "availability=50:",
    )
    assert (code, state) == (0, "OK"), line
    found = labels(perf)
    assert found.keys() == {"throughput_mbps", "open_s", "availability", "bytes_read"}
    assert found["throughput_mbps"].split(";")[1:3] == ["0.001:", ""]
    assert found["open_s"].endswith("s;~:30;;0")
    assert found["availability"] == "100%;;50:;0;100"
    # Two clients read a tenth of the 4 MiB file each.
    assert found["bytes_read"].startswith(f"{2 * -(-4 * 1024 * 1024 // 10)}B")
    assert "2" in line and "availability 100%" in line


def test_throughput_below_the_ranges_trips_warning_then_critical(lab: Any) -> None:
    url, _ = lab_file(lab, "local-root", FILE_4M)
    code, state, _, line = plugin(url, "--nagios", "--warning", "1000000:")
    assert (code, state) == (1, "WARNING"), line
    assert "is below 1000000" in line
    code, state, _, line = plugin(
        url, "--nagios", "--warning", "1000000:", "--critical", "open_time=@0:60"
    )
    assert (code, state) == (2, "CRITICAL"), line
    assert "is inside 0..60" in line


def test_a_missing_file_is_critical_with_its_error_class(lab: Any) -> None:
    url, _ = lab_file(lab, "local-http", FILE_4M)
    code, state, perf, line = plugin(url.replace("file-4M", "no-such-file"), "--nagios")
    assert (code, state) == (2, "CRITICAL"), line
    assert "failed: not-found:" in line
    assert labels(perf)["bytes_read"].startswith("0B")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--warning", "speed=5"], "--warning: unknown metric 'speed'"),
        (["--critical", "20:10"], "--critical: '20:10' starts above its end"),
        (["--clients", "0"], "--clients:"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--token-file", "/nonexistent/token"], "--token-file:"),
    ],
)
def test_bad_arguments_are_unknown_naming_the_flag(lab: Any, args: list[str], named: str) -> None:
    url, _ = lab_file(lab, "local-http", FILE_4M)
    code, state, perf, line = plugin(url, "--nagios", *args)
    assert (code, state) == (3, "UNKNOWN"), line
    assert named in line
    assert perf == []


def test_an_expired_token_is_the_testers_fault_and_never_shown(lab: Any, tmp_path: Path) -> None:
    url, _ = lab_file(lab, "local-https", FILE_4M)
    ca = ["--ca-dir", str(lab.ca_dir())]
    token = lab.mint_token(expired=True)
    token_file = tmp_path / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    code, state, _, line = plugin(url, "--nagios", "--token-file", str(token_file), *ca)
    assert (code, state) == (3, "UNKNOWN"), line
    assert "the tester's fault: failed: auth: the token expired at" in line
    assert token not in line and token.split(".")[1] not in line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--critical", "open_time=x"], "--critical: 'x' is not a range"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_manage_py_probe_is_the_same_plugin(
    lab: Any, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    url, _ = lab_file(lab, "local-http", FILE_4M)
    with pytest.raises(SystemExit) as exited:
        ManagementUtility(["manage.py", "probe", url, "--nagios", *args]).execute()
    out = capsys.readouterr().out
    assert exited.value.code == 3, out
    assert check_plugin_line(out)[0] == "UNKNOWN"
    assert said in out


def test_thresholds_without_nagios_are_bad_input(lab: Any) -> None:
    url, _ = lab_file(lab, "local-http", FILE_4M)
    done = subprocess.run(
        [sys.executable, "-m", "workers.engine", url, "--warning", "10:"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--warning and --critical need --nagios" in done.stderr
