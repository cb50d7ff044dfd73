"""The dashboards' API answers, for the OpenAPI schema (and the site summary's output)."""

from __future__ import annotations

from typing import Any

from django.db import models
from rest_framework import serializers

from webapp.campaigns.metrics import METRICS
from webapp.campaigns.models import Run
from webapp.dashboards.selectors.results import DIMENSIONS
from webapp.dashboards.selectors.site_summary import (
    DAYS,
    RECENT_FAILURES,
    TREND_DAYS,
    WEEKS,
)
from webapp.dashboards.selectors.thresholds import Thresholds, threshold_errors

# The statuses of a recent failure, in the published schema's order: nothing measured
# (failed, timed out) first, then partial.
FAILURE_STATUSES = [
    s.value
    for s in sorted(Run.Status.WITH_FAILURES, key=lambda status: status == Run.Status.PARTIAL)
]


class ParameterSetSerializer(serializers.Serializer[Any]):
    """A ParameterSet in API output (series, site summary)."""

    operation = serializers.CharField()
    method = serializers.CharField()
    pattern = serializers.CharField()
    read_size = serializers.IntegerField()
    fraction = serializers.FloatField()
    clients = serializers.IntegerField()
    address_family = serializers.CharField(help_text="any, 4 or 6: the family runs were held to")


