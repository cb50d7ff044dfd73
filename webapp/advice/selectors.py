"""The advice of an endpoint, a site or a campaign: per endpoint and vantage point, each
question's statements from the runs that exist, or a "too thin" statement with the one
campaign that would collect what is missing (docs/advice.md)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from webapp.advice import answers
from webapp.advice.answers import KNEE_OPERATIONS, Context
from webapp.advice.evidence import Sample, other_runs, read_runs, samples, succeeded_runs
from webapp.advice.link import estimate_link
from webapp.advice.statements import TOO_THIN, Statement
from webapp.advice.suggestions import Need, readahead_to_measure, suggestion_refusal, suggestions
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Endpoint, Site, VantagePoint
from workers.engine.params import TPC_OPERATIONS, AddressFamily, Operation
from workers.engine.protocols import protocol_of
from workers.engine.units import format_size


@dataclass(frozen=True)
class Evidence:
    """The samples of one endpoint and vantage point: its reads (all the read questions rest
    on) and its runs of other operations, each kind its own newest MAX_RUNS."""

    reads: list[Sample]
    others: list[Sample]

    @property
    def every(self) -> list[Sample]:
        return [*self.reads, *self.others]


Answer = Callable[[Evidence, Context], list[Statement]]

READ = str(Operation.READ)
# What each question needs, in words, for the "too thin" statement.
NEEDS = {
    "crossover": "direct reads and copies of one read size at two fractions or more",
    "knee": "one kind of read at three client counts or more",
    "latency-hiding": "one read size read one at a time and with async or vector reads",
    "read-ahead": "the same reads with and without read-ahead",
    "cache": "a test file read more than once through the cache",
    "redirector": "opens through the redirector and at the data servers it sends to",
    "tpc-direction": "copies of one file to one destination both pulled (tpc-pull) and pushed "
    "(tpc-push)",
    "address-family": "the same runs over IPv4 and over IPv6 (a campaign pinned to each family)",
}
# The knee of other operations than reads, in words.
KNEE_NEEDS = {
    Operation.WRITE: "writes of one size at three client counts or more",
    Operation.STAT: "stat storms at three client counts or more",
    Operation.OPEN: "open storms at three client counts or more",
    Operation.LIST: "listing storms at three client counts or more",
}


def _on_reads(answer: Callable[[Sequence[Sample], Context], list[Statement]]) -> Answer:
    """A read question's answer: from the reads alone (a write's or a storm's time is not a
    read's)."""
    return lambda found, ctx: answer(found.reads, ctx)


def _knee(found: Evidence, ctx: Context) -> list[Statement]:
    """The knee of reads, then of writes and metadata storms."""
    return answers.knee(found.reads, ctx) + answers.operation_knees(found.others, ctx)


def _knee_operations(found: Evidence) -> list[str]:
    """The operations whose knee is asked: reads always, the others where measured."""
    measured = {s.operation for s in found.others}
    return [READ, *(str(o) for o in KNEE_OPERATIONS if o in measured)]


def _copied(found: Evidence) -> bool:
    return any(s.operation in TPC_OPERATIONS for s in found.others)


def _pinned(found: Evidence) -> bool:
    """Whether a run was pinned to a family: someone wants the comparison (a run left to
    the client's choice goes over one family, and is no question by itself)."""
    return any(s.pinned_family != AddressFamily.ANY for s in found.every)


DATA_QUESTIONS: dict[str, Answer] = {
    "crossover": _on_reads(answers.crossover),
    "knee": _knee,
    "latency-hiding": _on_reads(answers.latency_hiding),
    "read-ahead": _on_reads(answers.read_ahead),
}
# Beyond reads (issue 20): asked of an endpoint whose protocol does the operations, answered
# (or too thin) only where runs of them exist.
COPY_QUESTION: dict[str, Answer] = {
    "tpc-direction": lambda found, ctx: answers.tpc_direction(found.others, ctx)
}
FAMILY_QUESTION: dict[str, Answer] = {
    "address-family": lambda found, ctx: answers.address_family(found.every, ctx)
}
# Questions answered (or too thin) only where runs that ask them exist.
APPLIES: dict[str, Callable[[Evidence], bool]] = {
    "tpc-direction": _copied,
    "address-family": _pinned,
}


