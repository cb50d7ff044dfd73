"""Experiments (campaigns), their runs, and each run's client attempts."""

from __future__ import annotations

import dataclasses
import itertools
import math
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from webapp.accounts.roles import User, can_edit, can_operate
from webapp.campaigns.cron import (
    DEFAULT_ZONE,
    CronError,
    launches_after,
    parse_cron,
    slot_slip,
    time_zone,
    validate_cron,
    validate_time_zone,
)
from webapp.campaigns.cron_words import cron_words
from webapp.campaigns.metrics import METRICS
from webapp.campaigns.traces import Trace
from webapp.core import sql
from webapp.sites.models import Endpoint, TestFile, VantagePoint
from workers.engine.credentials import AuthMethod
from workers.engine.errors import CREDENTIAL_PHASE, TESTER_FAULT_CLASSES, ErrorClass
from workers.engine.params import INT_BOUNDS as ENGINE_INT_BOUNDS
from workers.engine.params import (
    MAX_TIMEOUT_S,
    TPC_OPERATIONS,
    AddressFamily,
    Method,
    Operation,
    Pattern,
    ReplayTiming,
    RunParams,
    file_collection,
)

# What a user who may not cancel is told (pages and API).
RUN_CANCEL_REFUSAL = (
    "only the campaign's owner, whoever launched the run, or an admin may cancel it"
)
SCHEDULE_PAUSE_REFUSAL = "only the campaign's owner or an admin may pause or resume its schedule"
CAMPAIGN_CANCEL_REFUSAL = (
    "only the campaign's owner or an admin may cancel it (an operator who launched some of "
    "its runs: those runs)"
)


@dataclass(frozen=True)
class RunParameter:
    """One parameter of a run: its Run column (the run JSON's name), the engine's name for
    it (a RunParams field), and whether a campaign holds a list of values (an axis of its
    matrix: one run per value) or one value for all its runs."""

    name: str
    campaign_field: str
    axis: bool = False
    engine: str = ""
    to_engine: Callable[[Any], Any] = field(default=lambda value: value, compare=False)
    # How the campaign form and the API offer one a campaign holds one value of: the form's
    # label and help, typed as a size (64k, 1M), and bounds if not the engine's INT_BOUNDS.
    label: str = ""
    help_text: str = ""
    size: bool = False
    bounds: tuple[int, int] | None = None
    # A parameter a campaign holds one value of that may name several runs' values (one run
    # per value, as an axis makes): the values its runs get; None: the campaign's one value.
    expand: Callable[[Any], list[Any]] | None = field(default=None, compare=False)

    @property
    def engine_field(self) -> str:
        return self.engine or self.name

    @property
    def int_bounds(self) -> tuple[int, int] | None:
        """(lowest, highest) of a whole-number parameter (of each value, for an axis)."""
        return self.bounds or ENGINE_INT_BOUNDS.get(self.engine_field)

    @property
    def engine_default(self) -> Any:
        """The value a run gets when nobody says otherwise (RunParams' default), as a
        campaign holds it: what the form offers for an axis left empty."""
        defaults = {f.name: f.default for f in dataclasses.fields(RunParams)}
        default = defaults[self.engine_field]
        return default.value if isinstance(default, Enum) else default


def family_runs(family: str) -> list[str]:
    """The address families a campaign's `family` gives its runs: each is one run pinned to
    IPv4 and one to IPv6 (the CLI's "each" is one run per address of the name, found at run
    time; a campaign's runs are planned before: the name is not resolved when it is saved)."""
    if family == AddressFamily.EACH:
        return [AddressFamily.IPV4.value, AddressFamily.IPV6.value]
    return [family]


