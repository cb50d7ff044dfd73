"""What a campaign may hold: the bounds of its parameters and the rules across its fields.

One place for the API's serializer and the pages' form, so that both accept and refuse the
same campaigns; the engine's own bounds (workers/engine/params.py) are the source.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

from webapp.accounts.roles import User
from webapp.campaigns.models import (
    COPY_OPERATIONS,
    OPERATIONS_OFFERED,
    RUN_PARAMETERS,
    WRITE_OPERATIONS,
)
from webapp.campaigns.traces import Trace
from webapp.sites.models import Endpoint, TestFile
from workers.engine.params import MAX_RATE, AddressFamily, Method, Operation, Pattern
from workers.engine.protocols import protocol_of

# The largest id a query may name: the databases' ids are signed 64-bit (a larger one overflows
# SQLite's binding instead of matching nothing).
MAX_ID = 2**63 - 1
MAX_LIST = 32  # values per parameter list of a campaign
MAX_REPETITIONS = 100
METHODS = tuple(m.value for m in Method)
PATTERNS = tuple(p.value for p in Pattern)

# (lowest, highest) of each whole-number field of a campaign; of each value for the lists.
INT_BOUNDS: dict[str, tuple[int, int]] = {
    **{p.campaign_field: p.int_bounds for p in RUN_PARAMETERS if p.int_bounds is not None},
    "repetitions": (1, MAX_REPETITIONS),
}
# (lowest, highest) of each fractional field of a campaign.
FLOAT_BOUNDS: dict[str, tuple[float, float]] = {"rate": (0.0, MAX_RATE)}
FRACTION_ERROR = "each fraction must be in (0, 1]"
OPERATIONS = OPERATIONS_OFFERED
# The WLCG scope a write needs on the scratch path: creating the files, and deleting them
# after (storage.create alone cannot delete: the run would leave its files behind).
WRITE_SCOPE = "storage.modify"


_Value = TypeVar("_Value", bound=Hashable)


def distinct(values: Iterable[_Value]) -> list[_Value]:
    """The values without repeats, in their first order: a value given twice in a campaign's
    list would measure the same run twice (clients 1, 1 is clients 1)."""
    return list(dict.fromkeys(values))


def fraction_in_bounds(value: float) -> bool:
    return 0 < value <= 1


def campaign_rule_errors(
    *, endpoints: Sequence[Endpoint], test_files: Sequence[TestFile], methods: Sequence[str]
) -> dict[str, str]:
    """The rules across fields that a campaign breaks, by field (empty when it breaks none)."""
    if any(f.endpoint not in endpoints for f in test_files):
        return {"test_files": "every test file must belong to one of the endpoints"}
    missing = [e.name for e in endpoints if not test_files and e.default_file is None]
    if missing:
        return {"endpoints": f"no test file known on {', '.join(missing)}"}
    copy_only = sorted({p.title for e in endpoints if (p := protocol_of(e.protocol)).copy_only})
    if copy_only and Method.DIRECT in methods:
        return {"methods": f"{' and '.join(copy_only)} endpoints are copy-only: use copy or stage"}
    return {}


def campaign_credential_refusal(*, endpoints: Iterable[Endpoint], owner: User | None) -> str:
    """Why a campaign of `owner`'s may not measure `endpoints`: one of them has a credential
    its owner may not spend (Endpoint.credential_usable_by); "" when it may. A campaign
    without an owner (made before campaigns had one, or whose owner was deleted) is an
    admin's, as its other rows are."""
    if owner is None:
        return ""
    for endpoint in endpoints:
        refusal = endpoint.credential_refusal(owner, f"a campaign of {owner.get_username()}")
        if refusal:
            return refusal
    return ""


