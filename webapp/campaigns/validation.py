"""What a campaign may hold: the bounds of its parameters and the rules across its fields.

One place for the API's serializer and the pages' form, so that both accept and refuse the
same campaigns; the engine's own bounds (workers/engine/params.py) are the source.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

from webapp.accounts.roles import User
from webapp.campaigns.models import RUN_PARAMETERS
from webapp.sites.models import Endpoint, TestFile
from workers.engine.params import Method, Pattern
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
FRACTION_ERROR = "each fraction must be in (0, 1]"


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