# A run's parameters, defined once: the Run and Campaign columns (RunParameters and the
# campaign's lists), the engine's RunParams, run_json, the estimates and the launch all go
# by it. Adding one: a RunParams field, a field of RunParameters, an entry here (docs/).
RUN_PARAMETERS = (
    RunParameter("operation", "operations", axis=True, to_engine=Operation),
    RunParameter("method", "methods", axis=True, to_engine=Method),
    RunParameter("pattern", "patterns", axis=True, to_engine=Pattern),
    RunParameter("read_size", "read_sizes", axis=True),
    RunParameter("fraction", "fractions", axis=True),
    RunParameter("clients", "clients", axis=True),
    RunParameter("files", "files", label="Files per client"),
    RunParameter("depth", "depth", help_text="Requests outstanding (async pattern)."),
    RunParameter(
        "vector_size", "vector_size", help_text="Chunks per vectored read (vector pattern)."
    ),
    RunParameter("skip", "skip", help_text="Blocks skipped after each read (skip pattern)."),
    RunParameter(
        "readahead",
        "readahead",
        label="Read-ahead",
        help_text="Client read-ahead: 0 (off) or a size.",
        size=True,
    ),
    RunParameter("streams", "streams", help_text="Parallel TCP substreams."),
    RunParameter(
        "file_size",
        "file_size",
        label="File size (write)",
        help_text="Bytes each client writes per file, in read-size requests (write).",
        size=True,
    ),
    # Run.ops is the run JSON's operation count: the parameter has a column of its own.
    RunParameter(
        "ops_per_client",
        "ops_per_client",
        engine="ops",
        label="Operations per client",
        help_text="Metadata operations each client makes (stat, open, list).",
    ),
    RunParameter(
        "rate",
        "rate",
        label="Rate (ops/s)",
        help_text="Target metadata operations per second per client; 0: as fast as possible.",
    ),
    RunParameter(
        "address_family",
        "address_family",
        to_engine=AddressFamily,
        help_text="Addresses used: any (the client's choice), 4 (IPv4 only), 6 (IPv6 only), "
        "or each: every run twice, once pinned to IPv4 and once to IPv6.",
        expand=family_runs,
    ),
    RunParameter(
        "replay_timing",
        "replay_timing",
        to_engine=ReplayTiming,
        help_text="Replay pacing: asap, or recorded think times.",
    ),
    RunParameter(
        "deadline_s",
        "deadline_s",
        engine="timeout_s",
        label="Deadline (s)",
        help_text="Empty: from the plan.",
        bounds=(1, MAX_TIMEOUT_S),
    ),
)
# RunParams fields a run gets from elsewhere than a campaign's columns, and why.
LAUNCH_FIELDS = {
    "destination": "a TPC's destination directory: the campaign's destination endpoint's "
    "scratch URL (Campaign.destination_endpoint)",
    "run_tag": "names the files a write or a copy makes: the run's id and its own random "
    "suffix (Run.run_tag)",
    "trace": "replay's recorder CSV on the worker: the trace the run was launched with "
    "(Run.trace, the campaign's when it launched), written by the run's worker to its "
    "private folder (traces.py)",
}
# The operations a campaign may have.
OPERATIONS_OFFERED = tuple(o.value for o in Operation)
# Operations that write under an endpoint's scratch path (a copy: the destination's).
WRITE_OPERATIONS = frozenset({Operation.WRITE.value})
COPY_OPERATIONS = frozenset(o.value for o in TPC_OPERATIONS)

AXES = tuple(p for p in RUN_PARAMETERS if p.axis)
# The parameters a campaign holds one value of that may expand into several runs' values.
EXPANDED = tuple(p for p in RUN_PARAMETERS if p.expand is not None)
# What makes runs comparable over time, a "parameter set" of the dashboards: the axes' values
# and the expanded parameters' (a run over IPv4 is not compared with one over IPv6).
PARAMETER_SET_FIELDS = (*(p.name for p in AXES), *(p.name for p in EXPANDED))
# What a parameter set named without them means: what every run had before they were in it.
PARAMETER_SET_DEFAULTS = {"operation": Operation.READ.value, "address_family": "any"}


def parameter_set_named(given: Mapping[str, Any]) -> dict[str, Any] | None:
    """The parameter set `given` names in full (its values, by name), else None. One that
    names every field but the operation or the address family is a read's, over any family:
    addresses from before those were in it (bookmarks, links, scripts) mean what they
    meant."""
    named = {f: given[f] for f in PARAMETER_SET_FIELDS if given.get(f) not in (None, "")}
    named = PARAMETER_SET_DEFAULTS | named
    if len(named) < len(PARAMETER_SET_FIELDS):
        return None
    return {f: named[f] for f in PARAMETER_SET_FIELDS}


# The parameters a campaign gives all its runs alike (RunParameters' fields, and deadline_s).
SHARED = tuple(p for p in RUN_PARAMETERS if not p.axis)
# A campaign's parameter fields, in the order its form and the API show them: the axes,
# then the shared ones with repetitions before the deadline.
CAMPAIGN_PARAMETER_FIELDS = (
    *(p.campaign_field for p in AXES),
    *(p.campaign_field for p in SHARED if p.name != "deadline_s"),
    "repetitions",
    "deadline_s",
)


def engine_parameters(values: Mapping[str, Any]) -> dict[str, Any]:
    """RunParams' keyword arguments for a run's parameters (by Run column name)."""
    return {p.engine_field: p.to_engine(values[p.name]) for p in RUN_PARAMETERS}