class ResultsCampaign(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()


def parameter_field(name: str) -> serializers.Field[Any, Any, Any, Any]:
    """The API field of a run parameter, of its Run column's kind."""
    column = Run._meta.get_field(name)
    if isinstance(column, models.FloatField):
        return serializers.FloatField()
    if isinstance(column, models.IntegerField):
        return serializers.IntegerField()
    return serializers.CharField()


# The run parameters results groups by (selectors.results.DIMENSIONS), as RUN_PARAMETERS has them.
RESULTS_PARAMETERS = tuple(name for name in DIMENSIONS if name not in ("endpoint", "vantage_point"))


class ResultsDimensions(serializers.Serializer[Any]):
    """The values each parameter takes in the runs read."""

    endpoint = serializers.ListField(child=serializers.IntegerField())
    vantage_point = serializers.ListField(child=serializers.CharField())

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        for name in RESULTS_PARAMETERS:
            fields[name] = serializers.ListField(child=parameter_field(name))
        return fields


class ResultsEndpoint(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    site = serializers.CharField()
    protocol = serializers.CharField()
    role = serializers.CharField()
    credential_kind = serializers.CharField(
        help_text="how its door is passed: none, token, oauth-client, x509-proxy"
    )


class ResultsParameterSet(serializers.Serializer[Any]):
    """A parameter set's endpoint, vantage point and parameters (method and fraction: the
    cell's own, after it)."""

    endpoint = serializers.IntegerField()
    vantage_point = serializers.CharField()

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        own = super().get_fields()
        fields = {name: own.pop(name) for name in ("endpoint", "vantage_point")}
        for name in RESULTS_PARAMETERS:
            if name not in ("method", "fraction"):
                fields[name] = parameter_field(name)
        return fields | own


class ResultsCell(ResultsParameterSet):
    """Medians over the repetitions of one parameter set (succeeded and partial runs)."""

    method = serializers.CharField()
    fraction = serializers.FloatField()
    runs = serializers.IntegerField(help_text="measured runs")
    wall_s = serializers.FloatField(allow_null=True)
    open_s = serializers.FloatField(allow_null=True)
    ttfb_s = serializers.FloatField(allow_null=True)
    throughput_mbps = serializers.FloatField(
        allow_null=True,
        help_text="aggregate, MB/s: bytes read over the run's time; a write's, bytes written "
        "over its clients' create..commit span",
    )
    client_throughput_mbps = serializers.FloatField(allow_null=True, help_text="per client")
    bytes_requested = serializers.IntegerField(allow_null=True)
    bytes_read = serializers.IntegerField(allow_null=True)
    bytes_wire = serializers.IntegerField(allow_null=True)
    preflight_rtt_ms = serializers.FloatField(
        allow_null=True, help_text="the round-trip time each run's preflight measured"
    )
    ops_per_s = serializers.FloatField(
        allow_null=True,
        help_text="stat, open, list: the clients' operations per second over their storm; "
        "null for other operations",
    )
    tpc_rate_mbps = serializers.FloatField(
        allow_null=True,
        help_text="tpc-pull, tpc-push: the copy rate, MB/s (the clients' copies' sum); null "
        "for other operations",
    )
    tpc_start_s = serializers.FloatField(
        allow_null=True,
        help_text="tpc-pull, tpc-push: seconds from the COPY request to the first performance "
        "marker, else its answer (the clients' median); null for other operations and XRootD's",
    )
    wall_s_p25 = serializers.FloatField(allow_null=True)
    wall_s_p75 = serializers.FloatField(allow_null=True)


class ResultsCrossover(ResultsParameterSet):
    """Where copying first becomes faster than reading directly, for one parameter set."""

    crossover_fraction = serializers.FloatField(allow_null=True)
    kind = serializers.ChoiceField(
        choices=["crossover", "copy-faster", "direct-faster", "no-difference", "too-few-fractions"]
    )
    text = serializers.CharField()
    crossings = serializers.IntegerField()


class ResultsFailure(serializers.Serializer[Any]):
    """Final runs that did not fully succeed, by where, method, status and first error."""

    endpoint = serializers.IntegerField()
    vantage_point = serializers.CharField()
    operation = serializers.CharField()
    method = serializers.CharField()
    status = serializers.CharField()
    error_class = serializers.CharField(
        help_text="\"tester fault: <class>\" for the tester's own faults (not the endpoint's)"
    )
    tester_fault = serializers.BooleanField()
    runs = serializers.IntegerField()
    of_runs = serializers.IntegerField(
        help_text="final runs of this endpoint, vantage point, operation and method"
    )


class ResultsGuidance(serializers.Serializer[Any]):
    """What stands instead of the charts drawn across a parameter (what to add, or which
    runs are still to come); null when they can be drawn. `methods`: the crossover of direct
    and copy; `latency`: the latency-hiding chart."""

    fraction = serializers.CharField(allow_null=True)
    read_size = serializers.CharField(allow_null=True)
    clients = serializers.CharField(allow_null=True)
    methods = serializers.CharField(allow_null=True)
    latency = serializers.CharField(allow_null=True)


class ResultsLatencyOrder(serializers.Serializer[Any]):
    """The latency-hiding chart's endpoints in order, from one vantage point."""

    vantage_point = serializers.CharField()
    by = serializers.ChoiceField(choices=["rtt", "direct-ttfb", "name"])
    endpoints = serializers.ListField(child=serializers.IntegerField())
    text = serializers.CharField(help_text="which order it is, in words")


class CampaignResultsSerializer(serializers.Serializer[Any]):
    campaign = ResultsCampaign()
    dimensions = ResultsDimensions()
    varying = serializers.ListField(child=serializers.CharField())
    endpoints = ResultsEndpoint(many=True)
    cells = ResultsCell(many=True)
    crossovers = ResultsCrossover(many=True)
    failures = ResultsFailure(many=True)
    active_runs = serializers.IntegerField(help_text="runs still queued or running")
    guidance = ResultsGuidance()
    latency_order = ResultsLatencyOrder(many=True)
    charts_not_asked = serializers.DictField(
        child=serializers.CharField(),
        help_text="per chart of the page whose question the campaign does not ask (fraction, "
        "read-size, throughput, open, bytes, latency, doors): why the page does not draw it; "
        "a campaign without reads has none of them, and says which charts answer it",
    )
    operations = serializers.ListField(
        child=serializers.CharField(),
        help_text="the operations the campaign asks for or its runs measured",
    )
    operation_charts = serializers.ListField(
        child=serializers.CharField(),
        help_text="the page's charts of operations beyond reads that it draws (write, "
        "metadata, tpc-rate, tpc-start, replay)",
    )


class CellSerializer(serializers.Serializer[Any]):
    start = serializers.DateField(help_text="the day, or the week's Monday (UTC)")
    succeeded = serializers.IntegerField()
    # A field named like BaseSerializer.partial (the run status): DRF takes it out of the
    # class as it collects the fields.
    partial = serializers.IntegerField()  # type: ignore[assignment]
    failed = serializers.IntegerField(help_text="failed or timed out")
    runs = serializers.IntegerField(help_text="ended runs; cancelled ones left out")
    availability = serializers.FloatField(
        allow_null=True, help_text="(succeeded + partial / 2) / runs; null without runs"
    )
    rating = serializers.ChoiceField(choices=["good", "warn", "bad", "none"])


class FailureRateSerializer(serializers.Serializer[Any]):
    last = serializers.FloatField(allow_null=True, help_text=f"the last {TREND_DAYS} days")
    before = serializers.FloatField(allow_null=True, help_text=f"the {TREND_DAYS} days before")
    trend = serializers.ChoiceField(choices=["worse", "better", "steady", ""])


class KeyFiguresSerializer(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    run_url = serializers.CharField()
    at = serializers.DateTimeField()
    vantage_point = serializers.CharField()
    throughput_mbps = serializers.FloatField(allow_null=True)
    open_s = serializers.FloatField(allow_null=True)
    ttfb_s = serializers.FloatField(allow_null=True)
    wall_s = serializers.FloatField(allow_null=True)


class EndpointSummarySerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    protocol = serializers.CharField()
    role = serializers.CharField()
    enabled = serializers.BooleanField()
    url = serializers.CharField()
    latest = KeyFiguresSerializer(
        allow_null=True, help_text="its latest succeeded run of the summary's parameter set"
    )
    days = CellSerializer(many=True, help_text=f"the last {DAYS} days, oldest first")
    weeks = CellSerializer(many=True, help_text=f"the last {WEEKS} weeks, oldest first")
    failure_rate = FailureRateSerializer()
    compare_url = serializers.CharField()
    matrix_url = serializers.CharField()


class FailureSerializer(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    run_url = serializers.CharField()
    at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=FAILURE_STATUSES)
    endpoint = serializers.IntegerField()
    endpoint_name = serializers.CharField()
    protocol = serializers.CharField()
    vantage_point = serializers.CharField()
    error_class = serializers.CharField()
    message = serializers.CharField(help_text="the first error's first line")


class LabelledParameterSet(ParameterSetSerializer):
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label


class SiteSummarySerializer(serializers.Serializer[Any]):
    site = serializers.IntegerField()
    site_name = serializers.CharField()
    today = serializers.DateField(help_text="UTC")
    parameter_set = LabelledParameterSet(
        allow_null=True,
        help_text=f"of the key figures: the site's most measured of the last {WEEKS} weeks",
    )
    endpoints = EndpointSummarySerializer(many=True)
    site_days = CellSerializer(many=True, help_text="every endpoint together, per day")
    site_weeks = CellSerializer(many=True, help_text="every endpoint together, per week")
    failure_rate = FailureRateSerializer(help_text="every endpoint together")
    recent_failures = FailureSerializer(
        many=True,
        help_text=f"the newest {RECENT_FAILURES} failed, timed-out or partial runs of the "
        f"last {WEEKS} weeks",
    )
    compare_url = serializers.CharField()
    matrix_url = serializers.CharField()


class MatrixThresholdSerializer(serializers.Serializer[Thresholds]):
    """A metric's thresholds in effect; `good` and `bad` (and `metric` on POST) are written."""

    metric = serializers.ChoiceField(choices=list(METRICS))
    unit = serializers.CharField(read_only=True)
    higher_is_better = serializers.BooleanField(read_only=True)
    good = serializers.FloatField(help_text="boundary, in the metric's unit, at least 0")
    bad = serializers.FloatField(help_text="boundary, in the metric's unit, at least 0")
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field, not Field.source
        choices=["saved", "default"], read_only=True, help_text="an operator's, or the defaults"
    )
    saved_by = serializers.CharField(read_only=True, allow_null=True)
    saved_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "metric" not in attrs:  # PUT: the path's
            attrs["metric"] = self.context["metric"]
        metric: str = attrs["metric"]
        errors = threshold_errors(metric=metric, good=attrs["good"], bad=attrs["bad"])
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class MatrixThresholdWriteSerializer(MatrixThresholdSerializer):
    """PUT: the metric is the path's."""

    metric = serializers.CharField(read_only=True)  # type: ignore[assignment]
