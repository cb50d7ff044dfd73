"""Delete what a write or copy run left behind: its files, by their names, and nothing else.

A write's client deletes its file itself, also after a failure, the deadline or a SIGTERM
(client_ops.py); a client killed outright (SIGKILL, its worker gone) cannot, nor can a copy
client killed mid-copy (tpc.py). The engine sweeps the run's directories after every write
run, and a copy run's destination after a client was cut (driver.py); the web application's
reaper calls `cleanup_written` for a run whose worker died. Only names written_names(run_tag)
matches (fedprobe-<run_tag>-c<client>-f<k>) are ever deleted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

from workers.engine.backends import backend_for
from workers.engine.backends.base import OpenOptions
from workers.engine.credentials import Access, Credential
from workers.engine.deadline import Deadline
from workers.engine.egress import EgressPolicy
from workers.engine.egress_guard import EgressGuard
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError
from workers.engine.guarding import guarded_secrets
from workers.engine.params import Operation, RunParams, in_directory, written_names
from workers.engine.processes import (
    child_answer,
    client_context,
    die_with,
    failure_of,
    raise_failure,
)

CLEANUP_TIMEOUT_S = 60.0
KILL_GRACE_S = 5.0


class _Sink(Protocol):
    def send(self, obj: object) -> None: ...


# What the egress guard calls a cleanup process in its refusals.
CLEANUP = "cleanup"


def cleanup_written(
    *,
    run_tag: str,
    urls: Sequence[str],
    credential: Credential | None = None,
    ca_dir: str | None = None,
    egress: EgressPolicy | None = None,
    file_roots: tuple[str, ...] | None = None,
    credential_hosts: tuple[str, ...] = (),
    timeout_s: float = CLEANUP_TIMEOUT_S,
) -> list[str]:
    """Delete every fedprobe-<run_tag>-* file in the directories `urls`; return their URLs.

    InvalidParams (naming the field) for a directory a write could not have used or a
    malformed tag; ProbeError when an endpoint refuses or fails (some files may be left).
    Runs in a child process, as the preflight does: the credential reaches it through a
    private folder, and nothing of XrdCl stays in the caller.
    """
    if not run_tag:
        raise InvalidParams("run_tag", "a cleanup needs the run's tag")
    params = RunParams(
        urls=tuple(urls),
        operation=Operation.WRITE,
        run_tag=run_tag,
        credential=credential,
        credential_hosts=credential_hosts,
        ca_dir=ca_dir,
        egress=egress,
        file_roots=file_roots,
    )
    params.validate()
    # As a run's: XrdCl follows a redirect with the token; the guard holds it to the
    # endpoint's hosts (and its listed credential_hosts) and the egress policy.
    with guarded_secrets(params) as (access, guard):
        deadline = Deadline.after(timeout_s)
        return sweep_in_child(params.without_credential(), access, deadline, guard)


def sweep_in_child(
    params: RunParams, access: Access, deadline: Deadline, guard: EgressGuard | None = None
) -> list[str]:
    """`sweep` in a child process of the engine's kind; raises what it raised, or the
    connection `guard` refused it (class egress) when that came first: XrdCl only says
    "Socket error: permission denied"."""
    answer = child_answer(
        client_context(),
        _sweep_main,
        (params, access, deadline),
        name="fedprobe-cleanup",
        deadline=deadline,
        late="the cleanup got no answer by its deadline",
        died="the cleanup process died",
        grace_s=KILL_GRACE_S,
    )
    if isinstance(answer, list):
        return [str(url) for url in answer]
    try:
        raise_failure(answer)
    except ProbeError as exc:
        raise (exc if guard is None else guard.explain(exc, CLEANUP)) from None


def _sweep_main(
    params: RunParams, access: Access, deadline: Deadline, sink: _Sink, run_pid: int
) -> None:
    os.setpgid(0, 0)
    die_with(run_pid)
    access.apply_environment()
    try:
        if access.guard is not None:
            access.guard.attach(CLEANUP)
        sink.send(sweep(params, access, deadline))
    except (ProbeError, InvalidParams) as exc:
        sink.send(failure_of(exc))
    except Exception as exc:  # a bug of ours: said as such, not as "the process died"
        sink.send(
            ("probe", str(ErrorClass.HARNESS), f"cleanup failed: {type(exc).__name__}: {exc}")
        )


def sweep(params: RunParams, access: Access, deadline: Deadline) -> list[str]:
    """List each directory and delete the run's files in it (a directory that does not
    exist holds none)."""
    assert params.run_tag is not None
    ours = written_names(params.run_tag)
    options = OpenOptions(
        user="fpclean", streams=1, deadline=deadline, egress=params.egress, access=access
    )
    backend = backend_for(params.scheme)
    deleted = []
    for directory in dict.fromkeys(params.urls):
        backend.check_egress(directory, options)
        try:
            names = backend.list_names(directory, options)
        except ProbeError as exc:
            if exc.error_class == ErrorClass.NOT_FOUND:
                continue
            raise
        for name in sorted(n for n in names if ours.fullmatch(n)):
            url = in_directory(directory, name)
            try:
                backend.delete(url, options)
            except ProbeError as exc:
                # Gone since the listing: its server removed it (a native TPC's, after a cut).
                if exc.error_class == ErrorClass.NOT_FOUND:
                    continue
                raise
            deleted.append(url)
    return deleted