@dataclass(frozen=True)
class Cell:
    """One point of a campaign's parameter space, before it becomes a run: its values of
    RUN_PARAMETERS, by name."""

    endpoint: Endpoint
    test_file: TestFile
    vantage_point: VantagePoint
    parameters: dict[str, Any]
    repetition: int


class RunParameters(models.Model):
    """The parameters a campaign gives all its runs alike (the axes are lists on a campaign,
    one value on a run: their fields are the models' own)."""

    files = models.PositiveIntegerField(default=1)
    depth = models.PositiveIntegerField(default=64)
    vector_size = models.PositiveIntegerField(default=256)
    skip = models.PositiveIntegerField(default=3)
    readahead = models.PositiveBigIntegerField(default=0, help_text="bytes; 0 = unbuffered")
    streams = models.PositiveIntegerField(default=1)
    file_size = models.PositiveBigIntegerField(
        default=16 * 1024 * 1024, help_text="bytes each client writes per file (write)"
    )
    ops_per_client = models.PositiveIntegerField(
        default=1000, help_text="metadata operations per client (stat, open, list)"
    )
    rate = models.FloatField(
        default=0.0, help_text="target metadata operations per second per client; 0: flat out"
    )
    replay_timing = models.CharField(
        max_length=10,
        choices=[(t.value, t.value) for t in ReplayTiming],
        default=ReplayTiming.ASAP.value,
    )

    class Meta:
        abstract = True


@dataclass(frozen=True)
class MatrixRows:
    """What a campaign's matrix reads and measures from: its test files and vantage points
    (for a campaign not saved yet, those a form chose)."""

    test_files: list[TestFile]
    vantage_points: list[VantagePoint]


def matrix_files(*, endpoints: Iterable[Endpoint], chosen: Iterable[TestFile]) -> list[TestFile]:
    """The test files a campaign reads: the chosen ones, else each endpoint's default file;
    disabled endpoints' files are skipped (so they are in no preview and no launch)."""
    chosen = list(chosen)
    if chosen:
        return [f for f in chosen if f.endpoint.enabled]
    defaults = (endpoint.default_file for endpoint in endpoints if endpoint.enabled)
    return [f for f in defaults if f is not None]


def default_operations() -> list[str]:
    """A campaign's operations when nobody says (campaigns made before there were others)."""
    return [Operation.READ.value]


# How many launches ahead pages and the API show (Campaign.schedule_next_launches).
NEXT_LAUNCHES = 5


