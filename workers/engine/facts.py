"""What a storage server says of a file without it being read: its size and adler32.

Adding a test file asks this instead of making the operator type both. It runs as a run's
preflight does: the credential reaches a child process of its own through a private folder,
the egress policy (and the credential's scope) hold its connections, a file:// URL must be
under the host's file roots, and everything ends by one deadline. Each backend says how it
asks (`Backend.file_facts`): XRootD stat and checksum query, one HTTP HEAD with
Want-Digest, os.stat and the file's own bytes, GridFTP's size only.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Protocol
from urllib.parse import urlsplit

from workers.engine.backends import backend_for
from workers.engine.backends.base import FileFacts, OpenOptions
from workers.engine.credentials import Access
from workers.engine.deadline import Deadline
from workers.engine.driver import explained
from workers.engine.egress_guard import PREFLIGHT
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.guarding import guarded_secrets
from workers.engine.params import Method, RunParams
from workers.engine.processes import child_answer, client_context, die_with

# Without a timeout of the caller's: a stat, a checksum the server may compute on demand
# (XRootD reads the whole file the first time), or a local file's bytes.
DEFAULT_TIMEOUT_S = 30.0
KILL_GRACE_S = 5.0

__all__ = ["FileFacts", "file_facts"]


class _Sink(Protocol):
    def send(self, obj: object) -> None: ...


def file_facts(params: RunParams) -> FileFacts:
    """The size and adler32 of `params.urls[0]` with the run's credential, egress policy, CA
    folder and file roots (Endpoint.engine_params gives them) within `params.timeout_s`.

    Raises InvalidParams for parameters a run would refuse (a file:// URL outside the file
    roots, a credential for another protocol). A failure to ask (refused, not found, no
    answer) is no exception: the size is then None and says why, and no checksum is asked.
    """
    checked = replace(params, method=Method.COPY)  # COPY: valid for every protocol
    checked.validate()
    deadline = Deadline.after(params.timeout_s or DEFAULT_TIMEOUT_S)
    credential = params.credential
    try:
        if credential is not None:
            credential.check_valid(until=datetime.now(UTC))
        with guarded_secrets(params) as (guarded, guard):
            try:
                return _ask_in_child(client_context(), params.urls[0], guarded, params, deadline)
            except ProbeError as exc:
                raise (exc if guard is None else guard.explain(exc, PREFLIGHT)) from None
    except ProbeError as exc:
        exc = explained(exc, credential, params.ca_dir, params.urls[0])
        not_asked = "not asked: the server did not answer the stat"
        return FileFacts(None, f"stat failed: [{exc.error_class}] {exc.message}", None, not_asked)


def _ask_in_child(
    ctx: ForkServerContext | SpawnContext,
    url: str,
    access: Access,
    params: RunParams,
    deadline: Deadline,
) -> FileFacts:
    options = OpenOptions(
        user="fpfacts", streams=1, deadline=deadline, egress=params.egress, access=access
    )
    answer = child_answer(
        ctx,
        facts_main,
        (url, options),
        name="fedprobe-file-facts",
        deadline=deadline,
        late=f"no answer from {url} by the deadline",
        died="the process asking the server died",
        grace_s=KILL_GRACE_S,
    )
    if isinstance(answer, FileFacts):
        return answer
    error_class, message = answer
    raise ProbeError(ErrorClass(error_class), message)


def facts_main(url: str, options: OpenOptions, sink: _Sink, parent_pid: int) -> None:
    """Process entry point: the answer is a FileFacts or an (error class, message)."""
    os.setpgid(0, 0)  # a group of its own, ended with the asking process (die_with)
    die_with(parent_pid)
    options.access.apply_environment()
    try:
        if options.access.guard is not None:
            options.access.guard.attach(PREFLIGHT)
        backend = backend_for(urlsplit(url).scheme.lower())
        backend.check_egress(url, options)
        sink.send(backend.file_facts(url, options))
    except ProbeError as exc:
        sink.send((str(exc.error_class), exc.message))
    except Exception as exc:  # a library's surprise is the answer, not a crash
        sink.send((str(ErrorClass.SERVER_ERROR), f"{type(exc).__name__}: {exc}"))
