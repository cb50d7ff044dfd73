"""Shared by the benchmarks: a lab to measure, and a forked worker like the engine's clients."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from workers.lab import Lab


@contextlib.contextmanager
def running_lab(
    lab_dir: str | None, profile: str, file_sizes: list[int] | None = None, base_port: int = 26000
) -> Iterator[Lab]:
    """The lab in `lab_dir` if it runs, else a fresh one for the length of the benchmark."""
    if lab_dir:
        lab = Lab(Path(lab_dir))
        if lab.is_running():
            yield lab
            return
    state = Path(tempfile.mkdtemp(prefix="fedprobe-bench-lab-", dir="/tmp"))
    os.chmod(state, 0o755)
    lab = Lab(state, profile=profile, base_port=base_port, file_sizes=file_sizes)
    print(f"starting a {profile} lab in {state} ...", file=sys.stderr)
    lab.up()
    try:
        yield lab
    finally:
        lab.down()


def in_client_process(function: Callable[..., Any], *args: Any) -> Any:
    """Run `function(*args)` in a process forked the way the engine forks its clients."""
    ctx = multiprocessing.get_context("forkserver")
    with ctx.Pool(1) as pool:
        return pool.apply(function, args)
