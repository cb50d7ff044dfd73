"""bin/test-stages, the stages bin/test runs after its installs, lint and type checks: every
stage runs even after one failed, the sqlite stage on an empty DATABASE_URL, a summary names
each stage's outcome, and the exit status fails when any stage failed or none selected a test.

The stages run here on a test file of the test's own (outside the repository, no plugins),
so each stage is a real pytest session that takes about a second."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.celery_worker import REPO

PROBES = """
import os
from pathlib import Path

import pytest


def test_ordinary() -> None:
    pass


@pytest.mark.sqlite
def test_seen_by_two_stages() -> None:
    with Path(os.environ["STAGES_PROBE_LOG"]).open("a") as log:
        log.write(repr(os.environ.get("DATABASE_URL")) + "\\n")


@pytest.mark.faults
def test_fault() -> None:
    assert os.environ.get("STAGES_PROBE_FAULT") != "fail"


@pytest.mark.compose
def test_compose_stack() -> None:
    with Path(os.environ["STAGES_PROBE_LOG"]).open("a") as log:
        log.write("compose\\n")
"""


def stages(tmp_path: Path, *args: str, fault: str = "") -> subprocess.CompletedProcess[str]:
    probes = tmp_path / "test_probes.py"
    probes.write_text(PROBES)
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env |= {
        "DATABASE_URL": "postgres://outer",
        "STAGES_PROBE_LOG": str(tmp_path / "seen.log"),
        "STAGES_PROBE_FAULT": fault,
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # no Django, no fuzzer: a session takes a second
    }
    argv = [str(REPO / "bin" / "test-stages"), str(probes), "-p", "no:cacheprovider", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=600)


def outcomes(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """{stage: outcome} from the summary's lines ("bin/test: quick    passed    0 min 01 s")."""
    rows = done.stderr.split("bin/test: stage    outcome", 1)[1].splitlines()[1:6]
    return {row.split()[1]: " ".join(row.split()[2:-4]) for row in rows}


def test_every_stage_runs_after_a_failed_one_and_the_failure_fails_the_whole(
    tmp_path: Path,
) -> None:
    done = stages(tmp_path, fault="fail")
    assert done.returncode == 1, done.stderr
    assert outcomes(done) == {
        "quick": "passed",
        "sqlite": "passed",
        "faults": "failed (pytest exit 1)",
        "browser": "selected no test",
        "compose": "passed",
    }
    # The sqlite test ran in the quick stage and again with the embedded database's empty URL;
    # the compose test in the compose stage only.
    seen = ["'postgres://outer'", "''", "compose"]
    assert (tmp_path / "seen.log").read_text().splitlines() == seen
    # Each stage that ran tests says which were slowest (bin/test's CI log shows where time goes).
    assert done.stdout.count("slowest 25 durations") == 4, done.stdout


def test_with_arguments_a_stage_may_select_nothing(tmp_path: Path) -> None:
    done = stages(tmp_path)
    assert done.returncode == 0, done.stderr
    assert outcomes(done)["browser"] == "selected no test"
    assert "bin/test: total " in done.stderr


def test_no_stage_selecting_a_test_is_a_failure(tmp_path: Path) -> None:
    done = stages(tmp_path, "-k", "no_such_test")
    assert done.returncode == 1
    assert set(outcomes(done).values()) == {"selected no test"}
    assert "pytest collected no tests: that is a failure" in done.stderr