def endpoint_advice(
    endpoint: Endpoint,
    vantage_point: VantagePoint | None = None,
    *,
    now: datetime | None = None,
    runs: QuerySet[Run] | None = None,
    questions: Collection[str] | None = None,
) -> list[Statement]:
    """Every question's statements for the endpoint (or only `questions`'), from
    `vantage_point` or from each one that measured it (none yet: the vantage points a
    campaign would use). `runs` narrows the evidence (a campaign's)."""
    now = now or timezone.now()
    chosen = [vantage_point] if vantage_point is not None else _vantage_points(endpoint, runs)
    statements = []
    for point in chosen:
        statements += _advice(endpoint, point, now=now, runs=runs, questions=questions)
    return statements


def site_advice(
    site: Site, *, now: datetime | None = None, questions: Collection[str] | None = None
) -> list[Statement]:
    """The advice of each enabled endpoint of the site (a protocol each), per vantage point."""
    now = now or timezone.now()
    statements = []
    for endpoint in site.endpoints.filter(enabled=True).order_by("name"):
        statements += endpoint_advice(endpoint, now=now, questions=questions)
    return statements


def campaign_advice(
    campaign: Campaign, *, now: datetime | None = None, questions: Collection[str] | None = None
) -> list[Statement]:
    """The advice of the campaign's endpoints from its vantage points, from its runs only:
    every question's, or only `questions`' (a page that shows a few asks for those: each
    question costs its bootstrap, and a question the campaign does not ask would only say
    "too thin" and estimate the campaign that would)."""
    now = now or timezone.now()
    runs = Run.objects.filter(campaign=campaign)
    statements = []
    for endpoint in campaign.endpoints.order_by("name"):
        for point in campaign.vantage_points.order_by("name"):
            statements += _advice(endpoint, point, now=now, runs=runs, questions=questions)
    return statements


def _vantage_points(endpoint: Endpoint, runs: QuerySet[Run] | None) -> list[VantagePoint]:
    measured = succeeded_runs().filter(endpoint=endpoint)
    if runs is not None:
        measured = measured.filter(pk__in=runs.values("pk"))
    ids = measured.values("vantage_point_id").distinct()
    found = list(VantagePoint.objects.filter(pk__in=ids).order_by("name"))
    if not found:
        planned = endpoint.campaigns.values("vantage_points")
        found = list(VantagePoint.objects.filter(pk__in=planned).order_by("name"))
    return found or [VantagePoint.local_unsaved()]


def _evidence(
    endpoint: Endpoint, vantage_point: VantagePoint, runs: QuerySet[Run] | None
) -> Evidence:
    if vantage_point.pk is None:  # the local one, not made yet: nothing measured from it
        return Evidence([], [])
    kinds = []
    for kind in (read_runs(), other_runs()):
        found = kind.filter(endpoint=endpoint, vantage_point=vantage_point)
        if runs is not None:
            found = found.filter(pk__in=runs.values("pk"))
        kinds.append(samples(found))
    return Evidence(*kinds)


def _advice(
    endpoint: Endpoint,
    vantage_point: VantagePoint,
    *,
    now: datetime,
    runs: QuerySet[Run] | None,
    questions: Collection[str] | None = None,
) -> list[Statement]:
    asked = _asked(endpoint, questions)
    if not asked:
        return []
    found = _evidence(endpoint, vantage_point, runs)
    ctx = Context(
        endpoint_id=endpoint.pk,
        vantage_point_id=vantage_point.pk,
        protocol=endpoint.protocol,
        now=now,
        max_age=timedelta(days=settings.FEDPROBE_ADVICE_MAX_AGE_DAYS),
        # The link of reads: a write's, a copy's or a storm's time says nothing of it.
        link=estimate_link(found.reads),
    )
    made = {question: answer(found, ctx) for question, answer in asked.items()}
    thin = [need for question, made_ in made.items() for need in _needs(question, found, made_)]
    needs = [
        Need(n.question, n.operation, readahead_to_measure(n.question, endpoint, vantage_point))
        for n in thin
    ]
    suggested = suggestions(needs, endpoint, vantage_point)
    for need in needs:
        made[need.question].append(too_thin(need, endpoint, vantage_point, suggested[need], ctx))
    return [statement for statements in made.values() for statement in statements]


