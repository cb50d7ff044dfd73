"""Tests written against this session's database, run again on the embedded SQLite default
(the database a new user meets first) in a pytest of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def pytest_on_sqlite(tmp_path: Path, *tests: str) -> str:
    """Run `tests` (paths or node ids, relative to the repository) on a fresh SQLite database
    in tmp_path; assert they pass and return pytest's output. Skipped when this session is
    on SQLite already: the tests ran on it."""
    if connection.vendor == "sqlite":
        pytest.skip("this session runs on SQLite: the tests themselves ran on it")
    env = {**os.environ, "DATABASE_URL": "", "FEDPROBE_VAR_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    return done.stdout


def this_file(path: str) -> str:
    """A test file's path relative to the repository (pass __file__)."""
    return str(Path(path).resolve().relative_to(ROOT))


# For the tests that compare PostgreSQL's own answer (percentile_cont) with ours: on SQLite
# there is nothing to compare with.
only_on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="compares with PostgreSQL's percentile_cont"
)
