"""What the watch keeps: each series' nights rolled up, and the regressions it found in them.

A series is what one endpoint gives one vantage point for one parameter set, in one metric
(or its availability, or one error class). The watch reads nights (`SeriesNight`), never raw
runs, once they are rolled up; a `Regression` is one episode of something wrong with a
series, or with a group of series blamed on one thing (a vantage point, a protocol, a
credential, a site), from the night it was first seen until it is resolved. Every change of
a regression's state is a `RegressionEvent`, written in the transaction that changes the
state: the events are the outbox that notifications are sent from.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.sites.models import Endpoint, Site, VantagePoint

# What names a series: an endpoint, a vantage point and a parameter set (rollups.SERIES_FIELDS
# are the same as columns).
SERIES_KEY = (
    "endpoint",
    "vantage_point",
    "operation",
    "method",
    "pattern",
    "read_size",
    "fraction",
    "clients",
    "address_family",
)


class SeriesKey(models.Model):
    """The columns that name a series (SERIES_KEY), shared by the watch's tables of series."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="+")
    vantage_point = models.ForeignKey(VantagePoint, on_delete=models.CASCADE, related_name="+")
    # db_default: rows rolled up before there were other operations were reads.
    operation = models.CharField(max_length=10, default="read", db_default="read")
    method = models.CharField(max_length=10)
    pattern = models.CharField(max_length=12)
    read_size = models.PositiveBigIntegerField()
    fraction = models.FloatField()
    clients = models.PositiveIntegerField()
    # db_default: rows rolled up before runs were pinned were of any family.
    address_family = models.CharField(max_length=4, default="any", db_default="any")

    class Meta:
        abstract = True


class SeriesNight(SeriesKey):
    """One night of one series' parameter set: its runs counted by outcome and each metric's
    distribution over them (median and spread), as the watch and the pages read it."""

    night = models.DateField(help_text="the UTC date the runs were created on")
    runs = models.PositiveIntegerField(default=0, help_text="ended runs, cancelled ones left out")
    succeeded = models.PositiveIntegerField(default=0)
    partial = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0, help_text="failed or timed out: the site's")
    tester_faults = models.PositiveIntegerField(
        default=0, help_text="ended by the tester's own fault: never counted against the site"
    )
    errors = models.JSONField(
        default=dict, blank=True, help_text="{error class: runs}, the site's failures only"
    )
    metrics = models.JSONField(
        default=dict,
        blank=True,
        help_text='{metric: {"median", "q1", "q3", "mad", "n"}} over the measured runs',
    )
    server_versions = models.JSONField(default=list, blank=True)
    # db_default: a rollup written by a worker older than the column is valid too.
    client_versions = models.JSONField(
        default=list,
        db_default=[],
        blank=True,
        help_text="the client libraries or tools the runs used",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[*SERIES_KEY, "night"],
                name="series_night_unique",
            )
        ]
        indexes = [models.Index(fields=["night"], name="series_night_night_idx")]

    def __str__(self) -> str:
        return f"{self.endpoint_id}/{self.vantage_point_id} {self.method} {self.night}"


