"""Fixtures for the whole suite: the lab federation, real servers on loopback.

The session's lab runs the test profile (near 2 ms, far 10 ms) with files of 1, 4 and
16 MiB on a free block of ports, in a fresh dir under /tmp, and stops when the session ends.
For quick loops, reuse a lab you keep running:

    python -m workers.lab up --dir /tmp/dev-lab --file-size 1M --file-size 4M --file-size 16M
    FEDPROBE_TEST_LAB_DIR=/tmp/dev-lab pytest tests/workers/engine
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.lab import Lab
from workers.lab.errors import PortTaken
from workers.lab.files import MiB
from workers.lab.ports import free_base_port

TEST_FILE_SIZES = (1 * MiB, 4 * MiB, 16 * MiB)
_PORT_TRIES = 3


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    reuse = os.environ.get("FEDPROBE_TEST_LAB_DIR")
    if reuse and Lab(Path(reuse)).is_running():
        yield Lab(Path(reuse))
        return
    state_dir = Path(tempfile.mkdtemp(prefix="fedprobe-test-lab-", dir="/tmp"))
    try:
        started = _start_lab(state_dir)
        try:
            yield started
        finally:
            started.down()
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def _start_lab(state_dir: Path) -> Lab:
    """Start a lab on a free port block, trying another block if one gets taken meanwhile."""
    for attempt in range(_PORT_TRIES):
        lab = Lab(state_dir, base_port=free_base_port(), file_sizes=TEST_FILE_SIZES)
        lab.progress = None
        try:
            lab.up()
        except PortTaken:
            if attempt == _PORT_TRIES - 1:
                raise
            continue
        return lab
    raise AssertionError("unreachable")
