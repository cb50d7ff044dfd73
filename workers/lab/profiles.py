"""Lab profiles: the round-trip time the relays add in front of each site."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    """How far away each site is. A site with 0 ms gets no relay: clients reach xrootd directly."""

    name: str
    description: str
    rtt_ms: Mapping[str, float]


PROFILES: dict[str, Profile] = {
    "test": Profile(
        "test", "short RTTs for the test suite", {"local": 0.0, "near": 2.0, "far": 10.0}
    ),
    "paper": Profile(
        "paper", "the papers' sites: 0.5, 26 and 300 ms", {"local": 0.5, "near": 26.0, "far": 300.0}
    ),
}
