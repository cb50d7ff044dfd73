"""The runs advice rests on: every succeeded run of an endpoint from a vantage point, of any
campaign (nightly or launched by hand), with what each of its clients measured.

Only succeeded runs count (a partial run's times are those of fewer clients than asked, a
failed one's of nothing), and tester faults never do (they already are not succeeded). The
newest MAX_RUNS runs of an endpoint and vantage point are read per kind, reads and the other
operations apart (`read_runs`, `other_runs`): recent behaviour, in a bounded read, and a
storm of stats never pushes the reads the read questions need out of it. A write's or a
stat storm's time is not a read's: the read questions (crossover, knee of reads, latency
hiding, read-ahead, cache, redirector) rest on reads only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from webapp.campaigns.models import ClientAttempt, Run, q_not_tester_fault
from workers.engine.params import AddressFamily, Operation

MAX_RUNS = 2000
# The families a run can have gone over (the run JSON's address_family: "4" or "6").
FAMILIES = (AddressFamily.IPV4.value, AddressFamily.IPV6.value)
_FIELDS = (
    "pk",
    "operation",
    "destination_endpoint_id",
    "address_family",
    "file_size",
    "rate",
    "throughput_mbps",
    "endpoint_id",
    "vantage_point_id",
    "test_file_id",
    "test_file__size",
    "method",
    "pattern",
    "read_size",
    "fraction",
    "clients",
    "depth",
    "vector_size",
    "readahead",
    "files",
    "wall_s",
    "open_s",
    "latency_p50_us",
    "bytes_requested",
    "bytes_read",
    "bytes_wire",
    "served_by",
    "started_at",
    "finished_at",
    "result__preflight_rtt_ms",
    "result__address_family",
    "result__bytes_written",
    "result__ops_per_s",
)


@dataclass(frozen=True)
class Sample:
    """One succeeded run as the advice reads it."""

    run_id: int
    operation: str
    endpoint_id: int
    vantage_point_id: int
    test_file_id: int
    file_size: int
    method: str
    pattern: str
    read_size: int
    fraction: float
    clients: int
    depth: int
    vector_size: int
    readahead: int
    files: int
    wall_s: float
    open_s: float | None
    latency_p50_s: float | None
    bytes_requested: int
    bytes_read: int
    bytes_wire: int
    served_by: tuple[str, ...]
    started_at: datetime | None
    finished_at: datetime | None
    preflight_rtt_s: float | None
    # Beyond reads: a copy's destination, the family the run went over ("4", "6": the run
    # JSON's, else the one it was pinned to; None: not known), what it was pinned to ("any",
    # "4", "6"), a write's size per file, a storm's target rate per client, bytes written,
    # the run's rate (throughput_mbps: a write's is its bytes written over its writing span)
    # and a storm's operations per second.
    destination_endpoint_id: int | None = None
    address_family: str | None = None
    pinned_family: str = AddressFamily.ANY.value
    write_size: int = 0
    rate: float = 0.0
    bytes_written: int = 0
    throughput_mbps: float | None = None
    ops_per_s: float | None = None
    # Each client's time, the unit the bootstrap resamples (the run's wall time when the
    # clients' records are not kept).
    client_walls: tuple[float, ...] = field(default=())
    # A copy's clients: each one's copy time and time to start (tpc.copy_s, tpc.start_s).
    client_copies: tuple[float, ...] = field(default=())
    client_starts: tuple[float, ...] = field(default=())

    @property
    def aggregate_bps(self) -> float:
        """Bytes per second all its clients together got (the sweep's rate)."""
        return self.bytes_read / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def times(self) -> tuple[float, ...]:
        return self.client_walls or (self.wall_s,)

    @property
    def copy_times(self) -> tuple[float, ...]:
        """A copy's clients' copy times (the COPY or xrdcp --tpc, from the request to its
        end), else their times."""
        return self.client_copies or self.times


def succeeded_runs() -> QuerySet[Run]:
    """Runs advice may rest on: succeeded, with a time, never a tester fault; of every
    operation (read_runs and other_runs tell them apart)."""
    return Run.objects.filter(status=Run.Status.SUCCEEDED, wall_s__gt=0).filter(
        q_not_tester_fault()
    )


def read_runs() -> QuerySet[Run]:
    """The succeeded runs that read: all the read questions rest on."""
    return succeeded_runs().filter(operation=Operation.READ.value)


def other_runs() -> QuerySet[Run]:
    """The succeeded runs of the other operations (writes, copies, metadata storms,
    replays)."""
    return succeeded_runs().exclude(operation=Operation.READ.value)


def samples(runs: QuerySet[Run]) -> list[Sample]:
    """The newest MAX_RUNS of `runs` as samples, oldest first, with their clients' times."""
    rows = list(runs.order_by("-finished_at", "-id").values(*_FIELDS)[:MAX_RUNS])
    clients = _clients(row["pk"] for row in rows)
    return [_sample(row, clients.get(row["pk"], _Clients())) for row in reversed(rows)]


@dataclass
class _Clients:
    walls: list[float] = field(default_factory=list)
    copies: list[float] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)


