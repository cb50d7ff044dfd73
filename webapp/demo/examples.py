"""The lab's example campaigns: one per question of the papers fedprobe comes from, each small
enough to answer it on the lab's test profile in seconds (`manage.py bootstrap` creates them).

Every example reads a file both lab configurations hold (`lab up`'s 1 MiB and 16 MiB files,
also in the test suite's lab), never an endpoint's default file (the largest: 256 MiB on
`./bin/run`'s lab, minutes of small reads). Each description says what the campaign answers,
which paper asked it, how many runs it takes and how long on the lab's test profile (one
worker on a loaded 2-core machine: tests/browser/test_example_campaigns.py prints them; the
campaign page's estimate knows better once the lab has history).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from webapp.campaigns.models import Campaign
from webapp.sites.models import Endpoint, TestFile, VantagePoint
from workers.lab.files import MiB

KiB = 1024


@dataclass(frozen=True)
class Example:
    """One example campaign: its name, what it reads where, and its matrix's fields."""

    name: str
    endpoints: Sequence[str]
    file_size: int
    description: str
    fields: Mapping[str, Any] = field(default_factory=dict)


EXAMPLES: tuple[Example, ...] = (
    Example(
        name="Lab example: read directly or copy first, near site",
        endpoints=("near-root",),
        file_size=1 * MiB,
        description=(
            "Answers de Witt & Lahiff's question (paper 000): from which fraction of a file on "
            "is copying it first faster than reading it in place, and does the answer change "
            "with the read size? Direct reads and copies of a 1 MiB file at the near site, "
            "random 1 KiB and 64 KiB reads of 2%, 10% and 30% of it: 12 runs, about 12 s on "
            "the test profile. The fraction chart marks the crossover."
        ),
        fields={
            "methods": ["direct", "copy"],
            "patterns": ["random"],
            "read_sizes": [1 * KiB, 64 * KiB],
            "fractions": [0.02, 0.1, 0.3],
            "clients": [1],
        },
    ),
    Example(
        name="Lab example: how many clients the near site serves",
        endpoints=("near-root",),
        file_size=16 * MiB,
        description=(
            "Answers Cowan, Stewart & Elwell's question (paper 003): at how many clients does "
            "the aggregate rate stop growing, and what does each client get there? 1, 2, 4 "
            "and 8 clients each reading a quarter of a 16 MiB file in 1 MiB reads at the near "
            "site: 4 runs, about 5 s on the test profile."
        ),
        fields={
            "methods": ["direct"],
            "patterns": ["sequential"],
            "read_sizes": [1 * MiB],
            "fractions": [0.25],
            "clients": [1, 2, 4, 8],
        },
    ),
    Example(
        name="Lab example: sync, async and vector reads, near and far",
        endpoints=("near-root", "far-root"),
        file_size=1 * MiB,
        description=(
            "Answers Furano & Hanushevsky's question (paper 002): do asynchronous and vectored "
            "reads pay off at this round-trip time, and by how much? The same 4 KiB reads of "
            "a quarter of a 1 MiB file, one at a time (in order and at random), 64 "
            "outstanding, and 256 per vectored request, at the near and the far site: 8 runs, "
            "about 8 s on the test profile."
        ),
        fields={
            "methods": ["direct"],
            "patterns": ["sequential", "random", "async", "vector"],
            "read_sizes": [4 * KiB],
            "fractions": [0.25],
            "clients": [1],
        },
    ),
    Example(
        name="Lab example: what read-ahead moves, near site",
        endpoints=("near-root",),
        file_size=1 * MiB,
        description=(
            "Answers Baak & Schott's question (paper 001) for a 64 KiB client read-ahead: "
            "does it serve the reads that follow, or only move bytes nobody asked for? "
            "4 KiB reads of a quarter of a 1 MiB file at the near site, in order, skipping "
            "three blocks after each, and at random: 3 runs, about 3 s on the test profile. A "
            "campaign holds one read-ahead: "
            "the same sequential and random reads without it are runs of the sync, async and "
            "vector example."
        ),
        fields={
            "methods": ["direct"],
            "patterns": ["sequential", "skip", "random"],
            "read_sizes": [4 * KiB],
            "fractions": [0.25],
            "clients": [1],
            "readahead": 64 * KiB,
        },
    ),
    Example(
        name="Lab example: XCache cold and warm, and the redirector",
        # The redirector sends each open to fed-a or fed-b: both are measured directly too.
        endpoints=("xcache-root", "redirector-root", "fed-a-root", "fed-b-root"),
        file_size=1 * MiB,
        description=(
            "Answers Balcas et al.'s question (paper 004): does a cache or a redirector help or "
            "cost? The same 64 KiB random reads of a quarter of a 1 MiB file through the "
            "XCache in front of the far site, twice (the first read is cold unless an earlier "
            "launch warmed the cache, the second warm), and through the redirector and from "
            "the two data servers it federates, twice each too: 8 runs, about 5 s on the test "
            "profile."
        ),
        fields={
            "methods": ["direct"],
            "patterns": ["random"],
            "read_sizes": [64 * KiB],
            "fractions": [0.25],
            "clients": [1],
            "repetitions": 2,
        },
    ),
    Example(
        name="Lab example: what TLS and each authentication cost per door",
        # The near site's doors: anonymous, a WLCG token (roots, https), an X.509 proxy (gsi,
        # https with a client certificate); `lab register` stores their credentials.
        endpoints=(
            "near-root",
            "near-roots",
            "near-gsi-root",
            "near-http",
            "near-https",
            "near-gsi-https",
        ),
        file_size=1 * MiB,
        description=(
            "What does each door of the near site cost before the first byte: plain xroot "
            "and HTTP, a WLCG token over TLS (roots, https), an X.509 proxy (gsi, https with "
            "a client certificate)? A few 4 KiB random reads of a 1 MiB file through each: "
            "6 runs, about 10 s on the test profile. The open time per door chart sets them side "
            "by side."
        ),
        fields={
            "methods": ["direct"],
            "patterns": ["random"],
            "read_sizes": [4 * KiB],
            "fractions": [0.01],
            "clients": [1],
        },
    ),
)

