"""The runs advice rests on: every succeeded run of an endpoint from a vantage point, of any
campaign (nightly or launched by hand), with what each of its clients measured.

Only succeeded runs count (a partial run's times are those of fewer clients than asked, a
failed one's of nothing), and tester faults never do (they already are not succeeded). The
newest MAX_RUNS runs of an endpoint and vantage point are read: recent behaviour, in a
bounded read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from webapp.campaigns.models import ClientAttempt, Run, q_not_tester_fault

MAX_RUNS = 2000
_FIELDS = (
    "pk",
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
)


@dataclass(frozen=True)
class Sample:
    """One succeeded run as the advice reads it."""

    run_id: int
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
    # Each client's time, the unit the bootstrap resamples (the run's wall time when the
    # clients' records are not kept).
    client_walls: tuple[float, ...] = field(default=())

    @property
    def aggregate_bps(self) -> float:
        """Bytes per second all its clients together got (the sweep's rate)."""
        return self.bytes_read / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def times(self) -> tuple[float, ...]:
        return self.client_walls or (self.wall_s,)


def succeeded_runs() -> QuerySet[Run]:
    """Runs advice may rest on: succeeded, with a time, never a tester fault."""
    return Run.objects.filter(status=Run.Status.SUCCEEDED, wall_s__gt=0).filter(
        q_not_tester_fault()
    )


def samples(runs: QuerySet[Run]) -> list[Sample]:
    """The newest MAX_RUNS of `runs` as samples, oldest first, with their clients' times."""
    rows = list(runs.order_by("-finished_at", "-id").values(*_FIELDS)[:MAX_RUNS])
    walls = _client_walls(row["pk"] for row in rows)
    return [_sample(row, walls.get(row["pk"], ())) for row in reversed(rows)]


def _client_walls(run_ids: Iterable[int]) -> dict[int, tuple[float, ...]]:
    walls: dict[int, list[float]] = defaultdict(list)
    attempts = ClientAttempt.objects.filter(
        run_id__in=list(run_ids), status=ClientAttempt.Status.OK
    ).values_list("run_id", "record__wall_s")
    for run_id, wall_s in attempts:
        if isinstance(wall_s, int | float) and wall_s > 0:
            walls[run_id].append(float(wall_s))
    return {run_id: tuple(times) for run_id, times in walls.items()}


def _sample(row: dict[str, Any], walls: tuple[float, ...]) -> Sample:
    rtt_ms = row["result__preflight_rtt_ms"]
    p50 = row["latency_p50_us"]
    return Sample(
        run_id=row["pk"],
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
        client_walls=walls,
    )