class Campaign(RunParameters):
    """An experiment: endpoints x vantage points x parameter sets, expanded into runs."""

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    endpoints = models.ManyToManyField(Endpoint, related_name="campaigns")
    test_files = models.ManyToManyField(TestFile, blank=True, related_name="campaigns")
    vantage_points = models.ManyToManyField(VantagePoint, related_name="campaigns")
    # Where its third-party copies land (tpc-pull, tpc-push): this endpoint's scratch path.
    # Deleting the endpoint leaves the campaign without one: its launch then says so.
    destination_endpoint = models.ForeignKey(
        Endpoint,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="destination_of",
        help_text="third-party copies (tpc-pull, tpc-push) land under its scratch path",
    )
    operations = models.JSONField(default=default_operations)
    # One value for all its runs, but "each" is two runs per cell: one pinned to IPv4, one
    # to IPv6 (family_runs); whether the name has both is found by each run, not here.
    address_family = models.CharField(
        max_length=4,
        choices=[(a.value, a.value) for a in AddressFamily],
        default=AddressFamily.ANY.value,
        help_text="any (the client's choice), 4 (IPv4 only), 6 (IPv6 only), or each: one run "
        "pinned to IPv4 and one to IPv6 in every cell",
    )
    methods = models.JSONField(default=list)
    patterns = models.JSONField(default=list)
    read_sizes = models.JSONField(default=list, help_text="bytes")
    fractions = models.JSONField(default=list)
    clients = models.JSONField(default=list)
    repetitions = models.PositiveIntegerField(default=1)
    deadline_s = models.PositiveIntegerField(null=True, blank=True)
    # The recorded job its replay runs replay (operation replay needs one; traces.py).
    trace = models.ForeignKey(
        Trace,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="campaigns",
        help_text="the recorded job replay runs replay, at the same paths on each endpoint "
        "(which must hold those files)",
    )
    schedule = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_cron],
        help_text="cron (minute hour day-of-month month day-of-week) in schedule_tz, "
        "e.g. 0 2 * * *",
    )
    schedule_tz = models.CharField(
        max_length=64,
        default=DEFAULT_ZONE,
        validators=[validate_time_zone],
        help_text="IANA time zone the schedule's cron is read in, e.g. Europe/Zurich",
    )
    schedule_slip_s = models.PositiveIntegerField(
        default=0,
        help_text="each slot launches 0..this many seconds late (the same delay for a slot "
        "on every pass); at most the schedule's shortest interval",
    )
    # A paused schedule keeps its cron and launches nothing; resuming starts from the next
    # slot: the slots that passed while it was paused are not launched (schedules.py).
    schedule_paused_at = models.DateTimeField(null=True, blank=True)
    schedule_resumed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def schedule_paused(self) -> bool:
        return self.schedule_paused_at is not None

    def schedule_next_launches(self, now: datetime, count: int = NEXT_LAUNCHES) -> list[datetime]:
        """Its schedule's next `count` launch times (UTC, slip applied); none while paused or
        unscheduled. A campaign not saved yet has no slip: its slots are shown."""
        if not self.schedule or self.schedule_paused:
            return []
        try:
            cron, zone = parse_cron(self.schedule), time_zone(self.schedule_tz)
        except CronError:  # stored before schedules were validated
            return []
        since = max(filter(None, (self.created_at, self.schedule_resumed_at)), default=now)
        return launches_after(
            cron,
            now=now,
            zone=zone,
            campaign_id=self.pk or 0,
            slip_s=self.schedule_slip_s if self.pk else 0,
            not_before=since,
            count=count,
        )

    def schedule_next_slot(self, now: datetime) -> datetime | None:
        """Its schedule's next launch time after `now` (UTC, slip applied); None while paused
        or unscheduled."""
        return next(iter(self.schedule_next_launches(now, count=1)), None)

    def schedule_launch_at(self, slot: datetime) -> datetime:
        """When it launches `slot`: the slot plus its slip for that slot."""
        return slot + slot_slip(campaign_id=self.pk, slot=slot, slip_s=self.schedule_slip_s)

    @property
    def schedule_words(self) -> str:
        """The schedule in English ("every day at 02:00 Europe/Zurich"), else its cron; ""
        for none."""
        return cron_words(self.schedule, zone=self.schedule_tz) if self.schedule else ""

    def runs_cancellable_by(self, user: User | None) -> models.QuerySet[Run]:
        """The runs of it that `user` may cancel: all of them for its owner or an admin,
        those they launched for another operator, none for anyone else."""
        if can_edit(user, self):
            return self.runs.all()
        if can_operate(user) and user is not None:
            return self.runs.filter(launched_by_id=user.pk)
        return self.runs.none()

    def cancellable_by(self, user: User | None) -> bool:
        """Whether `user` may cancel it (its runs_cancellable_by), even with none active."""
        return can_edit(user, self) or self.runs_cancellable_by(user).exists()

    def files_to_read(self) -> list[TestFile]:
        return matrix_files(
            endpoints=self.endpoints.all(), chosen=self.test_files.select_related("endpoint")
        )

    def matrix_rows(self) -> MatrixRows:
        return MatrixRows(self.files_to_read(), list(self.vantage_points.all()))

    def parameter_axes(self) -> tuple[list[Any], ...]:
        """The axes after test files and vantage points: the parameter lists, the expanded
        parameters' values (EXPANDED), repetitions."""
        return (
            *(getattr(self, p.campaign_field) for p in AXES),
            *(_expanded(p, getattr(self, p.campaign_field)) for p in EXPANDED),
            list(range(self.repetitions)),
        )

    def _dimensions(self, rows: MatrixRows | None) -> tuple[list[Any], ...]:
        """The axes of the matrix: test files, vantage points, then the parameter lists."""
        rows = rows or self.matrix_rows()
        return (rows.test_files, rows.vantage_points, *self.parameter_axes())

    def cells(self, rows: MatrixRows | None = None) -> Iterator[Cell]:
        """The parameter product, in a stable order; of `rows` rather than the saved ones
        if given (a campaign not saved yet has no relations)."""
        shared = {p.name: getattr(self, p.campaign_field) for p in SHARED}
        for test_file, vantage_point, *values, repetition in itertools.product(
            *self._dimensions(rows)
        ):
            axes = {p.name: value for p, value in zip((*AXES, *EXPANDED), values, strict=True)}
            yield Cell(test_file.endpoint, test_file, vantage_point, shared | axes, repetition)

    def matrix_size(self, rows: MatrixRows | None = None) -> int:
        return math.prod(len(axis) for axis in self._dimensions(rows))


def _expanded(parameter: RunParameter, value: Any) -> list[Any]:
    assert parameter.expand is not None
    return parameter.expand(value)


class ScheduledLaunch(models.Model):
    """One slot of a campaign's schedule, claimed once: the runs it launched, or why none."""

    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="scheduled_launches"
    )
    slot = models.DateTimeField(help_text="the time the schedule named (UTC)")
    launched_at = models.DateTimeField(default=timezone.now)
    run_count = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, help_text="why the slot launched nothing")

    class Meta:
        ordering = ["-slot", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "slot"], name="scheduled_launch_unique")
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id} at {self.slot:%Y-%m-%d %H:%M}"


