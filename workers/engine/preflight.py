"""Before a run's clients start: check where they will connect, size the files, ask the
server what it is, and time one round trip.

The preflight runs in a child process of its own, like the clients: the credential reaches it
through the run's private folder and environment set only there, and nothing a protocol
library keeps per process (XrdCl's channels and their error state) outlives it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from ipaddress import ip_address
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

from workers.engine.backends import backend_for
from workers.engine.backends.base import Backend, Negotiated, OpenOptions
from workers.engine.credentials import Access
from workers.engine.deadline import Deadline
from workers.engine.egress_guard import PREFLIGHT
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError
from workers.engine.families import PINNED, addresses_for, endpoint_port, peer_address
from workers.engine.params import (
    METADATA_OPERATIONS,
    AddressFamily,
    Method,
    Operation,
    Pattern,
    RunParams,
)
from workers.engine.processes import child_answer, die_with, failure_of, raise_failure

# How long past its deadline a preflight may take to report before it is killed.
KILL_GRACE_S = 5.0

_T = TypeVar("_T")


@dataclass
class Found:
    """What the preflight found: file sizes, readv limits, what the server said of itself,
    and the endpoint's round-trip time: the fastest of its opens, its stats and the
    backend's round_trip_s (never below the real one: only calls that always ask the
    endpoint are timed, not readv limits or closes a backend may answer itself)."""

    sizes: dict[str, int] = field(default_factory=dict)
    vector_limits: tuple[int, int] | None = None
    rtt_s: float = math.inf
    negotiated: Negotiated = field(default_factory=Negotiated)
    # The address the preflight's connection to the endpoint went to (families.py); None
    # when it held none at the end (a backend that closes its connections).
    address: str | None = None

    def timed(self, request: Callable[[], _T]) -> _T:
        started = time.perf_counter()
        answer = request()
        self.rtt_s = min(self.rtt_s, time.perf_counter() - started)
        return answer


class _Sink(Protocol):
    def send(self, obj: object) -> None: ...


def run_preflight(
    ctx: ForkServerContext | SpawnContext, params: RunParams, access: Access, deadline: Deadline
) -> Found:
    """The preflight in a child process; raises what it raised (ProbeError, InvalidParams)."""
    answer = child_answer(
        ctx,
        preflight_main,
        (params, access, deadline),
        name="fedprobe-preflight",
        deadline=deadline,
        late="the preflight got no answer by its deadline",
        died="the preflight process died",
        grace_s=KILL_GRACE_S,
    )
    if isinstance(answer, Found):
        return answer
    raise_failure(answer)


def preflight_main(
    params: RunParams, access: Access, deadline: Deadline, sink: _Sink, run_pid: int
) -> None:
    """Process entry point: the answer is a Found or an (kind, class or field, message)."""
    os.setpgid(0, 0)  # a group of its own, ended with the run's process (die_with)
    die_with(run_pid)
    access.apply_environment()
    try:
        if access.guard is not None:
            access.guard.attach(PREFLIGHT)
        sink.send(preflight(params, access, deadline))
    except (ProbeError, InvalidParams) as exc:
        sink.send(failure_of(exc))


def preflight(params: RunParams, access: Access, deadline: Deadline) -> Found:
    """Check every URL against the egress policy, then stat every file (and ask the readv
    limits) before the clients start; untimed.

    Then the backend times a round trip to the first file's server on a connection it has
    opened already (its first request paid for connecting, TLS and logging in): XrdCl keeps
    its connection for one more stat; HTTP times HEADs on one kept-alive connection.
    """
    options = OpenOptions(
        user="fpplan", streams=1, deadline=deadline, egress=params.egress, access=access
    )
    found = Found()
    backend = backend_for(params.scheme)  # one protocol for all URLs (RunParams.validate)
    check_family(params, access)
    for url in dict.fromkeys(params.urls):
        backend.check_egress(url, options)
    if params.destination is not None and params.egress is not None:
        params.egress.check_url(params.destination)  # a third-party copy: both sides
    if params.operation == Operation.WRITE or params.operation in METADATA_OPERATIONS:
        _stat_only(params, backend, options, found)
        return found
    for url in dict.fromkeys(params.urls):
        if params.pattern == Pattern.VECTOR and params.method == Method.DIRECT:
            file = found.timed(partial(backend.open, url, options))
            found.sizes[url] = file.size
            limits = file.vector_limits()
            found.vector_limits = (limits.max_chunks, limits.max_chunk_bytes)
            file.close()
        else:
            found.sizes[url] = found.timed(partial(backend.stat_size, url, options))
        if found.sizes[url] >= 0:
            params.check_file_size(url, found.sizes[url])
    _round_trip_and_server(params, backend, options, found)
    return found


def _stat_only(params: RunParams, backend: Backend, options: OpenOptions, found: Found) -> None:
    """A write or a metadata storm sizes no file: each URL (a write's directory, a storm's file or
    directory) is stat'ed, so that one that is missing or refused fails before the clients
    start, and times the round trip."""
    for url in dict.fromkeys(params.urls):
        found.timed(partial(backend.stat_size, url, options))
    _round_trip_and_server(params, backend, options, found)


def _round_trip_and_server(
    params: RunParams, backend: Backend, options: OpenOptions, found: Found
) -> None:
    first = params.urls[0]
    found.rtt_s = min(found.rtt_s, backend.round_trip_s(first, options))
    found.negotiated = backend.describe(first, options)
    found.address = peer_address(endpoint_port(first))


def check_family(params: RunParams, access: Access) -> None:
    """A run pinned to a family needs each URL's host to have an address of it, and a run
    of one address ("each") that address among them: refused before any request."""
    family = AddressFamily(access.address_family)
    if family not in PINNED:
        return
    for url in dict.fromkeys(params.urls):
        parts = urlsplit(url)
        fitting = addresses_for(parts.hostname or "", endpoint_port(url), family)
        if access.address and ip_address(access.address) not in fitting:
            raise ProbeError(
                ErrorClass.REFUSED, f"{parts.hostname} no longer resolves to {access.address}"
            )
