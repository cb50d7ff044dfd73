"""The advice of an endpoint, a site or a campaign: per endpoint and vantage point, each
question's statements from the runs that exist, or a "too thin" statement with the one
campaign that would collect what is missing (docs/advice.md)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from webapp.advice import answers
from webapp.advice.answers import Context
from webapp.advice.evidence import Sample, samples, succeeded_runs
from webapp.advice.link import estimate_link
from webapp.advice.statements import TOO_THIN, Statement
from webapp.advice.suggestions import readahead_to_measure, suggestions
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import Endpoint, Site, VantagePoint
from workers.engine.protocols import protocol_of
from workers.engine.units import format_size

Answer = Callable[[Sequence[Sample], Context], list[Statement]]

# What each question needs, in words, for the "too thin" statement.
NEEDS = {
    "crossover": "direct reads and copies of one read size at two fractions or more",
    "knee": "one kind of read at three client counts or more",
    "latency-hiding": "one read size read one at a time and with async or vector reads",
    "read-ahead": "the same reads with and without read-ahead",
    "cache": "a test file read more than once through the cache",
    "redirector": "opens through the redirector and at the data servers it sends to",
}
DATA_QUESTIONS: dict[str, Answer] = {
    "crossover": answers.crossover,
    "knee": answers.knee,
    "latency-hiding": answers.latency_hiding,
    "read-ahead": answers.read_ahead,
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
) -> list[Sample]:
    if vantage_point.pk is None:  # the local one, not made yet: nothing measured from it
        return []
    found = succeeded_runs().filter(endpoint=endpoint, vantage_point=vantage_point)
    if runs is not None:
        found = found.filter(pk__in=runs.values("pk"))
    return samples(found)


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
        link=estimate_link(found),
    )
    made = {question: answer(found, ctx) for question, answer in asked.items()}
    thin = [question for question, statements in made.items() if not statements]
    suggested = suggestions(
        {q: readahead_to_measure(q, endpoint, vantage_point) for q in thin},
        endpoint,
        vantage_point,
    )
    for question in thin:
        made[question] = [too_thin(question, endpoint, vantage_point, suggested[question], ctx)]
    return [statement for statements in made.values() for statement in statements]


def questions(endpoint: Endpoint) -> dict[str, Answer]:
    """The questions asked of an endpoint: a copy-only door's knee; every other's data
    questions, and a cache's or a redirector's own."""
    if protocol_of(endpoint.protocol).copy_only:
        return {"knee": answers.knee}
    asked = dict(DATA_QUESTIONS)
    if endpoint.role == Endpoint.Role.CACHE:
        asked["cache"] = answers.cache
    if endpoint.role == Endpoint.Role.REDIRECTOR:
        asked["redirector"] = _redirector(endpoint)
    return asked


def _asked(endpoint: Endpoint, only: Collection[str] | None) -> dict[str, Answer]:
    """The endpoint's questions (questions()), those in `only` when it is given."""
    return {q: a for q, a in questions(endpoint).items() if only is None or q in only}


def _redirector(endpoint: Endpoint) -> Answer:
    """The redirector's answer, with the samples of the data servers its runs were sent to
    (endpoints whose host and port a run's served_by names) from the same vantage point."""

    def answer(found: Sequence[Sample], ctx: Context) -> list[Statement]:
        hosts = {host for s in found for host in s.served_by}
        servers = [
            e
            for e in Endpoint.objects.exclude(pk=endpoint.pk).filter(role=Endpoint.Role.DATA)
            if urlsplit(e.base_url).netloc in hosts
        ]
        by_server = {
            e.pk: samples(succeeded_runs().filter(endpoint=e, vantage_point=ctx.vantage_point_id))
            for e in servers
        }
        return answers.redirector(found, by_server, ctx)

    return answer


def too_thin(
    question: str,
    endpoint: Endpoint,
    vantage_point: VantagePoint,
    suggested: dict[str, Any] | None,
    ctx: Context,
) -> Statement:
    """Not enough runs to answer `question`: what is missing, and the campaign to collect it
    (`suggested`, None when the endpoint is disabled or has no test file)."""
    text = (
        f"Too few runs to answer this on {endpoint.name} from {vantage_point.name}: it needs "
        f"{NEEDS[question]}."
    )
    if not endpoint.enabled:
        text += f" {endpoint.name} is disabled: enable it to measure it (campaigns skip it)."
    elif suggested is None:
        text += f" Add a test file to {endpoint.name} first: a campaign needs one to read."
    else:
        text += (
            f" The suggested campaign measures it: {suggested['runs']} runs, "
            f"{suggested['estimated_duration']}, {format_size(suggested['estimated_bytes'])}."
        )
    return ctx.statement(
        question,
        TOO_THIN,
        text,
        [],
        enough_data=False,
        suggested_campaign=suggested,
        model_text="",
    )
