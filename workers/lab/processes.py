"""Starting and stopping the lab's processes by pid, and telling whether they still run.

Each process starts in a session of its own (its pid is its process group), with a pid
file under run/pids/. A pid only counts as the lab's while /proc/PID/cmdline still names a
file of this lab's run dir, so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from workers.lab.servers import ServerProcess

STOP_WAIT_S = 5.0

# Popen objects of the processes this interpreter started, so they are reaped when stopped.
_children: dict[int, subprocess.Popen[bytes]] = {}


def spawn(
    process: ServerProcess, pid_dir: Path, output: Path, cwd: Path, env: Mapping[str, str]
) -> int:
    with output.open("ab") as out:
        child = subprocess.Popen(
            process.argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    _children[child.pid] = child
    write_pid_file(pid_dir / f"{process.name}.pid", child.pid)
    _wait_for_command_line(child)
    return child.pid


def _wait_for_command_line(child: subprocess.Popen[bytes]) -> None:
    """Right after the exec, /proc/PID/cmdline can still be empty for a moment (seen under
    gVisor): wait for it, so that is_alive never mistakes a starting server for a dead one."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and child.poll() is None:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{child.pid}/cmdline").read_bytes():
                return
        time.sleep(0.001)


def write_pid_file(path: Path, pid: int) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(f"{pid}\n")
    partial.replace(path)


def read_pid_files(pid_dir: Path) -> dict[str, int]:
    pids = {}
    for path in sorted(pid_dir.glob("*.pid")):
        with contextlib.suppress(OSError, ValueError):
            pids[path.stem] = int(path.read_text().strip())
    return pids


def is_alive(pid: int, marker: str) -> bool:
    """Does `pid` run (not a zombie) with `marker` in its command line?"""
    _reap(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in {"Z", "X"} and marker.encode() in cmdline


def exit_status(pid: int, wait_s: float = 1.0) -> int | None:
    """The exit status of a process this interpreter started and that has ended."""
    child = _children.get(pid)
    if child is None:
        return None
    with contextlib.suppress(subprocess.TimeoutExpired):
        return child.wait(wait_s)
    return None


def stop(pids: Iterable[int], marker: str, wait_s: float = STOP_WAIT_S) -> None:
    """SIGTERM the processes and their groups, wait, SIGKILL what is left, wait for it."""
    groups = set(pids)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _lab_processes(groups, marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while _lab_processes(groups, marker) and time.monotonic() < deadline:
            time.sleep(0.02)
    for pid in groups:
        _children.pop(pid, None)


def _lab_processes(groups: set[int], marker: str) -> set[int]:
    """Live lab processes that are one of `groups` or a member of one (GridFTP sessions)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        with contextlib.suppress(OSError, IndexError, ValueError):
            pgid = int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[2])
            if (pid in groups or pgid in groups) and is_alive(pid, marker):
                found.add(pid)
    return found


def _reap(pid: int) -> None:
    child = _children.get(pid)
    if child is not None:
        child.poll()