def new_tag_suffix() -> str:
    """A run's own part of its files' names (Run.run_tag)."""
    return secrets.token_hex(4)


class Run(RunParameters):
    """One cell of a campaign's matrix, executed once from one vantage point."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        PARTIAL = "partial"
        FAILED = "failed"
        CANCELLED = "cancelled"
        TIMEOUT = "timeout"

        # The groups pages, the API and the services ask about, in this order (set below:
        # an enum's members do not exist yet in its class body).
        ACTIVE: ClassVar[tuple[Run.Status, ...]]  # waiting or measuring
        FINAL: ClassVar[tuple[Run.Status, ...]]  # ended, one way or another
        MEASURED: ClassVar[tuple[Run.Status, ...]]  # their figures count in series
        ENDED: ClassVar[tuple[Run.Status, ...]]  # final and not cancelled: it tried
        NOT_SUCCEEDED: ClassVar[tuple[Run.Status, ...]]  # final with errors
        UNMEASURED: ClassVar[tuple[Run.Status, ...]]  # final without figures
        WITH_FAILURES: ClassVar[tuple[Run.Status, ...]]  # some or all clients failed
        FAILED_OR_TIMED_OUT: ClassVar[tuple[Run.Status, ...]]  # nothing measured, not cancelled

    class Trigger(models.TextChoices):
        MANUAL = "manual"
        API = "api"
        SCHEDULE = "schedule"

    FINAL: ClassVar[tuple[Run.Status, ...]]  # Run.Status.FINAL, by its older name

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="runs")
    endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="runs")
    test_file = models.ForeignKey(TestFile, on_delete=models.PROTECT, related_name="runs")
    vantage_point = models.ForeignKey(VantagePoint, on_delete=models.PROTECT, related_name="runs")
    # A copy's destination (the campaign's destination endpoint when it launched).
    destination_endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="copies_to"
    )
    # A replay's recorded job: its campaign's trace when it launched, so a queued or retried
    # run replays what it was launched with, whatever the campaign names since; a trace runs
    # replayed is not deleted (trace_delete says so).
    trace = models.ForeignKey(
        Trace, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    operation = models.CharField(
        max_length=10,
        choices=[(o.value, o.value) for o in Operation],
        default=Operation.READ.value,
        db_default=Operation.READ.value,
    )
    # Makes the names of what a write or a copy leaves its own (run_tag): run ids repeat
    # across deployments writing to one storage, and after a database is made again.
    # db_default: rows written in bulk without it (synthetic history) are tagged by id alone.
    tag_suffix = models.CharField(max_length=16, blank=True, default=new_tag_suffix, db_default="")
    # What it was held to: a campaign's "each" launched it pinned to 4 or to 6.
    address_family = models.CharField(
        max_length=4,
        choices=[(a.value, a.value) for a in AddressFamily if a != AddressFamily.EACH],
        default=AddressFamily.ANY.value,
        help_text="any (the client's choice), 4 (IPv4 only) or 6 (IPv6 only)",
    )
    method = models.CharField(max_length=10, choices=[(m.value, m.value) for m in Method])
    pattern = models.CharField(max_length=12, choices=[(p.value, p.value) for p in Pattern])
    read_size = models.PositiveBigIntegerField(help_text="bytes")
    fraction = models.FloatField()
    clients = models.PositiveIntegerField()
    deadline_s = models.FloatField(null=True, blank=True)
    repetition = models.PositiveIntegerField(default=0)

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    scheduled_launch = models.ForeignKey(
        ScheduledLaunch, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    # Who launched it (a page's or the API's launch; none for the schedule's): they may
    # cancel it, as may the campaign's owner and admins.
    launched_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="launched_runs",
    )
    cancel_requested = models.BooleanField(default=False)
    # A queued run whose message was lost is sent again (runs_resend_stale).
    resent_at = models.DateTimeField(null=True, blank=True)
    resent_count = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # Aggregates of the run JSON (docs/engine.md), as columns so series are computed in SQL.
    wall_s = models.FloatField(null=True, blank=True)
    open_s = models.FloatField(null=True, blank=True)
    ttfb_s = models.FloatField(null=True, blank=True)
    throughput_mbps = models.FloatField(null=True, blank=True)
    ops = models.BigIntegerField(null=True, blank=True)
    latency_p50_us = models.FloatField(null=True, blank=True)
    latency_p90_us = models.FloatField(null=True, blank=True)
    latency_p99_us = models.FloatField(null=True, blank=True)
    latency_max_us = models.FloatField(null=True, blank=True)
    bytes_requested = models.BigIntegerField(null=True, blank=True)
    bytes_read = models.BigIntegerField(null=True, blank=True)
    bytes_wire = models.BigIntegerField(null=True, blank=True)
    cpu_s = models.FloatField(null=True, blank=True)
    served_by = models.JSONField(default=list, blank=True)
    # What the run negotiated (the run JSON's auth, tls and server_version), for every run
    # that got as far as its preflight, and the client it used (client_version): "got
    # slower after the upgrade" is a filter away.
    # db_default: rows written in bulk without them (synthetic history) are valid too.
    auth = models.CharField(
        max_length=8,
        blank=True,
        default="",
        db_default="",
        choices=[(a.value, a.value) for a in AuthMethod],
    )
    tls = models.JSONField(null=True, blank=True, help_text='{"version", "cipher"}, or null')
    server_version = models.CharField(max_length=200, blank=True, default="", db_default="")
    client_version = models.CharField(
        max_length=200,
        blank=True,
        default="",
        db_default="",
        help_text="the client library or tool the run's clients used, and its version",
    )
    errors = models.JSONField(default=list, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="the run JSON without clients")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The run list's order (pages and API), so a page is read from the index.
            models.Index(fields=["-created_at", "-id"], name="run_newest_idx"),
            models.Index(fields=["endpoint", "created_at"]),
            models.Index(fields=["campaign", "created_at"]),
            models.Index(fields=["status", "created_at"]),
            # The run list sorted by wall time or throughput (?ordering=), read from the index
            # both ways: a year of runs is not sorted to show 50 of them.
            models.Index(fields=["wall_s", "id"], name="run_wall_idx"),
            models.Index(fields=["throughput_mbps", "id"], name="run_throughput_idx"),
            models.Index(fields=["vantage_point", "endpoint", "created_at"]),
            # Whether a vantage point's workers took anything lately (runs_resend_stale).
            models.Index(fields=["vantage_point", "started_at"], name="run_vantage_started_idx"),
            # The runs that ended since the watch's last pass (its watermark): a probe, not a
            # scan of a year of runs, on the hourly pass that finds nothing new.
            models.Index(fields=["finished_at"], name="run_finished_idx"),
            # Compare over time (webapp/dashboards/compare.py): endpoints x one parameter set
            # over a range of days, read from the index alone (the metrics are included).
            models.Index(
                fields=[
                    "endpoint",
                    "operation",
                    "method",
                    "pattern",
                    "read_size",
                    "fraction",
                    "clients",
                    "address_family",
                    "status",
                    "created_at",
                ],
                include=["vantage_point", *METRICS],
                name="run_compare_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.method}/{self.pattern} on {self.endpoint_id}"

    @classmethod
    def from_cell(cls, cell: Cell, *, campaign: Campaign, **fields: Any) -> Run:
        """The (unsaved) run of a campaign's cell; `fields` as trigger, launched_by."""
        return cls(
            campaign=campaign,
            endpoint=cell.endpoint,
            test_file=cell.test_file,
            vantage_point=cell.vantage_point,
            repetition=cell.repetition,
            destination_endpoint=(
                campaign.destination_endpoint
                if cell.parameters.get("operation") in COPY_OPERATIONS
                else None
            ),
            trace=campaign.trace if cell.parameters.get("operation") == Operation.REPLAY else None,
            **cell.parameters,
            **fields,
        )

    def parameters(self) -> dict[str, Any]:
        """Its values of RUN_PARAMETERS, by name."""
        return {p.name: getattr(self, p.name) for p in RUN_PARAMETERS}

    def files_to_read(self) -> list[TestFile]:
        """The files its clients read: its test file first, then the endpoint's others."""
        if self.files <= 1:
            return [self.test_file]
        others = self.endpoint.files.exclude(pk=self.test_file_id).order_by("path")
        return file_collection(self.test_file, list(others[: self.files - 1]), self.files)

    @property
    def run_tag(self) -> str:
        """What names the files a write or a copy makes (fedprobe-<run_tag>-c<N>-f<K>): the
        run's id, and its random suffix (none for runs from before there was one)."""
        return f"{self.pk}-{self.tag_suffix}" if self.tag_suffix else str(self.pk)

    def measured_params(self, files: Sequence[TestFile] | None = None) -> RunParams:
        """What the engine measures for it, reading `files` (else files_to_read), without
        what this host adds (credential, egress policy, CA folder: engine_params).

        A write's URLs are its endpoint's scratch directory, a listing's the test files'
        directories; a copy reads the test files into the destination endpoint's scratch
        directory. run_tag names the files a write or a copy makes."""
        files = self.files_to_read() if files is None else files
        urls = run_urls(self.operation, self.endpoint, files)
        destination = None
        if self.operation in COPY_OPERATIONS and self.destination_endpoint is not None:
            destination = self.destination_endpoint.scratch_url()
        reads_files = self.operation not in WRITE_OPERATIONS | {Operation.LIST.value}
        if self.operation == Operation.REPLAY:
            urls, reads_files = replay_urls(self.trace, self.endpoint), False
        return RunParams(
            urls=urls,
            seed=self.pk or RunParams.seed,
            adler32=tuple((f.url, f.adler32) for f in files if f.adler32) if reads_files else (),
            destination=destination,
            run_tag=self.run_tag if self.pk else None,
            **engine_parameters(self.parameters()),
        )

    def engine_params(self) -> RunParams:
        """The engine's parameters for it, with the endpoint's credential (an oauth client's:
        a token from this process's cache) and the CA folder servers are verified against.

        Raises InvalidParams for a stored credential that does not parse, and ProbeError when
        an oauth client's issuer gives no token.
        """
        params = self.endpoint.engine_params(self.measured_params())
        if self.operation in COPY_OPERATIONS and self.destination_endpoint is not None:
            # A copy presents each side its own endpoint's credential (the source's as the
            # run's, the destination's as destination_credential), each scoped to its side.
            destination = self.destination_endpoint.engine_params(params)
            params = dataclasses.replace(
                params,
                destination_credential=destination.credential,
                credential_s=params.credential_s + destination.credential_s,
            )
        return params

    @property
    def is_final(self) -> bool:
        return self.status in Run.Status.FINAL

    @property
    def is_tester_fault(self) -> bool:
        """It ended by a fault of the tester's, not the endpoint's (as q_tester_fault)."""
        return errors_are_tester_fault(self.errors)

    def cancellable_by(self, user: User | None) -> bool:
        """Its campaign's owner, whoever launched it, or an admin (use with
        select_related("campaign"))."""
        if can_edit(user, self.campaign):
            return True
        launcher = self.launched_by_id
        return can_operate(user) and launcher is not None and launcher == getattr(user, "pk", None)