# The examples `bootstrap` created before issue 19. One never launched is replaced by the new
# examples; one with runs is kept as it is (its results are its owner's), beside them.
FORMER_EXAMPLES = (
    "Lab example: direct vs copy at the near site",
    "Lab example: what TLS and authentication cost at the near site",
)


def former_examples_remove() -> list[str]:
    """Delete the former examples nobody launched; the names of those removed."""
    unlaunched = Campaign.objects.filter(name__in=FORMER_EXAMPLES, runs__isnull=True)
    names = sorted(unlaunched.values_list("name", flat=True))
    unlaunched.delete()
    return names


@transaction.atomic
def example_create(
    example: Example, *, owner: User, vantage_point: VantagePoint
) -> Campaign | None:
    """Create `example` unless a campaign of its name exists or the lab is not registered
    (an endpoint or its file missing): the campaign, or None."""
    if Campaign.objects.filter(name=example.name).exists():
        return None
    endpoints = list(Endpoint.objects.filter(name__in=example.endpoints))
    files = list(TestFile.objects.filter(endpoint__in=endpoints, size=example.file_size))
    if len(endpoints) < len(example.endpoints) or len(files) < len(endpoints):
        return None
    campaign = Campaign.objects.create(
        name=example.name, description=example.description, owner=owner, **example.fields
    )
    campaign.endpoints.set(endpoints)
    campaign.test_files.set(_one_per_endpoint(files))
    campaign.vantage_points.set([vantage_point])
    return campaign


def _one_per_endpoint(files: list[TestFile]) -> list[TestFile]:
    chosen: dict[int, TestFile] = {}
    for test_file in sorted(files, key=lambda f: f.path):
        chosen.setdefault(test_file.endpoint_id, test_file)
    return list(chosen.values())
