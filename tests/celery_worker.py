"""Real Celery worker processes for tests: started, awaited, stopped, or killed like a lost host.

Each worker is `python -m celery -A webapp worker` in a session of its own, so every process
it starts (pool children, the engine's fork server and clients, which lead their own process
groups) can be found by session id and none outlives the test. The session id is the main
process's pid, which the kernel keeps reserved only while a member lives or the main process
is an unreaped zombie: members are killed before the main process is reaped, never after.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
# The reaper of the test workers and beats (production: 60 s stale, every 30 s), so that a
# fault test sees the real beat and reaper end a killed worker's runs in seconds. The
# staleness still outlasts the waits of a test between a kill and its check that the runs
# are still running (5 s for the clients to die, 5 s for their connections to close).
REAPER_STALE_S = 12
REAPER_PERIOD_S = 1
REAPER_ENV = {
    "FEDPROBE_REAPER_STALE_S": str(REAPER_STALE_S),
    "FEDPROBE_REAPER_PERIOD_S": str(REAPER_PERIOD_S),
}


class WorkerProcess:
    """One `celery worker` consuming `queues`, logging to `log_path`."""

    def __init__(
        self,
        name: str,
        queues: Sequence[str],
        env: Mapping[str, str],
        log_path: Path,
        concurrency: int = 1,
        *,
        argv: Sequence[str] = (),
    ) -> None:
        """`argv`: another program that runs a Celery worker named NAME@host (a remote
        vantage point's agent), instead of `celery -A webapp worker`."""
        self.argv = tuple(argv)
        self.name = name
        self.concurrency = concurrency
        self.queues = tuple(queues)
        # Python stacks of every thread on a fatal signal (see diagnose).
        self.env = {**env, "PYTHONFAULTHANDLER": "1"}
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def hostname(self) -> str:
        """The worker's node name, which services record as a run's `worker`."""
        return f"{self.name}@{socket.gethostname()}"

    def start(self) -> WorkerProcess:
        argv = list(self.argv) or [
            sys.executable, "-m", "celery", "-A", "webapp", "worker",
            "-Q", ",".join(self.queues), "--concurrency", str(self.concurrency), "-P", "prefork",
            "--without-heartbeat", "--without-gossip", "--without-mingle",
            "-n", f"{self.name}@%h", "-l", "INFO",
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        return self

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> WorkerProcess:
        """Wait for the worker's "ready." line; fail with its log if it exits or takes too long."""
        deadline = time.monotonic() + timeout_s
        while f"{self.hostname} ready." not in self.log():
            if self._main_exited():
                self.kill_host()
                raise RuntimeError(f"celery worker {self.name} exited:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"celery worker {self.name} not ready after {timeout_s} s")
            time.sleep(0.1)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """Warm shutdown (SIGTERM: the running task ends first), then kill what is left."""
        self.terminate()
        self.wait_stopped()

    def terminate(self) -> None:
        """Begin a warm shutdown (SIGTERM), not waiting for it: see stop_workers."""
        process = self.process
        if process is not None and process.returncode is None and not self._main_exited():
            process.send_signal(signal.SIGTERM)

    def wait_stopped(self) -> None:
        """Wait for the shutdown terminate began, then kill what is left."""
        if self.process is None or self.process.returncode is not None:
            return
        if not self._main_exited():
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while not self._main_exited() and time.monotonic() < deadline:
                time.sleep(0.05)
        self.kill_host()

    def kill_host(self) -> None:
        """SIGKILL every process of the worker at once, as if its host died."""
        if self.process is None or self.process.returncode is not None:
            return  # reaped: its session id may belong to someone else by now
        while pids := session_members(self.process.pid):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        self.process.wait()

    def diagnose(self) -> str:
        """What the worker is doing, for a test that waited in vain: each process's kernel wait
        channel, then Python stacks (the main process's, logged by Celery on SIGUSR1; the pool
        processes', dumped by faulthandler as SIGABRT ends them) and the log's tail."""
        if self.process is None or self._main_exited():
            return f"worker {self.name} is not running\n{self.log()[-4000:]}"
        lines = [f"worker {self.name}:"]
        for pid in session_members(self.process.pid):
            lines.append(f"  {pid} {_proc(pid, 'cmdline')[:90]!r} wchan={_proc(pid, 'wchan')}")
        os.kill(self.process.pid, signal.SIGUSR1)
        for pid in session_members(self.process.pid):
            if _parent(pid) == self.process.pid:
                os.kill(pid, signal.SIGABRT)
        time.sleep(1.0)
        return "\n".join(lines) + "\n" + self.log()[-12000:]

    def _main_exited(self) -> bool:
        """Whether the main process has exited, without reaping it (see the module docstring)."""
        assert self.process is not None
        return self.process.returncode is not None or _state(self.process.pid) in {"Z", ""}


def stop_workers(workers: Sequence[WorkerProcess]) -> None:
    """Stop several workers at once: a warm shutdown takes seconds, and theirs overlap."""
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.wait_stopped()


def wait_until(
    condition: Callable[[], object], timeout_s: float, what: str, *workers: WorkerProcess
) -> None:
    """Poll `condition` until it holds; past `timeout_s`, fail saying what each worker does."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            diagnosis = "\n".join(worker.diagnose() for worker in workers)
            raise AssertionError(f"{what}: not after {timeout_s} s\n{diagnosis}")
        time.sleep(0.1)


def session_members(session_id: int) -> list[int]:
    """Live (not zombie) processes in a session."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and fields[0] != "Z" and int(fields[3]) == session_id:
                members.append(int(entry.name))
    return members


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat after the command name: state, ppid, pgrp, session, ..."""
    stat = _proc(pid, "stat")
    # The command name is in parentheses and may hold spaces and parentheses itself.
    return stat[stat.rindex(")") + 2 :].split() if stat else []


def _state(pid: int) -> str:
    fields = _stat(pid)
    return fields[0] if fields else ""


def _parent(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[1]) if fields else 0


def _proc(pid: int, name: str) -> str:
    try:
        return Path(f"/proc/{pid}/{name}").read_text(errors="replace").replace("\0", " ")
    except OSError:
        return ""


def database_url(settings_dict: Mapping[str, object]) -> str:
    """DATABASE_URL naming the same PostgreSQL database as a Django connection's settings."""
    user = quote(str(settings_dict.get("USER") or ""), safe="")
    password = quote(str(settings_dict.get("PASSWORD") or ""), safe="")
    auth = f"{user}:{password}@" if password else f"{user}@" if user else ""
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgres://{auth}{settings_dict.get('HOST') or ''}{port}/{settings_dict['NAME']}"