def replay_urls(trace: Trace | None, endpoint: Endpoint) -> tuple[str, ...]:
    """A replay's URLs: the trace's recorded files at the same paths on the endpoint, in the
    order the job first opened them (the endpoint must hold them; the engine's preflight
    refuses a missing or shorter one); none without a trace (a draft's preview: the
    campaign's checks refuse a replay without one, campaign_trace_errors)."""
    return () if trace is None else trace.urls_at(endpoint.base_url)


def run_urls(operation: str, endpoint: Endpoint, files: Sequence[TestFile]) -> tuple[str, ...]:
    """The URLs a run of `operation` gives the engine: the test files (read, copies' sources,
    stat, open); their directories, once each (list); the endpoint's scratch directory
    (write; none without a scratch path: the campaign's checks refuse that first)."""
    if operation in WRITE_OPERATIONS:
        scratch = endpoint.scratch_url()
        return (scratch,) if scratch else ()
    if operation == Operation.LIST:
        folders = (f.path.rstrip("/").rpartition("/")[0] + "/" for f in files)
        return tuple(endpoint.file_url(folder) for folder in dict.fromkeys(folders))
    return tuple(f.url for f in files)


# The first error's classes that are the tester's own (docs/watch.md "Tester faults").
TESTER_FAULT_CLASS_NAMES = tuple(sorted(str(c) for c in TESTER_FAULT_CLASSES))


