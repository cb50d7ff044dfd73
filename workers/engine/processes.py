"""How the engine starts its child processes (the preflight and the clients)."""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import types
from collections.abc import Iterator
from multiprocessing.context import ForkServerContext, SpawnContext


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
