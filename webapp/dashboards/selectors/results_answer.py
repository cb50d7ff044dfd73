"""The answer at the top of a campaign's results page: the advice (webapp/advice) to the
questions the campaign asks, in words, each with the runs it rests on, and the open time of
each door when it compares doors (no advice question: the page's own reading of its runs).

A campaign asks a question by what it measures: direct and copy (the crossover), client
counts (the knee, of each operation it measures), async or vector reads (latency hiding), a
read-ahead, a cache or a redirector among its endpoints, copies pulled and pushed (the
copy's direction), a pinned address family. Statements of questions it does not ask, and
knees of operations it does not measure, are left out (they would all say "too thin"). The
advice reads the campaign's own runs; a question they are too thin for is answered from all
the endpoint's runs when those suffice (a campaign holds one read-ahead: the reads without it
are another campaign's; a campaign holds one address family: the other is another's), and
says so.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from webapp.advice.selectors import campaign_advice, endpoint_advice
from webapp.advice.statements import Statement
from webapp.campaigns.models import Campaign
from webapp.sites.models import Endpoint, VantagePoint
from workers.engine.params import TPC_OPERATIONS, AddressFamily, Method, Pattern

# The questions a campaign asks, by what it measures (advice's question names).
ASKS: dict[str, Callable[[Campaign, Sequence[Endpoint]], bool]] = {
    "crossover": lambda c, _: {Method.DIRECT, Method.COPY} <= set(c.methods or []),
    "knee": lambda c, _: len(set(c.clients or [])) >= 2,
    "latency-hiding": lambda c, _: bool({Pattern.ASYNC, Pattern.VECTOR} & set(c.patterns or [])),
    "read-ahead": lambda c, _: bool(c.readahead),
    "cache": lambda _, e: any(x.role == Endpoint.Role.CACHE for x in e),
    "redirector": lambda _, e: any(x.role == Endpoint.Role.REDIRECTOR for x in e),
    "tpc-direction": lambda c, _: set(c.operations or []) >= TPC_OPERATIONS,
    "address-family": lambda c, _: c.address_family != AddressFamily.ANY,
}
# The most statements the page lists (a campaign of many parameter sets has hundreds: the
# advice API and the endpoint's page have them all).
ANSWER_LINES = 12
# How the doors answer names a credential kind.
CREDENTIALS = {
    "none": "anonymous",
    "token": "a token",
    "oauth-client": "a token",
    "x509-proxy": "an X.509 proxy",
}


@dataclass(frozen=True)
class AnswerLine:
    """One statement as the page shows it."""

    question: str
    verdict: str
    text: str
    where: str  # the endpoint and vantage point it is about
    enough_data: bool
    model_text: str = ""
    model_agrees: bool | None = None  # False: the page marks the disagreement
    interval: tuple[float, float] | None = None
    unit: str = ""
    runs: int = 0
    evidence_url: str = ""
    measured_at: datetime | None = None
    stale: bool = False
    from_all_runs: bool = False  # not from this campaign's runs only


def campaign_questions(campaign: Campaign, endpoints: Sequence[Endpoint]) -> list[str]:
    """The advice questions the campaign asks, in advice's order."""
    return [question for question, asks in ASKS.items() if asks(campaign, endpoints)]


def results_answer(
    *, campaign: Campaign, cells: Sequence[dict[str, Any]], now: datetime | None = None
) -> list[AnswerLine]:
    """The page's answer: the doors' open times, then the advice to the questions the
    campaign asks."""
    endpoints = {e.pk: e for e in campaign.endpoints.all()}
    asked = campaign_questions(campaign, list(endpoints.values()))
    points = {v.pk: v for v in campaign.vantage_points.all()}
    measured = set(campaign.operations or [])
    chosen = [
        s
        for s in campaign_advice(campaign, now=now, questions=asked)
        if s.scope.get("operation") in measured | {None}
    ]
    lines = []
    for statement, from_all in _with_fallback(chosen, endpoints, points, now):
        lines.append(_line(statement, endpoints, points, campaign, from_all=from_all))
    door = doors_answer(cells=cells, endpoints=endpoints, campaign=campaign)
    return ([door] if door else []) + lines