def errors_are_tester_fault(errors: object) -> bool:
    """A run's `errors` (its JSON list) say it ended by a fault of the tester's: its first
    error is of a tester fault class, or a credential problem found before any request."""
    first = errors[0] if isinstance(errors, list) and errors else None
    if not isinstance(first, dict):
        return False
    return first.get("class") in TESTER_FAULT_CLASS_NAMES or first.get("phase") == CREDENTIAL_PHASE


def q_tester_fault(prefix: str = "") -> Q:
    """Runs that ended by a fault of the tester's (`prefix` "run__" from a related model):
    their first error is of a tester fault class (harness, egress, lost) or a credential
    problem found before any request (phase credential). Never counted against an endpoint."""
    first = f"{prefix}errors__0__"
    return Q(**{f"{first}class__in": TESTER_FAULT_CLASS_NAMES}) | Q(
        **{f"{first}phase": CREDENTIAL_PHASE}
    )


def q_never_taken() -> Q:
    """Runs no worker took: failed by the resend pass after its last send (never started,
    first error of class harness; docs/workers.md "Lost messages")."""
    return Q(status=Run.Status.FAILED, started_at__isnull=True, errors__0__class=ErrorClass.HARNESS)


def q_lost() -> Q:
    """Runs whose worker stopped reporting while they ran: ended by the reaper (class lost)."""
    return Q(status__in=Run.Status.WITH_FAILURES, errors__0__class=ErrorClass.LOST)