def campaign_operation_errors(
    *, operations: Sequence[str], endpoints: Sequence[Endpoint], destination: Endpoint | None
) -> dict[str, str]:
    """What a campaign's operations need and lack, by field (a replay's trace:
    campaign_trace_errors): a write needs a scratch path on every endpoint, a copy a
    destination endpoint with one; a token whose scopes are known must allow writing there
    (a write token is not a read token: checked before any run, not found out by a failed
    one); and every endpoint's protocol must do the operations (workers/engine/protocols.py)."""
    writers: list[Endpoint] = []
    if WRITE_OPERATIONS & set(operations):
        missing = [e.name for e in endpoints if not e.scratch_path]
        if missing:
            return {
                "operations": f"write needs a scratch path on every endpoint: "
                f"{', '.join(missing)} has none (set the endpoint's scratch_path)"
            }
        writers.extend(endpoints)
    if COPY_OPERATIONS & set(operations):
        copies = ", ".join(sorted(COPY_OPERATIONS & set(operations)))
        if destination is None:
            return {"destination_endpoint": f"{copies} needs a destination endpoint"}
        if not destination.scratch_path:
            return {
                "destination_endpoint": f"{copies} lands under the destination's scratch path: "
                f"endpoint {destination.name} has none (set its scratch_path)"
            }
        writers.append(destination)
    for endpoint in writers:
        refusal = write_scope_refusal(endpoint)
        if refusal:
            field = "destination_endpoint" if endpoint == destination else "operations"
            return {field: refusal}
    copying = destination if COPY_OPERATIONS & set(operations) else None
    unsupported = _unsupported(operations, [*endpoints, *([copying] if copying else [])])
    return {"operations": unsupported} if unsupported else {}


def _unsupported(operations: Sequence[str], endpoints: Sequence[Endpoint]) -> str:
    """The first operation an endpoint's protocol does not do (yet), said with the endpoint
    (workers/engine/protocols.py declares what each protocol does); "" when all do."""
    for endpoint in endpoints:
        protocol = protocol_of(endpoint.protocol)
        for operation in operations:
            if operation not in protocol.operations:
                return (
                    f"{operation} is not done over {protocol.title}: endpoint "
                    f"{endpoint.name} ({endpoint.protocol})"
                )
    return ""


def write_scope_refusal(endpoint: Endpoint) -> str:
    """Why the endpoint's token cannot write and delete under its scratch path ("" when it
    can, or when its scopes are not known: no credential, an X.509 proxy, an opaque token)."""
    scopes = endpoint.credential_info().get("scopes") or []
    if not scopes or not endpoint.scratch_path:
        return ""
    path = "/" + endpoint.scratch_path.strip("/")
    if scopes_allow(scopes, WRITE_SCOPE, path):
        return ""
    return (
        f"the token of endpoint {endpoint.name} cannot write under its scratch path {path}: "
        f"its scopes ({' '.join(scopes)}) have no {WRITE_SCOPE}:{path} or a scope above it "
        "(writes create and then delete their files)"
    )


def scopes_allow(scopes: Iterable[str], name: str, path: str) -> bool:
    """Does a WLCG scope `name:/dir` in `scopes` cover `path` (the dir itself or below)?"""
    for scope in scopes:
        scope_name, _, where = scope.partition(":")
        if scope_name != name:
            continue
        base = "/" + where.strip("/")
        if base in ("/", path) or path.startswith(base.rstrip("/") + "/"):
            return True
    return False


def campaign_family_errors(*, address_family: str, endpoints: Sequence[Endpoint]) -> dict[str, str]:
    """A family (4, 6, or each: runs of both) needs endpoints whose protocol can be held to
    one (workers/engine/protocols.py); whether each name has addresses of it is found by
    each run (no DNS here: a name's addresses change, and the run says what it found)."""
    if address_family == AddressFamily.ANY:
        return {}
    for endpoint in endpoints:
        refusal = protocol_of(endpoint.protocol).family_refusal
        if refusal:
            return {"address_family": f"endpoint {endpoint.name}: {refusal}"}
    return {}


def campaign_trace_errors(*, operations: Sequence[str], trace: Trace | None) -> dict[str, str]:
    """A replay replays a recorded job: the campaign must name one (Campaign.trace)."""
    if Operation.REPLAY in operations and trace is None:
        return {
            "trace": "replay needs a trace: upload the job's recorder CSV (Traces) and "
            "choose it; each endpoint must hold the recorded files at the same paths"
        }
    return {}