class Regression(models.Model):
    """One episode of something wrong with a series (or a group of series blamed on one
    thing), from the night it was first seen until it is resolved."""

    class State(models.TextChoices):
        PENDING = "pending"  # seen, not yet confirmed
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        RECOVERING = "recovering"  # good nights again, not yet enough of them
        RESOLVED = "resolved"
        NO_DATA = "no-data"  # the series stopped being measured: never open, never resolved
        TESTER_FAULT = "tester-fault"  # ours, not the site's

    # States in which a regression is still live: at most one per key.
    LIVE = (
        State.PENDING,
        State.OPEN,
        State.ACKNOWLEDGED,
        State.RECOVERING,
        State.NO_DATA,
        State.TESTER_FAULT,
    )

    class Verdict(models.TextChoices):
        REGRESSION = "regression"
        SUSPICIOUS = "suspicious"
        NO_CHANGE = "no-change"
        INSUFFICIENT_DATA = "insufficient-data"

    class Severity(models.TextChoices):
        CRITICAL = "critical"  # broken: it fails
        WARNING = "warning"  # slower, or failing some of the time
        INFO = "info"

    class Tier(models.TextChoices):
        BREAKAGE = "breakage"  # the same night: failures, or far outside the recent band
        SHIFT = "shift"  # a persistent change of level (change-point detection)

    class Blame(models.TextChoices):
        SITE = "site"
        VANTAGE_POINT = "vantage-point"
        PROTOCOL = "protocol"
        CREDENTIAL = "credential"

    key = models.CharField(
        max_length=300,
        help_text="what the regression is about (its series, or the blamed thing and metric)",
    )
    tier = models.CharField(max_length=10, choices=Tier.choices)
    metric = models.CharField(
        max_length=40, help_text='a run metric, "availability", or "error:<class>"'
    )
    state = models.CharField(max_length=14, choices=State.choices, default=State.PENDING)
    verdict = models.CharField(max_length=18, choices=Verdict.choices)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    summary = models.TextField(help_text="why, in words an operator can act on")

    # What it is about: a series (endpoint, vantage point, parameter set) or, blamed on one
    # thing, only that thing (a vantage point, a protocol, a site).
    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    vantage_point = models.ForeignKey(
        VantagePoint, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    protocol = models.CharField(max_length=10, blank=True)
    operation = models.CharField(max_length=10, blank=True, default="", db_default="")
    method = models.CharField(max_length=10, blank=True)
    pattern = models.CharField(max_length=12, blank=True)
    read_size = models.PositiveBigIntegerField(null=True, blank=True)
    fraction = models.FloatField(null=True, blank=True)
    clients = models.PositiveIntegerField(null=True, blank=True)
    address_family = models.CharField(max_length=4, blank=True, default="", db_default="")
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="members",
        help_text="the regression of the thing this series' trouble was blamed on",
    )

    detector = models.JSONField(
        default=dict,
        help_text=(
            '{"name", "parameters", "baseline_window": [from, to], "target_window": [from, to]}'
        ),
    )
    blame = models.JSONField(default=dict, help_text='{"target", "rule", ...}')
    versions = models.JSONField(
        default=list, blank=True, help_text="server/client version changes near the change"
    )
    change_night = models.DateField(null=True, blank=True)
    baseline = models.FloatField(null=True, blank=True)
    current = models.FloatField(null=True, blank=True)
    change_pct = models.FloatField(null=True, blank=True)
    good_nights = models.PositiveIntegerField(default=0, help_text="in a row, since it was bad")
    last_night = models.DateField(help_text="the latest night the watch evaluated it on")

    opened_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    ack_note = models.TextField(blank=True)
    silenced_until = models.DateTimeField(null=True, blank=True)
    silenced_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    silence_note = models.TextField(blank=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["key"],
                condition=models.Q(
                    state__in=[
                        "pending",
                        "open",
                        "acknowledged",
                        "recovering",
                        "no-data",
                        "tester-fault",
                    ]
                ),
                name="regression_one_live_per_key",
            )
        ]
        indexes = [
            models.Index(fields=["state", "severity"], name="regression_state_idx"),
            models.Index(fields=["endpoint", "vantage_point"], name="regression_series_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"


class RegressionEvent(models.Model):
    """One change of a regression's state, written with the change: the notifications'
    outbox (each event is told to each subscriber once)."""

    regression = models.ForeignKey(Regression, on_delete=models.CASCADE, related_name="events")
    state = models.CharField(max_length=14, choices=Regression.State.choices)
    previous_state = models.CharField(max_length=14, blank=True)
    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="who changed it by hand (acknowledged, silenced, resolved); none: the watch",
    )
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["at"], name="regression_event_at_idx")]

    def __str__(self) -> str:
        return f"{self.regression_id}: {self.previous_state or '-'} -> {self.state}"