def _clients(run_ids: Iterable[int]) -> dict[int, _Clients]:
    """Each run's clients' times (and a copy's clients' copy and start times), one query."""
    found: dict[int, _Clients] = defaultdict(_Clients)
    attempts = ClientAttempt.objects.filter(
        run_id__in=list(run_ids), status=ClientAttempt.Status.OK
    ).values_list("run_id", "record__wall_s", "record__tpc__copy_s", "record__tpc__start_s")
    for run_id, wall_s, copy_s, start_s in attempts:
        clients = found[run_id]
        if _positive(wall_s):
            clients.walls.append(float(wall_s))
        if _positive(copy_s):
            clients.copies.append(float(copy_s))
        if isinstance(start_s, int | float) and start_s >= 0:
            clients.starts.append(float(start_s))
    return found


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and value > 0


def _family(used: object, pinned: str) -> str | None:
    """The family the run went over: the run JSON's, else the one it was pinned to (a run
    reported by an agent older than address_family). SQLite gives the JSON's "4" as 4."""
    if isinstance(used, str | int) and str(used) in FAMILIES:
        return str(used)
    return pinned if pinned in FAMILIES else None


def _sample(row: dict[str, Any], clients: _Clients) -> Sample:
    rtt_ms = row["result__preflight_rtt_ms"]
    p50 = row["latency_p50_us"]
    ops_per_s = row["result__ops_per_s"]
    written = row["result__bytes_written"]
    return Sample(
        run_id=row["pk"],
        operation=row["operation"],
        endpoint_id=row["endpoint_id"],
        vantage_point_id=row["vantage_point_id"],
        test_file_id=row["test_file_id"],
        file_size=row["test_file__size"],
        method=row["method"],
        pattern=row["pattern"],
        read_size=row["read_size"],
        fraction=row["fraction"],
        clients=row["clients"],
        depth=row["depth"],
        vector_size=row["vector_size"],
        readahead=row["readahead"],
        files=row["files"],
        wall_s=row["wall_s"],
        open_s=row["open_s"],
        latency_p50_s=None if p50 is None else p50 / 1e6,
        bytes_requested=row["bytes_requested"] or 0,
        bytes_read=row["bytes_read"] or 0,
        bytes_wire=row["bytes_wire"] or 0,
        served_by=tuple(row["served_by"] or ()),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        preflight_rtt_s=rtt_ms / 1000 if isinstance(rtt_ms, int | float) else None,
        destination_endpoint_id=row["destination_endpoint_id"],
        address_family=_family(row["result__address_family"], row["address_family"]),
        pinned_family=row["address_family"],
        write_size=row["file_size"],
        rate=row["rate"],
        bytes_written=written if isinstance(written, int) else 0,
        throughput_mbps=row["throughput_mbps"],
        ops_per_s=float(ops_per_s) if _positive(ops_per_s) else None,
        client_walls=tuple(clients.walls),
        client_copies=tuple(clients.copies),
        client_starts=tuple(clients.starts),
    )
