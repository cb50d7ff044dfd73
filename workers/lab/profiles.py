"""Lab profiles: the round-trip time and the link rate the relays give each site."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    """How far away each site is, and how fast its link.

    `bandwidth_mbps` is each site's link rate in MB/s (1e6 bytes/s, as the relays and run
    JSON count it), shared by every connection to the site in each direction; None (or a
    site left out) is unlimited. A site with 0 ms and no cap gets no relay: clients reach
    xrootd directly; a capped site always has one.
    """

    name: str
    description: str
    rtt_ms: Mapping[str, float]
    bandwidth_mbps: Mapping[str, float | None]

    def bandwidth(self, site: str) -> float | None:
        return self.bandwidth_mbps.get(site)

    def relayed(self, site: str) -> bool:
        """Whether the site's ports go through a relay (an RTT or a cap to emulate)."""
        return self.rtt_ms[site] > 0 or self.bandwidth(site) is not None


PROFILES: dict[str, Profile] = {
    # No caps: the suite copies files of up to 256 MiB through these sites and a cap below
    # what the relay carries anyway (1-2 GB/s, docs/benchmarks.md) would only slow it down.
    # The relay's shared-link pacing has its own tests (tests/workers/lab/test_relay.py).
    "test": Profile(
        "test",
        "short RTTs, unlimited links, for the test suite",
        {"local": 0.0, "near": 2.0, "far": 10.0},
        {"local": None, "near": None, "far": None},
    ),
    # The papers' sites (shared/seeds, docs/lab.md "Profiles" for each figure's source):
    # paper 000's RAL, Lancaster and ASGC RTTs; links of 100 MB/s (a 1 Gb/s LAN: paper 003's
    # ~110 MiB/s LAN peak, paper 000's 1 Gb gateway; RAL's ~220 MB/s reads would leave the
    # relay no margin on this 2-core machine), 8 MB/s (Lancaster: 10% in 1 MB reads ~16.7 s,
    # copy ~127 s) and 5 MB/s (paper 002's 9-10 MB/s at 160 ms, scaled to 300 ms for the
    # same TCP window).
    "paper": Profile(
        "paper",
        "the papers' sites: 0.5, 26 and 300 ms; 100, 8 and 5 MB/s",
        {"local": 0.5, "near": 26.0, "far": 300.0},
        {"local": 100.0, "near": 8.0, "far": 5.0},
    ),
}
