"""A run's result: its clients' records folded into the run JSON (docs/engine.md).

The run JSON's shape is defined here once, as TypedDicts: what `RunResult.to_json` and
`ClientResult.to_json` build, and what the web application stores and shows.
"""

from __future__ import annotations

import ipaddress
import statistics
from dataclasses import dataclass, field
from types import UnionType
from typing import (
    Any,
    NotRequired,
    TypedDict,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from workers.engine.backends.base import Negotiated
from workers.engine.credentials import AuthMethod
from workers.engine.errors import ErrorClass, InvalidParams
from workers.engine.families import PINNED, family_of
from workers.engine.histogram import LatencyHistogram
from workers.engine.metrics import METADATA_KINDS, ClientResult, op_kinds
from workers.engine.params import RunParams


class LatencySummaryJson(TypedDict):
    """A latency histogram summed up, in microseconds (LatencyHistogram.summary_us)."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float
    mean: float


class LatencyHistJson(TypedDict):
    """A latency histogram whole (LatencyHistogram.to_json): bucket -> count, in ns."""

    buckets: dict[str, int]
    count: int
    max_ns: int
    total_ns: int


class PhaseJson(TypedDict):
    """One phase of a client (open, read, copy, close), seconds from the release."""

    phase: str
    start_s: float
    end_s: float


# "class" is a keyword: these two are spelled the functional way.
ClientErrorJson = TypedDict("ClientErrorJson", {"class": str, "message": str, "wasted_s": float})
"""Why a client stopped early (an ErrorClass value), and the seconds it ran before that."""

# "phase": "credential" only for a credential problem found before any request (errors.py).
RunErrorJson = TypedDict(
    "RunErrorJson",
    {"class": str, "message": str, "client": int | None, "phase": NotRequired[str]},
)
"""One error of a run: a failed client's, or the run's own (client None: the preflight)."""


class TpcMarkerJson(TypedDict):
    """One perf marker of a third-party copy: its arrival (seconds from the release) and the
    bytes copied so far of the file being copied."""

    t_s: float
    bytes: int


class TpcJson(TypedDict):
    """A third-party copy's view (metrics.TpcRecord): a client's, or the run's sum."""

    mode: str  # "http" (HTTP-TPC) or "root" (XRootD-native)
    source: str
    destination: str
    markers: list[TpcMarkerJson]
    start_s: float | None  # time to start: from the COPY to its first perf marker
    copy_s: float
    bytes: int
    rate_mbps: float
    remote_connections: list[str]


class ClientRecordJson(TypedDict):
    """What one client measured (ClientResult.to_json): a ClientAttempt's record."""

    client: int
    status: str  # "ok", else the error's class
    served_by: list[str]
    open_s: float
    open_phases_s: dict[str, float]
    ttfb_s: float | None
    read_s: float
    copy_s: float
    close_s: float
    wall_s: float
    throughput_mbps: float
    phases: list[PhaseJson]
    files: int
    bytes_requested: int
    bytes_read: int
    bytes_wire: int
    ops: int
    latency_us: dict[str, LatencySummaryJson]
    latency_hist: dict[str, LatencyHistJson]
    cpu_s: float
    cpu_user_s: float
    cpu_sys_s: float
    checksum: str | None  # "ok", "mismatch", or None when it could not be checked
    server_checksum: NotRequired[str | None]  # "adler32:1a2b3c4d" of what a server stored
    tpc: NotRequired[TpcJson | None]
    error: ClientErrorJson | None
    # Writes (absent from the reports of agents older than them).
    bytes_written: NotRequired[int]
    write_s: NotRequired[float]
    # The address its connection went to (absent from reports of agents older than it).
    address: NotRequired[str | None]


class RunJson(TypedDict):
    """A run's result (RunResult.to_json): what the CLI's --json prints and ingestion stores."""

    status: str  # a RunStatus
    # RunParams.to_json: the run's parameters, without its credential and local paths.
    params: dict[str, object]
    started_at: str
    released_at: str | None
    host: str
    deadline_s: float
    preflight_rtt_ms: float | None
    auth: str  # an AuthMethod
    tls: dict[str, str | None] | None  # {"version", "cipher"}; None without TLS
    server_version: str | None
    # The family ("4", "6") and the address the run's connections went to, as the OS saw
    # them (families.py); the family also when nothing connected, if the run was pinned.
    # Absent from the reports of agents older than them.
    address_family: NotRequired[str | None]
    address: NotRequired[str | None]
    # The clients' library or tool and its version (Backend.client_version); absent from the
    # reports of agents older than it.
    client_version: NotRequired[str | None]
    file_sizes: dict[str, int]
    wall_s: float
    open_s: float | None
    open_phases_s: dict[str, float | None]
    ttfb_s: float | None
    throughput_mbps: float
    client_throughput_mbps: float | None
    ops: int
    op_latency_us: LatencySummaryJson
    latency_us: dict[str, LatencySummaryJson]
    bytes_requested: int
    bytes_read: int
    bytes_wire: int
    cpu_s: float
    served_by: list[str]
    checksum: str | None  # "ok", "mismatch", or None when no client could check
    server_checksum: NotRequired[str | None]
    # Third-party copies: the clients' markers in order, the sum of their rates (null: no copy).
    tpc: NotRequired[TpcJson | None]
    clients_ok: int
    errors: list[RunErrorJson]
    clients: list[ClientRecordJson]
    # Beyond reads (design.md, "Contract additions (turn 3)"): always written, null where
    # they do not apply; absent from the reports of agents older than them.
    operation: NotRequired[str]  # an Operation
    bytes_written: NotRequired[int]
    ops_per_s: NotRequired[float | None]  # metadata (and replay) operations per second


class RunStatus:
    """The final states of a run as the engine sees them."""

    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"

    ALL = frozenset({SUCCEEDED, PARTIAL, FAILED, TIMEOUT, CANCELLED})


def check_run_json(data: object) -> RunJson:
    """`data` if it has the run JSON's shape (RunJson: every key, of its type, and no other),
    else InvalidParams naming the first path that does not (`clients[3].error.class`): a
    remote vantage point's report is checked before it is stored."""
    _check_shape(data, RunJson, "run")
    assert isinstance(data, dict)
    if data["status"] not in RunStatus.ALL:
        raise InvalidParams("status", f"{data['status']!r} is not one of {sorted(RunStatus.ALL)}")
    return cast(RunJson, data)


def check_client_record(data: object, path: str = "client") -> ClientRecordJson:
    """`data` if it has a client record's shape (ClientRecordJson), else InvalidParams."""
    _check_shape(data, ClientRecordJson, path)
    return cast(ClientRecordJson, data)


def _check_shape(value: object, hint: Any, path: str) -> None:
    origin, args = get_origin(hint), get_args(hint)
    if is_typeddict(hint):
        if not isinstance(value, dict):
            raise InvalidParams(path, "is not an object")
        hints = get_type_hints(hint, include_extras=True)
        for key in value:
            if key not in hints:
                raise InvalidParams(f"{path}.{key}", "is not a field of it")
        for key, sub in hints.items():
            optional = get_origin(sub) is NotRequired
            if key not in value:
                if optional:
                    continue
                raise InvalidParams(f"{path}.{key}", "is missing")
            _check_shape(value[key], get_args(sub)[0] if optional else sub, f"{path}.{key}")
        return
    if origin in (Union, UnionType):
        for arg in args:
            try:
                _check_shape(value, arg, path)
            except InvalidParams:
                continue
            return
        raise InvalidParams(path, f"is not {_describe(hint)}")
    if origin is list:
        if not isinstance(value, list):
            raise InvalidParams(path, "is not a list")
        for index, item in enumerate(value):
            _check_shape(item, args[0], f"{path}[{index}]")
        return
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise InvalidParams(path, "is not an object")
        for key, item in value.items():
            _check_shape(item, args[1], f"{path}.{key}")
        return
    if hint is object:
        return
    if hint is type(None) or hint is None:
        if value is not None:
            raise InvalidParams(path, "is not null")
        return
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidParams(path, "is not a number")
        return
    if hint in (int, str, bool):
        if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
            raise InvalidParams(path, f"is not {_describe(hint)}")
        return
    raise TypeError(f"{path}: no check for {hint!r}")


def _describe(hint: Any) -> str:
    names = {int: "a whole number", str: "text", bool: "true or false", float: "a number"}
    if get_origin(hint) in (Union, UnionType):
        return " or ".join(_describe(arg) for arg in get_args(hint))
    if hint is type(None):
        return "null"
    return names.get(hint, getattr(hint, "__name__", str(hint)))


@dataclass
class RunResult:
    """Everything one run measured, plus what stopped it early if anything did."""

    params: RunParams
    started_at: str
    host: str
    deadline_s: float
    # When the clients were released (their phases count from here); None if they never were.
    released_at: str | None = None
    file_sizes: dict[str, int] = field(default_factory=dict)
    # The endpoint's round-trip time as the preflight measured it (a derived deadline's input).
    preflight_rtt_s: float | None = None
    clients: list[ClientResult] = field(default_factory=list)
    run_error: tuple[ErrorClass, str] | None = None
    # The run error's phase (errors.CREDENTIAL_PHASE when the tester's credential failed).
    run_error_phase: str = ""
    cancelled: bool = False
    wall_s: float = 0.0
    # How the clients authenticated, and what the server said of itself and its TLS.
    auth: AuthMethod = AuthMethod.NONE
    negotiated: Negotiated = field(default_factory=Negotiated)
    # The client library or tool the clients used, and its version (None: none, or unknown).
    client_version: str | None = None
    # The address the run's connections went to (families.py; None: none connected).
    address: str | None = None

    @property
    def status(self) -> str:
        if self.cancelled:
            return RunStatus.CANCELLED
        failed = [c for c in self.clients if not c.ok]
        if self.run_error is None and self.clients and not failed:
            return RunStatus.SUCCEEDED
        if self.clients and len(failed) < len(self.clients):
            return RunStatus.PARTIAL
        classes = {c.error.error_class for c in failed if c.error}
        if self.run_error is not None:
            classes.add(self.run_error[0])
        return RunStatus.TIMEOUT if classes == {ErrorClass.TIMEOUT} else RunStatus.FAILED

    @property
    def address_family(self) -> str | None:
        """The family of the address used; with none, the one a pinned run could only try."""
        if self.address is not None:
            return str(family_of(ipaddress.ip_address(self.address)))
        if self.params.address_family in PINNED:
            return str(self.params.address_family)
        return None

    def merged_latency(self, kinds: frozenset[str] | None = None) -> dict[str, LatencyHistogram]:
        merged: dict[str, LatencyHistogram] = {}
        for client in self.clients:
            for kind, hist in client.latency.items():
                if kinds is None or kind in kinds:
                    merged.setdefault(kind, LatencyHistogram()).merge(hist)
        return merged

    def to_json(self) -> RunJson:
        clients = self.clients
        ok = [c for c in clients if c.ok]
        bytes_read = sum(c.bytes_read for c in clients)
        bytes_written = sum(c.bytes_written for c in clients)
        operation = str(self.params.operation)
        reads = LatencyHistogram()
        for hist in self.merged_latency(op_kinds(operation)).values():
            reads.merge(hist)
        errors: list[RunErrorJson] = [
            {"class": str(c.error.error_class), "message": c.error.message, "client": c.client}
            for c in clients
            if c.error is not None
        ]
        if self.run_error is not None:
            first: RunErrorJson = {
                "class": str(self.run_error[0]),
                "message": self.run_error[1],
                "client": None,
            }
            if self.run_error_phase:
                first["phase"] = self.run_error_phase
            errors.insert(0, first)
        checks = {c.checksum for c in clients if c.checksum}
        return {
            "status": self.status,
            "params": self.params.to_json(),
            "started_at": self.started_at,
            "released_at": self.released_at,
            "host": self.host,
            "deadline_s": round(self.deadline_s, 3),
            "preflight_rtt_ms": _ms(self.preflight_rtt_s),
            "auth": str(self.auth),
            "tls": self.negotiated.tls,
            "server_version": self.negotiated.server_version,
            "client_version": self.client_version,
            "address_family": self.address_family,
            "address": self.address,
            "file_sizes": self.file_sizes,
            "wall_s": round(self.wall_s, 6),
            "open_s": _median([c.open_s for c in clients if c.open_s]),
            "open_phases_s": _open_phases(clients),
            "ttfb_s": _median([c.ttfb_s for c in clients if c.ttfb_s is not None]),
            "throughput_mbps": self._throughput_mbps(bytes_read, bytes_written),
            "client_throughput_mbps": _median([c.throughput_mbps for c in ok]),
            "ops": sum(c.ops for c in clients),
            "op_latency_us": reads.summary_us(),
            "latency_us": {k: h.summary_us() for k, h in sorted(self.merged_latency().items())},
            "bytes_requested": sum(c.bytes_requested for c in clients),
            "bytes_read": bytes_read,
            "bytes_wire": sum(c.bytes_wire for c in clients),
            "cpu_s": round(sum(c.cpu_user_s + c.cpu_sys_s for c in clients), 6),
            "served_by": sorted({s for c in clients for s in c.served_by}),
            "checksum": "mismatch" if "mismatch" in checks else ("ok" if checks else None),
            "server_checksum": _server_checksum(clients),
            "tpc": _tpc(clients),
            "clients_ok": len(ok),
            "errors": errors,
            "clients": [c.to_json() for c in clients],
            "operation": operation,
            "bytes_written": bytes_written,
            "ops_per_s": self._ops_per_s(),
        }

    def _throughput_mbps(self, bytes_read: int, bytes_written: int) -> float:
        """Reads: bytes read over the run's wall time. Writes: bytes written over the span
        of the clients' create, write and close phases (their checksum queries and deletes
        after the last commit left out)."""
        if bytes_written:
            span_s = _span_s(self.clients, WRITING_PHASES)
            return round(bytes_written / span_s / 1e6, 3) if span_s else 0.0
        return round(bytes_read / self.wall_s / 1e6, 3) if self.wall_s else 0.0

    def _ops_per_s(self) -> float | None:
        """Metadata operations per second of the whole run: every client's operations over
        the span of their storms (None for other operations)."""
        kinds = op_kinds(str(self.params.operation))
        if not kinds <= METADATA_KINDS:
            return None
        span_s = _span_s(self.clients, kinds)
        ops = sum(c.ops for c in self.clients)
        return round(ops / span_s, 3) if span_s else None


WRITING_PHASES = frozenset({"open", "write", "close"})


def _span_s(clients: list[ClientResult], phases: frozenset[str]) -> float:
    """From the first start to the last end of the clients' phases of these names."""
    spans = [(s, e) for c in clients for name, s, e in c.phases if name in phases]
    if not spans:
        return 0.0
    return max(e for _, e in spans) - min(s for s, _ in spans)


def _server_checksum(clients: list[ClientResult]) -> str | None:
    """The server's checksum of what the clients wrote or copied (all the same bytes): a
    client's that did not match if any did, else the first one's."""
    mismatched = [c.server_checksum for c in clients if c.checksum == "mismatch"]
    given = [c.server_checksum for c in clients if c.server_checksum]
    return (mismatched or given or [None])[0]


def _open_phases(clients: list[ClientResult]) -> dict[str, float | None]:
    """Per step of the open (connect, tls), the median over the clients that timed it."""
    names = sorted({name for c in clients for name in c.open_phases_s})
    return {
        name: _median([c.open_phases_s[name] for c in clients if name in c.open_phases_s])
        for name in names
    }


def _tpc(clients: list[ClientResult]) -> TpcJson | None:
    """The run's copies: every client's markers by arrival, the sum of the clients' rates
    (they copy side by side), the median time to start."""
    records = [c.tpc for c in clients if c.tpc is not None]
    if not records:
        return None
    first = records[0]
    markers = sorted(m for r in records for m in r.markers)
    return {
        "mode": first.mode,
        "source": first.source,
        "destination": first.destination,
        "markers": [{"t_s": round(t, 6), "bytes": n} for t, n in markers],
        "start_s": _median([r.start_s for r in records if r.start_s is not None]),
        "copy_s": round(max(r.copy_s for r in records), 6),
        "bytes": sum(r.bytes for r in records),
        "rate_mbps": round(sum(r.rate_mbps for r in records), 3),
        "remote_connections": sorted({a for r in records for a in r.remote_connections}),
    }


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 6) if values else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)
