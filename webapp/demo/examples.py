"""The lab's example campaigns: one per question of the papers fedprobe comes from, and one per
operation beyond reads (a write, a metadata storm, a third-party copy, a recorded job's
replay), each small enough to answer it on the lab's test profile in seconds (`manage.py
bootstrap` creates them).

Every example reads a file both lab configurations hold (`lab up`'s 1 MiB and 16 MiB files,
also in the test suite's lab), never an endpoint's default file (the largest: 256 MiB on
`./bin/run`'s lab, minutes of small reads). Each description says what the campaign answers,
which paper asked it, how many runs it takes and how long on the lab's test profile (one
worker on a loaded 2-core machine: tests/browser/test_example_campaigns.py and
tests/webapp/demo/test_example_operations.py print them; the campaign page's estimate knows
better once the lab has history).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from webapp.campaigns.models import Campaign
from webapp.campaigns.traces import Trace, TraceRefused, trace_create
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
    # A copy's destination endpoint (Campaign.destination_endpoint), by name.
    destination: str = ""
    # A replay's recorded job: a CSV of TRACES, uploaded once as a trace of that name.
    trace: str = ""

    @property
    def operations(self) -> list[str]:
        return list(self.fields.get("operations", ["read"]))


# The recorded jobs the examples replay (webapp/demo/traces/), and their traces' names.
TRACES = Path(__file__).parent / "traces"
# lab-job.csv: a real recording (the PyPI bindings' recorder plugin, libXrdClRecorder-6.so)
# of a small job on the lab's local site, host rewritten to recorded.example: open the
# 16 MiB file, stat it, four 64 KiB reads 10 ms apart, a readv of three chunks, three
# 128 KiB reads sent at once, close; open the 1 MiB file, read it whole, read 4 KiB at 100
# bytes before its end (gets 100), close. Both files are in every lab (bin/run's and the
# test suite's).
TRACE_NAMES = {"lab-job.csv": "Lab example: a small job on the 16 MiB and 1 MiB files"}


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

# Issue 20's operations beyond reads: the writes and copies go to the sites' scratch folders
# (docs/lab.md), with the token doors' oauth client that may write there (lab register).
EXAMPLES += (
    Example(
        name="Lab example: how fast the near site takes writes, by door",
        endpoints=("near-root", "near-https"),
        file_size=1 * MiB,
        description=(
            "At what rate does the near site take writes, and does it keep it for more "
            "writers? 1, 2 and 4 clients each upload a 4 MiB file in 256 KiB requests to the "
            "near site's scratch folder, over anonymous xroot and over https with a token that "
            "may write there; the server's adler32 of each file is checked, then the files are "
            "deleted: 6 runs, about 5 s on the test profile."
        ),
        fields={
            "operations": ["write"],
            "methods": ["direct"],
            "patterns": ["sequential"],
            "read_sizes": [256 * KiB],
            "fractions": [1.0],
            "clients": [1, 2, 4],
            "file_size": 4 * MiB,
        },
    ),
    Example(
        name="Lab example: a metadata storm at the near site",
        endpoints=("near-root", "near-https"),
        file_size=1 * MiB,
        description=(
            "How many stat, open-close and directory listing requests a second does the near "
            "site answer, per door, and what does each cost at the 50th and 99th percentile? "
            "200 of each per client, as fast as they are answered, with 1 and 4 clients, over "
            "xroot and over https with a token: 12 runs, about 17 s on the test profile."
        ),
        fields={
            "operations": ["stat", "open", "list"],
            "methods": ["direct"],
            "patterns": ["sequential"],
            "read_sizes": [4 * KiB],
            "fractions": [1.0],
            "clients": [1, 4],
            "ops_per_client": 200,
        },
    ),
    Example(
        name="Lab example: third-party copy near to far, pull and push",
        endpoints=("near-https",),
        destination="far-https",
        file_size=16 * MiB,
        description=(
            "Which way does a site-to-site copy go faster, and how long until the bytes move? "
            "The 16 MiB file copied by HTTP-TPC from the near site to the far site's scratch "
            "folder, pulled by the far site and pushed by the near one, each side with its "
            "own token (the source's handed over in TransferHeaderAuthorization), the copy's "
            "adler32 checked at the far site and the copy deleted; twice each: 4 runs, about "
            "3 s on the test profile."
        ),
        fields={
            "operations": ["tpc-pull", "tpc-push"],
            "methods": ["direct"],
            "patterns": ["sequential"],
            "read_sizes": [1 * MiB],
            "fractions": [1.0],
            "clients": [1],
            "repetitions": 2,
        },
    ),
    Example(
        name="Lab example: a recorded job replayed near and far",
        endpoints=("near-root", "far-root", "near-https"),
        file_size=16 * MiB,
        trace="lab-job.csv",
        description=(
            "What does a real job's file access cost at each site and door? A small job "
            "recorded with XRootD's client recorder (an open, reads 10 ms apart, a vector read, "
            "three reads at once, then a second file) replayed step by step as fast as each "
            "answer comes, by 1 and 4 clients, at the near and the far site over xroot and at "
            "the near site over https: 6 runs, about 4 s on the test profile."
        ),
        fields={
            "operations": ["replay"],
            "methods": ["direct"],
            "patterns": ["sequential"],
            "read_sizes": [4 * KiB],
            "fractions": [1.0],
            "clients": [1, 4],
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
    (an endpoint, its file or the copy's destination missing), or its trace's name is taken
    by another trace: the campaign, or None."""
    if Campaign.objects.filter(name=example.name).exists():
        return None
    endpoints = list(Endpoint.objects.filter(name__in=example.endpoints))
    files = list(TestFile.objects.filter(endpoint__in=endpoints, size=example.file_size))
    if len(endpoints) < len(example.endpoints) or len(files) < len(endpoints):
        return None
    destination = None
    if example.destination:
        destination = Endpoint.objects.filter(name=example.destination).first()
        if destination is None:
            return None
    trace = None
    if example.trace:
        try:
            trace = example_trace(example.trace, owner=owner)
        except TraceRefused:
            return None
    campaign = Campaign.objects.create(
        name=example.name,
        description=example.description,
        owner=owner,
        destination_endpoint=destination,
        trace=trace,
        **example.fields,
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


def example_trace(file_name: str, *, owner: User) -> Trace:
    """The trace of the recorded job in TRACES/`file_name`: the one stored already (by its
    text: an operator may have uploaded it under another name), else uploaded now."""
    text = (TRACES / file_name).read_text()
    stored = Trace.objects.filter(sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
    return stored.first() or trace_create(name=TRACE_NAMES[file_name], text=text, owner=owner)