def _with_fallback(
    statements: list[Statement],
    endpoints: dict[int, Endpoint],
    points: dict[int, VantagePoint],
    now: datetime | None,
) -> list[tuple[Statement, bool]]:
    """The statements, a too-thin one replaced by the endpoint's advice from all its runs when
    that answers it (True beside those)."""
    chosen: list[tuple[Statement, bool]] = []
    for statement in statements:
        point = points.get(statement.vantage_point_id or 0)
        if statement.enough_data or point is None:
            chosen.append((statement, False))
            continue
        endpoint = endpoints[statement.endpoint_id]
        asked = [statement.question]
        wider = [
            s
            for s in endpoint_advice(endpoint, point, now=now, questions=asked)
            if s.enough_data and _same_knee(s, statement)
        ]
        chosen += [(s, True) for s in wider] or [(statement, False)]
    return chosen


def _same_knee(statement: Statement, thin: Statement) -> bool:
    """Whether `statement` answers what the too-thin `thin` lacks: a knee, of the same
    operation; any other question's, every one."""
    if thin.question != "knee":
        return True
    return statement.scope.get("operation") == thin.scope.get("operation")


def _line(
    statement: Statement,
    endpoints: dict[int, Endpoint],
    points: dict[int, VantagePoint],
    campaign: Campaign,
    *,
    from_all: bool,
) -> AnswerLine:
    endpoint = endpoints[statement.endpoint_id]
    point = points.get(statement.vantage_point_id or 0)
    where = endpoint.name + (f" from {point.name}" if point else "")
    query: dict[str, Any] = {"endpoint": endpoint.pk, "status": "succeeded"}
    if point is not None:
        query["vantage_point"] = point.name
    if not from_all:
        query["campaign"] = campaign.pk
    return AnswerLine(
        question=statement.question,
        verdict=statement.verdict,
        text=statement.text,
        where=where,
        enough_data=statement.enough_data,
        model_text=statement.model_text,
        model_agrees=statement.model_agrees,
        interval=statement.interval,
        unit=statement.unit,
        runs=len(statement.evidence),
        evidence_url=f"{reverse('campaigns:run-list')}?{urlencode(query)}",
        measured_at=statement.measured_at,
        stale=statement.stale,
        from_all_runs=from_all,
    )


def doors_answer(
    *, cells: Sequence[dict[str, Any]], endpoints: dict[int, Endpoint], campaign: Campaign
) -> AnswerLine | None:
    """What opening a file costs at each door the campaign measured (the median over its
    parameter sets of their median client's open time), cheapest first: None for fewer than
    two doors."""
    opens: dict[int, list[float]] = defaultdict(list)
    runs: dict[int, int] = defaultdict(int)
    for cell in cells:
        if cell["open_s"] is not None and cell["endpoint"] in endpoints:
            opens[cell["endpoint"]].append(cell["open_s"])
            runs[cell["endpoint"]] += cell["runs"]
    if len(opens) < 2:
        return None
    median = {i: statistics.median(values) for i, values in opens.items()}
    order = sorted(median, key=lambda i: (median[i], endpoints[i].name))
    cheapest, dearest = order[0], order[-1]
    listed = ", ".join(f"{_door(endpoints[i])} {_ms(median[i])}" for i in order)
    text = (
        f"Opening a file costs {_ms(median[cheapest])} at {endpoints[cheapest].name} and "
        f"{_ms(median[dearest])} at {endpoints[dearest].name}, "
        f"{_ms(median[dearest] - median[cheapest])} more. Per door: {listed}."
    )
    return AnswerLine(
        question="doors",
        verdict="measured",
        text=text,
        where=f"{len(order)} doors",
        enough_data=True,
        runs=sum(runs.values()),
        evidence_url=f"{reverse('campaigns:run-list')}?"
        + urlencode({"campaign": campaign.pk, "status": "succeeded"}),
    )


def _door(endpoint: Endpoint) -> str:
    how = CREDENTIALS.get(endpoint.credential_kind, endpoint.credential_kind)
    return f"{endpoint.name} ({endpoint.protocol}, {how})"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms"
