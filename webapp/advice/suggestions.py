"""The one campaign that would collect what a question is missing, with what it would cost
(webapp/campaigns/estimates.py: runs, duration, bytes), and its creation (not launched).

A suggestion is a plain dict: the campaign's fields (as the campaigns API names them) and
its estimate. `create_suggested_campaign` rebuilds the campaign from the endpoint, vantage
point and question alone, so that what is created is what the advice suggested, never
fields a client sent."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from webapp.advice.evidence import succeeded_runs
from webapp.campaigns.estimates import campaign_planned_runs, planned_durations
from webapp.campaigns.models import Campaign, MatrixRows
from webapp.campaigns.services import campaign_save
from webapp.campaigns.validation import campaign_credential_refusal
from webapp.sites.models import Endpoint, VantagePoint
from workers.engine.params import Method, Pattern

KIB = 1024
MIB = 1024 * 1024

# Per question: what a campaign needs to answer it, and why (its description).
PLANS: dict[str, dict[str, Any]] = {
    "crossover": {
        "methods": [Method.DIRECT, Method.COPY],
        "patterns": [Pattern.RANDOM],
        "read_sizes": [64 * KIB, MIB],
        "fractions": [0.01, 0.1, 0.25, 0.5, 1.0],
        "clients": [1],
        "repetitions": 3,
        "why": "direct reads and copies across fractions and read sizes: where copying "
        "first becomes faster (paper 000)",
    },
    "knee": {
        "methods": [Method.DIRECT],
        "patterns": [Pattern.SEQUENTIAL],
        "read_sizes": [MIB],
        "fractions": [1.0],
        "clients": [1, 2, 4, 8, 16, 32],
        "repetitions": 2,
        "why": "a client sweep: where the aggregate rate stops growing (paper 003)",
    },
    "latency-hiding": {
        "methods": [Method.DIRECT],
        "patterns": [Pattern.RANDOM, Pattern.ASYNC, Pattern.VECTOR],
        "read_sizes": [64 * KIB],
        "fractions": [0.1],
        "clients": [1],
        "repetitions": 3,
        "why": "synchronous, asynchronous and vector reads side by side: whether hiding the "
        "round trip pays off (paper 002)",
    },
    "read-ahead": {
        "methods": [Method.DIRECT],
        "patterns": [Pattern.SEQUENTIAL, Pattern.RANDOM],
        "read_sizes": [4 * KIB],
        "fractions": [0.1],
        "clients": [1],
        "repetitions": 3,
        "why": "reads with read-ahead, to set beside the same reads without it (paper 001)",
    },
    "cache": {
        "methods": [Method.DIRECT],
        "patterns": [Pattern.SEQUENTIAL],
        "read_sizes": [MIB],
        "fractions": [1.0],
        "clients": [1],
        "repetitions": 3,
        "why": "the same file read three times: the first run finds the cache cold, the "
        "others warm (paper 004)",
    },
    "redirector": {
        "methods": [Method.DIRECT],
        "patterns": [Pattern.SEQUENTIAL],
        "read_sizes": [MIB],
        "fractions": [0.1],
        "clients": [1],
        "repetitions": 3,
        "why": "opens through the redirector, to set beside its data servers' (paper 004)",
    },
}
# The read-ahead a suggestion for that question asks for when runs with none exist (a
# campaign has one read-ahead: the runs without it come from another).
READAHEAD = MIB


def suggestion(
    question: str, endpoint: Endpoint, vantage_point: VantagePoint, *, readahead: int = 0
) -> dict[str, Any] | None:
    """The campaign that would answer `question` on the endpoint from the vantage point,
    with its estimated runs, duration and bytes; None without a test file to read."""
    return suggestions({question: readahead}, endpoint, vantage_point)[question]


def suggestions(
    readaheads: dict[str, int], endpoint: Endpoint, vantage_point: VantagePoint
) -> dict[str, dict[str, Any] | None]:
    """`suggestion` of each question (with its read-ahead), estimated together: the earlier
    runs the estimates go by are read once."""
    drafts = {q: _draft(q, endpoint, vantage_point, readahead=r) for q, r in readaheads.items()}
    planned = {
        q: campaign_planned_runs(campaign=campaign, rows=rows)
        for q, (campaign, rows) in drafts.items()
        if rows.test_files
    }
    durations = dict(zip(planned, planned_durations(list(planned.values())), strict=True))
    found: dict[str, dict[str, Any] | None] = {}
    for question, (campaign, rows) in drafts.items():
        if question not in planned:
            found[question] = None
            continue
        duration = durations[question]
        found[question] = {
            "question": question,
            "name": campaign.name,
            "description": campaign.description,
            "endpoint": endpoint.pk,
            "vantage_point": vantage_point.pk,
            "endpoints": [endpoint.pk],
            # None: the local vantage point, made when the campaign is.
            "vantage_points": [vantage_point.pk] if vantage_point.pk else [],
            "test_files": [f.pk for f in rows.test_files],
            "methods": [str(m) for m in campaign.methods],
            "patterns": [str(p) for p in campaign.patterns],
            "read_sizes": campaign.read_sizes,
            "fractions": campaign.fractions,
            "clients": campaign.clients,
            "repetitions": campaign.repetitions,
            "readahead": campaign.readahead,
            "runs": duration.runs,
            "estimated_duration_s": duration.seconds,
            "estimated_duration": duration.text,
            "estimated_upper_s": duration.upper_s,
            "estimated_bytes": sum(p.planned_bytes for p in planned[question]),
        }
    return found


def _draft(
    question: str, endpoint: Endpoint, vantage_point: VantagePoint, *, readahead: int
) -> tuple[Campaign, MatrixRows]:
    plan = PLANS[question]
    campaign = Campaign(
        name=f"Advice: {question} on {endpoint.name} from {vantage_point.name}",
        description=f"Suggested by the advice to answer '{question}': {plan['why']}.",
        methods=[str(m) for m in plan["methods"]],
        patterns=[str(p) for p in plan["patterns"]],
        read_sizes=list(plan["read_sizes"]),
        fractions=list(plan["fractions"]),
        clients=list(plan["clients"]),
        repetitions=plan["repetitions"],
        readahead=readahead,
    )
    test_file = endpoint.default_file if endpoint.enabled else None
    files = [test_file] if test_file is not None else []
    return campaign, MatrixRows(files, [vantage_point])


def readahead_to_measure(question: str, endpoint: Endpoint, vantage_point: VantagePoint) -> int:
    """The read-ahead the suggestion for `question` measures: for the read-ahead question,
    READAHEAD unless runs with read-ahead already exist (then the runs without it are
    missing); 0 for every other question."""
    if question != "read-ahead":
        return 0
    if vantage_point.pk is None:
        return READAHEAD
    with_it = succeeded_runs().filter(
        endpoint=endpoint, vantage_point=vantage_point, readahead__gt=0
    )
    return 0 if with_it.exists() else READAHEAD


@transaction.atomic
def create_suggested_campaign(
    *,
    question: str,
    endpoint: Endpoint,
    vantage_point: VantagePoint,
    owner: User,
) -> Campaign:
    """Create (not launch) the campaign the advice suggests for `question`, owned by
    `owner`. Raises ValidationError naming the field when it cannot be made."""
    if question not in PLANS:
        raise ValidationError(
            {"question": f"unknown question {question!r}: one of {', '.join(PLANS)}"}
        )
    readahead = readahead_to_measure(question, endpoint, vantage_point)
    campaign, rows = _draft(question, endpoint, vantage_point, readahead=readahead)
    if not rows.test_files:
        raise ValidationError({"endpoint": f"no test file known on {endpoint.name}"})
    refusal = campaign_credential_refusal(endpoints=[endpoint], owner=owner)
    if refusal:
        raise ValidationError({"endpoint": refusal})
    campaign.owner = owner
    return campaign_save(
        campaign=campaign,
        endpoints=[endpoint],
        test_files=rows.test_files,
        vantage_points=[vantage_point] if vantage_point.pk else [],
    )