def _needs(question: str, found: Evidence, made: list[Statement]) -> list[Need]:
    """What the question lacks, each a too-thin statement: the knee, each operation whose
    knee is asked and not answered; any other, itself when it applies and has no answer."""
    if question == "knee":
        answered = {s.scope.get("operation") for s in made}
        return [Need(question, o) for o in _knee_operations(found) if o not in answered]
    applies = question not in APPLIES or APPLIES[question](found)
    return [] if made or not applies else [Need(question)]


def questions(endpoint: Endpoint) -> dict[str, Answer]:
    """The questions asked of an endpoint: a copy-only door's knee; every other's data
    questions, and a cache's or a redirector's own; beyond reads, a copy's direction where
    the protocol copies both ways and the address family where a run can be held to one
    (both answered only where such runs exist)."""
    protocol = protocol_of(endpoint.protocol)
    asked: dict[str, Answer] = {"knee": _knee} if protocol.copy_only else dict(DATA_QUESTIONS)
    if not protocol.copy_only and endpoint.role == Endpoint.Role.CACHE:
        asked["cache"] = _on_reads(answers.cache)
    if not protocol.copy_only and endpoint.role == Endpoint.Role.REDIRECTOR:
        asked["redirector"] = _redirector(endpoint)
    if protocol.operations >= TPC_OPERATIONS:
        asked |= COPY_QUESTION
    if protocol.family_refusal is None:
        asked |= FAMILY_QUESTION
    return asked


def _asked(endpoint: Endpoint, only: Collection[str] | None) -> dict[str, Answer]:
    """The endpoint's questions (questions()), those in `only` when it is given."""
    return {q: a for q, a in questions(endpoint).items() if only is None or q in only}


def _redirector(endpoint: Endpoint) -> Answer:
    """The redirector's answer, with the samples of the data servers its runs were sent to
    (endpoints whose host and port a run's served_by names) from the same vantage point."""

    def answer(found: Evidence, ctx: Context) -> list[Statement]:
        hosts = {host for s in found.reads for host in s.served_by}
        servers = [
            e
            for e in Endpoint.objects.exclude(pk=endpoint.pk).filter(role=Endpoint.Role.DATA)
            if urlsplit(e.base_url).netloc in hosts
        ]
        by_server = {
            e.pk: samples(read_runs().filter(endpoint=e, vantage_point=ctx.vantage_point_id))
            for e in servers
        }
        return answers.redirector(found.reads, by_server, ctx)

    return answer


def too_thin(
    need: Need,
    endpoint: Endpoint,
    vantage_point: VantagePoint,
    suggested: dict[str, Any] | None,
    ctx: Context,
) -> Statement:
    """Not enough runs to answer `need`'s question: what is missing, and the campaign to
    collect it (`suggested`, None when the endpoint is disabled, has no test file, or the
    campaign cannot be made: the text says why)."""
    question = need.question
    missing = NEEDS[question]
    if question == "knee" and need.operation != READ:
        missing = KNEE_NEEDS[Operation(need.operation)]
    text = (
        f"Too few runs to answer this on {endpoint.name} from {vantage_point.name}: it needs "
        f"{missing}."
    )
    if not endpoint.enabled:
        text += f" {endpoint.name} is disabled: enable it to measure it (campaigns skip it)."
    elif suggested is None and endpoint.default_file is None:
        text += f" Add a test file to {endpoint.name} first: a campaign needs one to read."
    elif suggested is None:
        text += f" {suggestion_refusal(need, endpoint, vantage_point)}"
    else:
        text += (
            f" The suggested campaign measures it: {suggested['runs']} runs, "
            f"{suggested['estimated_duration']}, {format_size(suggested['estimated_bytes'])}."
        )
    # The knee's scope says which operation's knee is missing (its statements say theirs).
    scope = {"operation": need.operation} if question == "knee" else {}
    return ctx.statement(
        question,
        TOO_THIN,
        text,
        [],
        scope=scope,
        enough_data=False,
        suggested_campaign=suggested,
        model_text="",
    )
