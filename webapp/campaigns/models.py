"""Experiments (campaigns), their runs, and each run's client attempts."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from webapp.accounts.roles import User, can_edit, can_operate
from webapp.campaigns.cron import CronError, parse_cron, validate_cron
from webapp.campaigns.cron_words import cron_words
from webapp.sites.models import Endpoint, TestFile, VantagePoint
from workers.engine.credentials import AuthMethod
from workers.engine.params import Method, Pattern

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
class Cell:
    """One point of a campaign's parameter space, before it becomes a run."""

    endpoint: Endpoint
    test_file: TestFile
    vantage_point: VantagePoint
    method: str
    pattern: str
    read_size: int
    fraction: float
    clients: int
    repetition: int


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


class Campaign(models.Model):
    """An experiment: endpoints x vantage points x parameter sets, expanded into runs."""

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    endpoints = models.ManyToManyField(Endpoint, related_name="campaigns")
    test_files = models.ManyToManyField(TestFile, blank=True, related_name="campaigns")
    vantage_points = models.ManyToManyField(VantagePoint, related_name="campaigns")
    methods = models.JSONField(default=list)
    patterns = models.JSONField(default=list)
    read_sizes = models.JSONField(default=list, help_text="bytes")
    fractions = models.JSONField(default=list)
    clients = models.JSONField(default=list)
    files = models.PositiveIntegerField(default=1)
    depth = models.PositiveIntegerField(default=64)
    vector_size = models.PositiveIntegerField(default=256)
    skip = models.PositiveIntegerField(default=3)
    readahead = models.PositiveBigIntegerField(default=0, help_text="bytes; 0 = unbuffered")
    streams = models.PositiveIntegerField(default=1)
    repetitions = models.PositiveIntegerField(default=1)
    deadline_s = models.PositiveIntegerField(null=True, blank=True)
    schedule = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_cron],
        help_text="cron in UTC (minute hour day-of-month month day-of-week), e.g. 0 2 * * *",
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

    def schedule_next_slot(self, now: datetime) -> datetime | None:
        """The first slot of its schedule after `now`; None while paused or unscheduled."""
        if not self.schedule or self.schedule_paused:
            return None
        try:
            return parse_cron(self.schedule).next_after(now)
        except CronError:  # stored before schedules were validated
            return None

    @property
    def schedule_words(self) -> str:
        """The schedule in English ("every day at 02:00 UTC"), else its cron; "" for none."""
        return cron_words(self.schedule) if self.schedule else ""

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
        """The axes after test files and vantage points: the parameter lists, repetitions."""
        return (
            self.methods,
            self.patterns,
            self.read_sizes,
            self.fractions,
            self.clients,
            list(range(self.repetitions)),
        )

    def _dimensions(self, rows: MatrixRows | None) -> tuple[list[Any], ...]:
        """The axes of the matrix: test files, vantage points, then the parameter lists."""
        rows = rows or self.matrix_rows()
        return (rows.test_files, rows.vantage_points, *self.parameter_axes())

    def cells(self, rows: MatrixRows | None = None) -> Iterator[Cell]:
        """The parameter product, in a stable order; of `rows` rather than the saved ones
        if given (a campaign not saved yet has no relations)."""
        for test_file, *values in itertools.product(*self._dimensions(rows)):
            yield Cell(test_file.endpoint, test_file, *values)

    def matrix_size(self, rows: MatrixRows | None = None) -> int:
        return math.prod(len(axis) for axis in self._dimensions(rows))


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


class Run(models.Model):
    """One cell of a campaign's matrix, executed once from one vantage point."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        PARTIAL = "partial"
        FAILED = "failed"
        CANCELLED = "cancelled"
        TIMEOUT = "timeout"

    class Trigger(models.TextChoices):
        MANUAL = "manual"
        API = "api"
        SCHEDULE = "schedule"

    FINAL = frozenset(
        {Status.SUCCEEDED, Status.PARTIAL, Status.FAILED, Status.CANCELLED, Status.TIMEOUT}
    )

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="runs")
    endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="runs")
    test_file = models.ForeignKey(TestFile, on_delete=models.PROTECT, related_name="runs")
    vantage_point = models.ForeignKey(VantagePoint, on_delete=models.PROTECT, related_name="runs")
    method = models.CharField(max_length=10, choices=[(m.value, m.value) for m in Method])
    pattern = models.CharField(max_length=12, choices=[(p.value, p.value) for p in Pattern])
    read_size = models.PositiveBigIntegerField(help_text="bytes")
    fraction = models.FloatField()
    clients = models.PositiveIntegerField()
    files = models.PositiveIntegerField(default=1)
    depth = models.PositiveIntegerField(default=64)
    vector_size = models.PositiveIntegerField(default=256)
    skip = models.PositiveIntegerField(default=3)
    readahead = models.PositiveBigIntegerField(default=0)
    streams = models.PositiveIntegerField(default=1)
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
    # that got as far as its preflight: "got slower after the upgrade" is a filter away.
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
            # Compare over time (webapp/dashboards/compare.py): endpoints x one parameter set
            # over a range of days, read from the index alone (the metrics are included).
            models.Index(
                fields=[
                    "endpoint",
                    "method",
                    "pattern",
                    "read_size",
                    "fraction",
                    "clients",
                    "status",
                    "created_at",
                ],
                include=[
                    "vantage_point",
                    "throughput_mbps",
                    "wall_s",
                    "open_s",
                    "ttfb_s",
                    "latency_p50_us",
                    "latency_p90_us",
                    "latency_p99_us",
                    "cpu_s",
                    "bytes_wire",
                ],
                name="run_compare_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.method}/{self.pattern} on {self.endpoint_id}"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    def cancellable_by(self, user: User | None) -> bool:
        """Its campaign's owner, whoever launched it, or an admin (use with
        select_related("campaign"))."""
        if can_edit(user, self.campaign):
            return True
        launcher = self.launched_by_id
        return can_operate(user) and launcher is not None and launcher == getattr(user, "pk", None)


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
