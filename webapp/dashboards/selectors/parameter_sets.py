"""Parameter sets (a run's method, pattern, read size, fraction and clients) as the matrix,
home, alerts and site summary pages pick and show them, and which way each metric is better."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict
from urllib.parse import urlencode

from django.db import connection

from webapp.campaigns.metrics import METRICS
from webapp.campaigns.models import PARAMETER_SET_FIELDS, Run, parameter_set_named
from workers.engine.units import format_size

# The README's /compare/ and /matrix/ sections: those pages read these query names.
COMPARE_PATH = "/compare/"
MATRIX_PATH = "/matrix/"
# The runs a default parameter set is chosen from: the newest, read from run_newest_idx.
RECENT_RUNS = 10_000


def higher_is_better(metric: str) -> bool:
    """Whether more of the run metric is better (the registry's word for it)."""
    return METRICS[metric].higher_is_better


@dataclass(frozen=True)
class ParameterSet:
    """What a run did and how: the runs of one parameter set are comparable over time."""

    operation: str
    method: str
    pattern: str
    read_size: int
    fraction: float
    clients: int
    # Last, defaulted: most runs are left to the client's choice (any).
    address_family: str = "any"

    @property
    def label(self) -> str:
        clients = f"{self.clients} client{'s' if self.clients != 1 else ''}"
        read_size = format_size(self.read_size)
        label = f"{self.method} · {self.pattern} · {read_size} · {self.fraction:g} · {clients}"
        # Reads over any family are most runs: their labels stay as they were; another
        # operation leads, a pinned family ends (IPv4, IPv6: side by side on the pages).
        if self.address_family != "any":
            label = f"{label} · IPv{self.address_family}"
        return label if self.operation == "read" else f"{self.operation} · {label}"

    def query(self) -> dict[str, Any]:
        """As query parameters (the RunFilter names)."""
        return {name: getattr(self, name) for name in PARAMETER_SET_FIELDS}

    def matches(self, given: Mapping[str, Any]) -> bool:
        return all(given.get(f) in (None, "", getattr(self, f)) for f in PARAMETER_SET_FIELDS)


@dataclass(frozen=True)
class RecentParameterSet:
    parameter_set: ParameterSet
    runs: int


def parameter_sets_recent(*, limit: int = RECENT_RUNS) -> list[RecentParameterSet]:
    """The parameter sets of the newest `limit` runs, the most common first (one query,
    reading the newest runs from run_newest_idx and grouping only those)."""
    columns = ", ".join(PARAMETER_SET_FIELDS)
    sql = f"""
        SELECT {columns}, COUNT(*) AS runs FROM (
            SELECT {columns} FROM {Run._meta.db_table}
            ORDER BY created_at DESC, id DESC LIMIT %s
        ) newest
        GROUP BY {columns} ORDER BY runs DESC, {columns}
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        rows = cursor.fetchall()
    return [RecentParameterSet(ParameterSet(*row[:-1]), row[-1]) for row in rows]


def parameter_set_choose(
    *, given: Mapping[str, Any], recent: list[RecentParameterSet]
) -> ParameterSet | None:
    """The parameter set `given` names in full, else the most common recent one that agrees
    with the fields it gives; None if no recent one does."""
    full = parameter_set_named(given)
    if full is not None:
        return ParameterSet(**full)
    for candidate in recent:
        if candidate.parameter_set.matches(given):
            return candidate.parameter_set
    return None


def compare_url(chosen: Mapping[str, Any], metric: str, parameter_set: ParameterSet | None) -> str:
    """The compare page over time for `chosen` (endpoint, site, vantage point ...), one
    metric, the runs of one parameter set (any, when None)."""
    pairs = [_encoded(name, value) for name, value in chosen.items()]
    return f"{COMPARE_PATH}?{'&'.join([*pairs, _compare_tail(metric, parameter_set)])}"


@functools.lru_cache(maxsize=4096)
def _encoded(name: str, value: Any) -> str:
    """One `name=value` of a query string (a matrix repeats each endpoint and vantage point
    in its cells' links)."""
    return urlencode({name: value})


@functools.lru_cache(maxsize=256)
def _compare_tail(metric: str, parameter_set: ParameterSet | None) -> str:
    """The part of compare_url every cell of a matrix shares, encoded once (the matrix's
    1,500 cells spent a third of their time encoding it again)."""
    return urlencode({"metric": metric, **(parameter_set.query() if parameter_set else {})})


def matrix_url(chosen: Mapping[str, Any], parameter_set: ParameterSet | None) -> str:
    """The matrix for `chosen` (a site ...), for one parameter set (the default, when None)."""
    return (
        f"{MATRIX_PATH}?{urlencode({**chosen, **(parameter_set.query() if parameter_set else {})})}"
    )


class ParameterSetJSON(TypedDict):
    """A ParameterSet's query parameters with its label, as the pages' JSON gives it."""

    operation: str
    method: str
    pattern: str
    read_size: int
    fraction: float
    clients: int
    address_family: str
    label: str


def parameter_set_json(parameter_set: ParameterSet | None) -> ParameterSetJSON | None:
    if parameter_set is None:
        return None
    return {
        "operation": parameter_set.operation,
        "method": parameter_set.method,
        "pattern": parameter_set.pattern,
        "read_size": parameter_set.read_size,
        "fraction": parameter_set.fraction,
        "clients": parameter_set.clients,
        "address_family": parameter_set.address_family,
        "label": parameter_set.label,
    }
