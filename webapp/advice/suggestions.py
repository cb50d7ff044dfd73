"""The one campaign that would collect what a question is missing, with what it would cost
(webapp/campaigns/estimates.py: runs, duration, bytes), and its creation (not launched).

A suggestion is a plain dict: the campaign's fields (as the campaigns API names them) and
its estimate. `create_suggested_campaign` rebuilds the campaign from the endpoint, vantage
point, question and (the knee's) operation alone, so that what is created is what the
advice suggested, never fields a client sent: what else a campaign beyond reads needs (a
copy's destination, the family a comparison lacks) is read from the runs that asked the
question."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from webapp.advice.evidence import FAMILIES, other_runs, read_runs, succeeded_runs
from webapp.campaigns.estimates import campaign_planned_runs, planned_durations
from webapp.campaigns.models import COPY_OPERATIONS, Campaign, MatrixRows
from webapp.campaigns.services import campaign_save
from webapp.campaigns.validation import campaign_credential_refusal, campaign_operation_errors
from webapp.sites.models import Endpoint, VantagePoint
from workers.engine.params import AddressFamily, Method, Operation, Pattern

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
    # Beyond reads (issue 20): the destination is the one the endpoint's copies went to.
    "tpc-direction": {
        "operations": [Operation.TPC_PULL, Operation.TPC_PUSH],
        "methods": [Method.DIRECT],
        "patterns": [Pattern.SEQUENTIAL],
        "read_sizes": [MIB],
        "fractions": [1.0],
        "clients": [1],
        "repetitions": 3,
        "why": "the same file copied to the same destination pulled and pushed: which "
        "direction is faster, and which starts sooner",
    },
    # The parameter set of the newest run pinned to a family, over the family it lacks.
    "address-family": {
        "repetitions": 3,
        "why": "the runs measured over one address family, over the other: whether one is slower",
    },
}
# The knee of other operations: the same client sweep, writing or in a metadata storm.
KNEE_PLANS: dict[str, dict[str, Any]] = {
    Operation.WRITE: {
        "read_sizes": [MIB],
        "why": "writes of 16 MiB files in 1 MiB requests by a client sweep (each client's "
        "files deleted after): where writing stops scaling",
    },
    **{
        operation: {
            "read_sizes": [MIB],
            "why": f"{operation} storms by a client sweep, as fast as the endpoint answers: "
            "where the operation rate flattens",
        }
        for operation in (Operation.STAT, Operation.OPEN, Operation.LIST)
    },
}
# The operations a knee campaign is suggested (and created) for: reads and KNEE_PLANS'.
SUGGESTED_KNEES = (Operation.READ.value, *(str(o) for o in KNEE_PLANS))


@dataclass(frozen=True)
class Need:
    """What a too-thin statement lacks: its question, the operation it is about (the
    knee's: a read's, a write's or a storm's) and the read-ahead to measure (read-ahead's)."""

    question: str
    operation: str = Operation.READ.value
    readahead: int = 0


# The read-ahead a suggestion for that question asks for when runs with none exist (a
# campaign has one read-ahead: the runs without it come from another).
READAHEAD = MIB


def suggestion(
    question: str,
    endpoint: Endpoint,
    vantage_point: VantagePoint,
    *,
    readahead: int = 0,
    operation: str = Operation.READ.value,
) -> dict[str, Any] | None:
    """The campaign that would answer `question` on the endpoint from the vantage point,
    with its estimated runs, duration and bytes; None without a test file to read or when
    the campaign cannot be made (suggestion_refusal says why)."""
    need = Need(question, operation, readahead)
    return suggestions([need], endpoint, vantage_point)[need]


def suggestions(
    needs: list[Need], endpoint: Endpoint, vantage_point: VantagePoint
) -> dict[Need, dict[str, Any] | None]:
    """`suggestion` of each need, estimated together: the earlier runs the estimates go by
    are read once."""
    drafts = {}
    for need in needs:
        try:
            drafts[need] = _draft(need, endpoint, vantage_point)
        except ValidationError:
            continue
    planned = {
        need: campaign_planned_runs(campaign=campaign, rows=rows)
        for need, (campaign, rows) in drafts.items()
        if rows.test_files
    }
    durations = dict(zip(planned, planned_durations(list(planned.values())), strict=True))
    found: dict[Need, dict[str, Any] | None] = {}
    for need in needs:
        if need not in planned:
            found[need] = None
            continue
        campaign, rows = drafts[need]
        duration = durations[need]
        found[need] = {
            "question": need.question,
            "operation": need.operation,
            "name": campaign.name,
            "description": campaign.description,
            "endpoint": endpoint.pk,
            "vantage_point": vantage_point.pk,
            "endpoints": [endpoint.pk],
            # None: the local vantage point, made when the campaign is.
            "vantage_points": [vantage_point.pk] if vantage_point.pk else [],
            "test_files": [f.pk for f in rows.test_files],
            "operations": [str(o) for o in campaign.operations],
            "destination_endpoint": campaign.destination_endpoint_id,
            "address_family": campaign.address_family,
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
            "estimated_bytes": sum(p.planned_bytes for p in planned[need]),
        }
    return found


def suggestion_refusal(need: Need, endpoint: Endpoint, vantage_point: VantagePoint) -> str:
    """Why no campaign can be suggested for `need` (an endpoint with a test file): the
    campaign's own refusal, in a sentence ("" when one can be)."""
    try:
        _draft(need, endpoint, vantage_point)
    except ValidationError as error:
        return " ".join(m.rstrip(".") + "." for m in error.messages)
    return ""


def _draft(
    need: Need, endpoint: Endpoint, vantage_point: VantagePoint
) -> tuple[Campaign, MatrixRows]:
    """The campaign that collects what `need` lacks, unsaved; ValidationError naming the
    field when it cannot be made (a write without a scratch path, a copy whose destination
    no run names)."""
    question = need.question
    plan = PLANS[question]
    knee_of = need.operation if question == "knee" else Operation.READ.value
    fields: dict[str, Any] = {
        "operations": [str(o) for o in plan.get("operations", [knee_of])],
        "methods": [str(m) for m in plan.get("methods", ())],
        "patterns": [str(p) for p in plan.get("patterns", ())],
        "read_sizes": list(plan.get("read_sizes", ())),
        "fractions": list(plan.get("fractions", ())),
        "clients": list(plan.get("clients", ())),
        "readahead": need.readahead,
    }
    why, about = plan["why"], question
    if knee_of != Operation.READ:
        if knee_of not in KNEE_PLANS:
            raise ValidationError({"operation": f"no knee of {knee_of!r} runs is measured"})
        why, about = KNEE_PLANS[knee_of]["why"], f"knee of {knee_of}"
        fields["read_sizes"] = list(KNEE_PLANS[knee_of]["read_sizes"])
    if question == "tpc-direction":
        fields["destination_endpoint"] = _copied_to(endpoint, vantage_point)
    if question == "address-family":
        fields |= _other_family(endpoint, vantage_point)
    errors = campaign_operation_errors(
        operations=fields["operations"],
        endpoints=[endpoint],
        destination=fields.get("destination_endpoint"),
    )
    if errors:
        raise ValidationError(errors)
    test_file = fields.pop("test_file", None)
    if test_file is None:
        test_file = endpoint.default_file if endpoint.enabled else None
    campaign = Campaign(
        name=f"Advice: {about} on {endpoint.name} from {vantage_point.name}",
        description=f"Suggested by the advice to answer '{about}': {why}.",
        repetitions=plan["repetitions"],
        **fields,
    )
    files = [test_file] if test_file is not None else []
    return campaign, MatrixRows(files, [vantage_point])


def _copied_to(endpoint: Endpoint, vantage_point: VantagePoint) -> Endpoint:
    """The destination of the endpoint's newest copy from the vantage point."""
    copies = other_runs().filter(
        endpoint=endpoint, operation__in=COPY_OPERATIONS, destination_endpoint__isnull=False
    )
    if vantage_point.pk is not None:
        copies = copies.filter(vantage_point=vantage_point)
    newest = copies.order_by("-finished_at", "-id").select_related("destination_endpoint").first()
    if newest is None or newest.destination_endpoint is None or vantage_point.pk is None:
        raise ValidationError(
            {
                "question": f"no third-party copy from {endpoint.name} measured from "
                f"{vantage_point.name}: the copies' destination is not known"
            }
        )
    return newest.destination_endpoint


# The axes an address-family suggestion copies from the run it pairs: run column, campaign field.
_PAIRED = {
    "operation": "operations",
    "method": "methods",
    "pattern": "patterns",
    "read_size": "read_sizes",
    "fraction": "fractions",
    "clients": "clients",
}


def _other_family(endpoint: Endpoint, vantage_point: VantagePoint) -> dict[str, Any]:
    """The newest run pinned to a family, as a campaign's fields over the other family: its
    axes, test file and the shared parameters the comparison groups by."""
    pinned = succeeded_runs().filter(endpoint=endpoint, address_family__in=FAMILIES)
    if vantage_point.pk is not None:
        pinned = pinned.filter(vantage_point=vantage_point)
    newest = pinned.order_by("-finished_at", "-id").select_related("test_file", "campaign").first()
    if newest is None or vantage_point.pk is None:
        raise ValidationError(
            {
                "question": f"no run of {endpoint.name} pinned to an address family measured "
                f"from {vantage_point.name}: pin a campaign to 4 or 6 first"
            }
        )
    other = FAMILIES[1] if newest.address_family == FAMILIES[0] else FAMILIES[0]
    fields: dict[str, Any] = {field: [getattr(newest, name)] for name, field in _PAIRED.items()}
    return fields | {
        "file_size": newest.file_size,
        "rate": newest.rate,
        "ops_per_client": newest.ops_per_client,
        "readahead": newest.readahead,
        "destination_endpoint": newest.destination_endpoint,
        # A replay replays its campaign's recorded job.
        "trace": newest.campaign.trace if newest.operation == Operation.REPLAY else None,
        "address_family": AddressFamily(other).value,
        "test_file": newest.test_file,
    }


def readahead_to_measure(question: str, endpoint: Endpoint, vantage_point: VantagePoint) -> int:
    """The read-ahead the suggestion for `question` measures: for the read-ahead question,
    READAHEAD unless runs with read-ahead already exist (then the runs without it are
    missing); 0 for every other question."""
    if question != "read-ahead":
        return 0
    if vantage_point.pk is None:
        return READAHEAD
    with_it = read_runs().filter(endpoint=endpoint, vantage_point=vantage_point, readahead__gt=0)
    return 0 if with_it.exists() else READAHEAD


@transaction.atomic
def create_suggested_campaign(
    *,
    question: str,
    endpoint: Endpoint,
    vantage_point: VantagePoint,
    owner: User,
    operation: str = Operation.READ.value,
) -> Campaign:
    """Create (not launch) the campaign the advice suggests for `question` (the knee: of
    `operation`), owned by `owner`. Raises ValidationError naming the field when it cannot
    be made."""
    if question not in PLANS:
        raise ValidationError(
            {"question": f"unknown question {question!r}: one of {', '.join(PLANS)}"}
        )
    if operation not in SUGGESTED_KNEES or (question != "knee" and operation != "read"):
        raise ValidationError(
            {
                "operation": f"no {question} of {operation!r} runs is asked: the knee is "
                f"asked of {', '.join(SUGGESTED_KNEES)}, the other questions of one kind each"
            }
        )
    readahead = readahead_to_measure(question, endpoint, vantage_point)
    campaign, rows = _draft(Need(question, operation, readahead), endpoint, vantage_point)
    if not rows.test_files:
        raise ValidationError({"endpoint": f"no test file known on {endpoint.name}"})
    sides = [endpoint, *([campaign.destination_endpoint] if campaign.destination_endpoint else [])]
    refusal = campaign_credential_refusal(endpoints=sides, owner=owner)
    if refusal:
        raise ValidationError({"endpoint": refusal})
    campaign.owner = owner
    return campaign_save(
        campaign=campaign,
        endpoints=[endpoint],
        test_files=rows.test_files,
        vantage_points=[vantage_point] if vantage_point.pk else [],
    )