class WatchPass(models.Model):
    """One pass of the watch: the nights it rolled up and evaluated, what it changed, and the
    watermark (the latest end of a run it saw) the next pass rolls up from."""

    now = models.DateTimeField(help_text="the time the pass evaluated as")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    nights = models.JSONField(default=list, blank=True, help_text="the nights rolled up")
    evaluated = models.JSONField(default=list, blank=True, help_text="the nights evaluated")
    series_nights = models.PositiveIntegerField(default=0, help_text="rollup rows written")
    series = models.PositiveIntegerField(default=0, help_text="series evaluated")
    changes = models.PositiveIntegerField(default=0, help_text="regression state changes")
    watermark = models.DateTimeField(
        null=True, blank=True, help_text="the latest finished_at of the runs rolled up so far"
    )
    backfill_before = models.DateField(
        null=True,
        blank=True,
        help_text="the nights before this one are still to be rolled up (none: all are)",
    )

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"watch pass at {self.now:%Y-%m-%d %H:%M}"


class SeriesLatest(SeriesKey):
    """One series' latest state as of the last watch pass: whether its latest night failed
    (and since when), and its latest measured night against the nights before it, kept by
    the pass from the rollups so that the alerts never read raw runs on a request."""

    site_night = models.DateField(
        null=True, blank=True, help_text="the latest night with runs of the site's (not ours)"
    )
    failing = models.BooleanField(
        default=False, help_text="every run of the site's on site_night failed or timed out"
    )
    failing_since = models.DateField(
        null=True, blank=True, help_text="the first night of the failing nights in a row"
    )
    failures = models.PositiveIntegerField(default=0, help_text="failed runs of those nights")
    last_good = models.DateField(
        null=True, blank=True, help_text="the latest night with a succeeded run"
    )
    failed_run = models.JSONField(
        null=True,
        blank=True,
        help_text='the latest failed run of site_night: {"id", "status", "created_at", '
        '"error_class", "error_message"}',
    )
    measured_night = models.DateField(
        null=True, blank=True, help_text="the latest night with measured runs"
    )
    measured_run = models.BigIntegerField(
        null=True, blank=True, help_text="the latest measured run of measured_night"
    )
    baseline_runs = models.PositiveIntegerField(
        default=0, help_text="measured runs of the nights before measured_night (the baseline)"
    )
    metrics = models.JSONField(
        default=dict,
        blank=True,
        help_text='{metric: {"latest", "baseline"}}: measured_night\'s median and the median '
        "of the medians of the nights before it",
    )
    worst_factor = models.FloatField(
        null=True,
        blank=True,
        help_text="how many times worse than its baseline its worst speed metric is (an index "
        "finds the few series beyond a threshold)",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=list(SERIES_KEY),
                name="series_latest_unique",
            )
        ]
        indexes = [
            models.Index(
                fields=["site_night"],
                condition=models.Q(failing=True),
                name="series_latest_failing_idx",
            ),
            models.Index(fields=["worst_factor"], name="series_latest_worst_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint_id}/{self.vantage_point_id} {self.method} as of {self.site_night}"


class SeriesTesterFault(SeriesKey):
    """The tester's own faults of one series on one night, by first error class and phase
    (a worker that died, the harness, the egress policy, a credential found bad before any
    request): kept by the watch's pass for the alerts' "Tester faults", never counted
    against the site."""

    night = models.DateField()
    error_class = models.CharField(max_length=40, blank=True)
    phase = models.CharField(max_length=40, blank=True)
    runs = models.PositiveIntegerField()
    latest_at = models.DateTimeField(help_text="when the latest of them was created")
    run = models.BigIntegerField(help_text="the latest of them")

    class Meta:
        indexes = [models.Index(fields=["night"], name="series_tester_fault_night_idx")]

    def __str__(self) -> str:
        return f"{self.endpoint_id}/{self.vantage_point_id} {self.error_class} {self.night}"
