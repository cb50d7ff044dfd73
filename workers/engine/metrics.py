"""What one client measured, in the shape the run JSON reports (docs/engine.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from workers.engine.errors import ErrorClass
from workers.engine.histogram import LatencyHistogram

if TYPE_CHECKING:
    from workers.engine.results import ClientErrorJson, ClientRecordJson, TpcJson


# Operation kinds that deliver data to the reader (the "ops" of a run).
READ_KINDS = frozenset({"read", "readv", "async_read"})
# Those of the other operations (params.Operation): a write's requests, a storm's operations.
WRITE_KINDS = frozenset({"write"})
METADATA_KINDS = frozenset({"stat", "open", "list"})


def op_kinds(operation: str) -> frozenset[str]:
    """The latency kinds counted as a run's operations (ops, op_latency_us)."""
    if operation == "write":
        return WRITE_KINDS
    if operation in METADATA_KINDS:
        return frozenset({operation})
    return READ_KINDS


@dataclass
class ClientError:
    """Why a client stopped early, and how long it ran before that (time wasted)."""

    error_class: ErrorClass
    message: str
    wasted_s: float

    def to_json(self) -> ClientErrorJson:
        return {"class": str(self.error_class), "message": self.message, "wasted_s": self.wasted_s}


@dataclass
class TpcRecord:
    """A client's third-party copies: how the copier reported them (`http`: XrdHttpTPC's perf
    markers; `root`: XRootD-native, no markers) and what they moved in how long."""

    mode: str
    source: str
    destination: str
    # Each perf marker: seconds from the client's release when it arrived, bytes copied so
    # far of the file being copied.
    markers: list[tuple[float, int]] = field(default_factory=list)
    # Seconds from sending the first COPY (or starting the first native copy) until the
    # transfer started (its first marker; for native TPC its end).
    start_s: float | None = None
    copy_s: float = 0.0
    bytes: int = 0
    remote_connections: list[str] = field(default_factory=list)

    @property
    def rate_mbps(self) -> float:
        return self.bytes / self.copy_s / 1e6 if self.copy_s > 0 else 0.0

    def to_json(self) -> TpcJson:
        return {
            "mode": self.mode,
            "source": self.source,
            "destination": self.destination,
            "markers": [{"t_s": round(t, 6), "bytes": n} for t, n in self.markers],
            "start_s": None if self.start_s is None else round(self.start_s, 6),
            "copy_s": round(self.copy_s, 6),
            "bytes": self.bytes,
            "rate_mbps": round(self.rate_mbps, 3),
            "remote_connections": self.remote_connections,
        }


@dataclass
class ClientResult:
    """One client of a run: its phases (seconds from its release), bytes, ops and error."""

    client: int
    served_by: list[str] = field(default_factory=list)
    open_s: float = 0.0
    # The part of open_s spent connecting and in the TLS handshake, where the backend tells.
    open_phases_s: dict[str, float] = field(default_factory=dict)
    ttfb_s: float | None = None
    read_s: float = 0.0
    copy_s: float = 0.0
    close_s: float = 0.0
    wall_s: float = 0.0
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    files_done: int = 0
    bytes_requested: int = 0
    bytes_read: int = 0
    bytes_wire: int = 0
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0
    latency: dict[str, LatencyHistogram] = field(default_factory=dict)
    checksum: str | None = None  # "ok" / "mismatch" / None when it could not be checked
    # What the server holds after a write or a copy: "adler32:1a2b3c4d" (None: not asked).
    server_checksum: str | None = None
    tpc: TpcRecord | None = None
    error: ClientError | None = None
    # Writes: bytes the server acknowledged, and seconds in write phases.
    bytes_written: int = 0
    write_s: float = 0.0
    # The latency kinds that are this client's operations (ops, op_latency_us).
    op_kinds: frozenset[str] = field(default_factory=lambda: READ_KINDS)
    # The endpoint address its connection went to, read from the OS after its clock stopped
    # (families.py); None when it held none then (a copy tool's connection, a failure).
    address: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ops(self) -> int:
        return sum(h.count for kind, h in self.latency.items() if kind in self.op_kinds)

    @property
    def throughput_mbps(self) -> float:
        """Reads: bytes read over the client's wall time. Writes: bytes written from create
        to commit (open, write and close phases), without the checksum query and delete."""
        if self.bytes_written:
            writing_s = self.open_s + self.write_s + self.close_s
            return self.bytes_written / writing_s / 1e6 if writing_s > 0 else 0.0
        return self.bytes_read / self.wall_s / 1e6 if self.wall_s > 0 else 0.0

    @property
    def ops_per_s(self) -> float | None:
        """Metadata operations per second over the client's phase of them (None: none)."""
        if not self.op_kinds <= METADATA_KINDS:
            return None
        spans = [end - start for name, start, end in self.phases if name in self.op_kinds]
        if not spans or sum(spans) <= 0:
            return None
        return self.ops / sum(spans)

    def histogram(self, kind: str) -> LatencyHistogram:
        if kind not in self.latency:
            self.latency[kind] = LatencyHistogram()
        return self.latency[kind]

    def add_phase(self, name: str, start_s: float, end_s: float) -> None:
        self.phases.append((name, round(start_s, 6), round(end_s, 6)))

    def to_json(self) -> ClientRecordJson:
        return {
            "client": self.client,
            "status": "ok" if self.ok else str(self.error.error_class if self.error else ""),
            "served_by": self.served_by,
            "open_s": round(self.open_s, 6),
            "open_phases_s": {k: round(v, 6) for k, v in self.open_phases_s.items()},
            "ttfb_s": None if self.ttfb_s is None else round(self.ttfb_s, 6),
            "read_s": round(self.read_s, 6),
            "copy_s": round(self.copy_s, 6),
            "close_s": round(self.close_s, 6),
            "wall_s": round(self.wall_s, 6),
            "throughput_mbps": round(self.throughput_mbps, 3),
            "phases": [{"phase": n, "start_s": s, "end_s": e} for n, s, e in self.phases],
            "files": self.files_done,
            "bytes_requested": self.bytes_requested,
            "bytes_read": self.bytes_read,
            "bytes_wire": self.bytes_wire,
            "ops": self.ops,
            "latency_us": {kind: h.summary_us() for kind, h in self.latency.items()},
            "latency_hist": {kind: h.to_json() for kind, h in self.latency.items()},
            "cpu_s": round(self.cpu_user_s + self.cpu_sys_s, 6),
            "cpu_user_s": round(self.cpu_user_s, 6),
            "cpu_sys_s": round(self.cpu_sys_s, 6),
            "checksum": self.checksum,
            "server_checksum": self.server_checksum,
            "tpc": None if self.tpc is None else self.tpc.to_json(),
            "error": self.error.to_json() if self.error else None,
            "bytes_written": self.bytes_written,
            "write_s": round(self.write_s, 6),
            "address": self.address,
        }