def q_not_tester_fault(prefix: str = "") -> Q:
    """The runs `q_tester_fault` leaves out: those with no error, or the endpoint's own."""
    first = f"{prefix}errors__0__"
    no_class = Q(**{f"{first}class__isnull": True})
    site_class = no_class | ~Q(**{f"{first}class__in": TESTER_FAULT_CLASS_NAMES})
    no_phase = Q(**{f"{first}phase__isnull": True})
    return site_class & (no_phase | ~Q(**{f"{first}phase": CREDENTIAL_PHASE}))


def sql_tester_fault(errors_column: str) -> str:
    """`q_tester_fault` as an SQL condition on a run's errors column (raw-SQL selectors)."""
    classes = ", ".join(f"'{name}'" for name in TESTER_FAULT_CLASS_NAMES)
    first_class = sql.json_first(errors_column, "class")
    first_phase = sql.json_first(errors_column, "phase")
    return (
        f"(COALESCE({first_class}, '') IN ({classes})"
        f" OR COALESCE({first_phase}, '') = '{CREDENTIAL_PHASE}')"
    )


def _status_groups() -> None:
    status = Run.Status
    status.ACTIVE = (status.QUEUED, status.RUNNING)
    status.FINAL = tuple(s for s in status if s not in status.ACTIVE)
    status.MEASURED = (status.SUCCEEDED, status.PARTIAL)
    status.ENDED = tuple(s for s in status.FINAL if s != status.CANCELLED)
    status.NOT_SUCCEEDED = tuple(s for s in status.FINAL if s != status.SUCCEEDED)
    status.UNMEASURED = tuple(s for s in status.FINAL if s not in status.MEASURED)
    status.WITH_FAILURES = (status.PARTIAL, status.FAILED, status.TIMEOUT)
    status.FAILED_OR_TIMED_OUT = (status.FAILED, status.TIMEOUT)
    Run.FINAL = status.FINAL


_status_groups()


class ClientAttempt(models.Model):
    """One client of a run: its heartbeat while it runs, then what it measured."""

    class Status(models.TextChoices):
        RUNNING = "running"
        OK = "ok"
        FAILED = "failed"
        LOST = "lost"
        CANCELLED = "cancelled"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    client = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    heartbeat_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    error_class = models.CharField(max_length=20, blank=True)
    error_message = models.TextField(blank=True)
    bytes_read = models.BigIntegerField(default=0)
    record = models.JSONField(null=True, blank=True, help_text="the client's run JSON record")

    class Meta:
        ordering = ["run", "client"]
        constraints = [
            models.UniqueConstraint(fields=["run", "client"], name="attempt_unique_client")
        ]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"client {self.client} of run {self.run_id}"

    def error_json(self) -> dict[str, str] | None:
        """Why the client failed, as {"class", "message"}; None when nothing was recorded."""
        if not (self.error_class or self.error_message):
            return None
        return {"class": self.error_class, "message": self.error_message}


class RunCleanup(models.Model):
    """Deleting what a lost write or copy run left on the storage (its clients died with
    their worker before they could delete it), by a worker of the run's vantage point: a
    local one through the queue, a remote one's agent when it asks for its cleanups
    (docs/workers.md#when-a-worker-dies). It holds no credential: the endpoint's is looked up
    (for an agent, sealed to its key) each time the cleanup is handed out."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        GAVE_UP = "gave-up"

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="cleanup")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    # Times it was handed out to a worker or an agent (FEDPROBE_CLEANUP_MAX_ATTEMPTS at most).
    attempts = models.PositiveSmallIntegerField(default=0)
    # Not handed out before this: a worker holds it, or a failed attempt waits its back-off.
    due_at = models.DateTimeField()
    deleted = models.PositiveIntegerField(null=True, blank=True, help_text="files deleted")
    error = models.TextField(blank=True, help_text="why the last attempt failed")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "due_at"], name="cleanup_due_idx")]

    def __str__(self) -> str:
        return f"cleanup of run {self.run_id} ({self.status})"

    def to_json(self) -> dict[str, object]:
        """What the run's page and the API show of it."""
        return {
            "status": self.status,
            "attempts": self.attempts,
            "deleted": self.deleted,
            "error": self.error or None,
            "finished_at": self.finished_at,
        }
