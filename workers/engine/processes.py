"""How the engine starts its child processes (the preflight and the clients)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import select
import shutil
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import AuthenticationString  # type: ignore[attr-defined]  # private, untyped
from typing import Any, NoReturn

from workers.engine.deadline import Deadline
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError


def allow_children_in_pool_process() -> None:
    """Let a Celery (billiard) pool process start the engine's processes: billiard makes each
    pool process the stdlib's current process too, as a daemon (which multiprocessing forbids
    to have children) holding billiard's authkey (which the fork server refuses to pickle).
    The engine starts one stdlib process per client and ends them itself, by its deadline.
    Call it from Celery's worker_process_init signal."""
    process = multiprocessing.current_process()
    process.daemon = False
    process._config["authkey"] = AuthenticationString(process.authkey)  # type: ignore[attr-defined]


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """Start clients without multiprocessing re-importing the caller's __main__ in each.

    multiprocessing re-runs the parent's main script in every child it starts (as
    __mp_main__): per client start-up time, side effects of the caller's script, and a
    crash when there is no script file (python - < script, a REPL). Clients need nothing
    from __main__, so it is swapped for an empty module while they are being started.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def client_context() -> ForkServerContext | SpawnContext:
    """Clients fork from a clean server process that has the engine already imported."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["workers.engine.client", "workers.engine.preflight"])
        return ctx
    return multiprocessing.get_context("spawn")


def child_answer(
    ctx: ForkServerContext | SpawnContext,
    target: Callable[..., None],
    args: tuple[object, ...],
    *,
    name: str,
    deadline: Deadline,
    late: str,
    died: str,
    grace_s: float,
) -> Any:
    """What `target(*args, sender, this pid)` sends, run in a child process of `ctx` (the run's
    preflight, a file's facts): its one answer, awaited until `deadline` and `grace_s` more.
    Raises ProbeError `late` (timeout) when none comes by then, `died` when the child ended
    without one; the child is killed if it lives on."""
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=target, args=(*args, sender, os.getpid()), name=name, daemon=True)
    with main_module_hidden():
        process.start()
    sender.close()
    try:
        if not receiver.poll(max(0.0, deadline.remaining()) + grace_s):
            raise ProbeError(ErrorClass.TIMEOUT, late)
        return receiver.recv()
    except EOFError:
        raise ProbeError(ErrorClass.SERVER_ERROR, died) from None
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join(timeout=5)


# A child's failure as it crosses the pipe: ("probe", error class, message) or ("invalid",
# field, message).
Failure = tuple[str, str, str]


def failure_of(exc: ProbeError | InvalidParams) -> Failure:
    """What a child sends for a failure (`raise_failure` raises it again in the parent)."""
    if isinstance(exc, InvalidParams):
        return ("invalid", exc.field, exc.message)
    return ("probe", str(exc.error_class), exc.message)


def raise_failure(answer: Failure) -> NoReturn:
    """Raise again, in the parent, the failure a child sent (failure_of)."""
    kind, name, message = answer
    if kind == "invalid":
        raise InvalidParams(name, message)
    raise ProbeError(ErrorClass(name), message)


def die_with(run_pid: int) -> None:
    """End this process group (this process and any copy tool it runs) as soon as process
    `run_pid`, the one running the run, is gone: a client or preflight whose worker was
    killed must not go on measuring beside the next run.

    Not PR_SET_PDEATHSIG: the parent is the fork server, which outlives the worker for as
    long as its children hold the descriptor it watches. A thread waits on a pidfd of the
    run's process (polling it where pidfds are missing); it costs the measurement nothing.
    """
    threading.Thread(target=_watch, args=(run_pid,), name="fedprobe-die-with", daemon=True).start()


def _watch(run_pid: int) -> None:
    try:
        pidfd = os.pidfd_open(run_pid)
    except ProcessLookupError:
        _end_group()
        return
    except OSError:
        while _alive(run_pid):
            time.sleep(0.5)
        _end_group()
        return
    select.select([pidfd], [], [])
    _end_group()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _end_group() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def tool_argv(argv: list[str]) -> list[str]:
    """A copy tool's command line, killed too when its client dies (setpriv, util-linux)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return argv
    return [setpriv, "--pdeathsig", "KILL", "--", *argv]
