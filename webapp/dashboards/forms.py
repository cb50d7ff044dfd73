"""The dashboards' query forms: each page and its API view validate their query with the
same form (the API answers its errors as 400 {field: [message]}, schema.form_errors), and
the API's OpenAPI parameters are read from it (schema.form_parameters)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone

from webapp.campaigns.metrics import METRICS, RUN_METRICS
from webapp.campaigns.models import PARAMETER_SET_FIELDS
from webapp.campaigns.validation import (
    FRACTION_ERROR,
    MAX_ID,
    METHODS,
    OPERATIONS,
    PATTERNS,
    fraction_in_bounds,
)
from webapp.dashboards.selectors.alerts import (
    DEFAULT_DAYS,
    DEFAULT_DROP_PCT,
    DEFAULT_RISE_PCT,
    DEFAULT_SLOWER_METRICS,
    SPEED_METRICS,
)
from webapp.dashboards.selectors.compare import (
    BUCKETS,
    MAX_DAYS,
    MAX_ENDPOINTS,
    default_range,
    endpoints_chosen,
)
from webapp.dashboards.selectors.compare import DEFAULT_DAYS as COMPARE_DEFAULT_DAYS
from webapp.dashboards.selectors.matrix import DEFAULT_METRIC, VIEWS
from webapp.dashboards.selectors.parameter_sets import RecentParameterSet
from webapp.dashboards.selectors.results import ResultsFilter
from webapp.dashboards.selectors.thresholds import order_error, threshold_errors
from webapp.dashboards.widgets import LightSelect
from webapp.sites.models import Endpoint, Site, VantagePoint
from workers.engine.params import (
    MAX_CLIENTS,
    MAX_READ_SIZE,
    AddressFamily,
    Method,
    Operation,
    Pattern,
)
from workers.engine.units import format_size

MOST_MEASURED = "most measured"
# The families a run is held to (a campaign's "each" launches runs of 4 and of 6).
RUN_FAMILIES = [(f.value, f.value) for f in AddressFamily if f != AddressFamily.EACH]
FAMILY_HELP = "any (the client's choice), 4 (IPv4 only) or 6 (IPv6 only)"
OVERRIDE_HELP = "in the metric's unit; empty: its saved (or default) threshold"
MAX_VALUES = 100  # values per repeated query parameter


def _more_than_zero(value: float) -> None:
    if value <= 0:
        raise forms.ValidationError("must be more than 0")


class FractionField(forms.FloatField):
    """A parameter set's fraction of the file as a query parameter: in (0, 1]."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_value=1.0, validators=[_more_than_zero], **kwargs)


class IdsField(forms.Field):
    """A repeated query parameter of ids (endpoint=3&endpoint=7)."""

    widget = forms.SelectMultiple

    def to_python(self, value: Any) -> list[int]:
        ids = []
        for item in value or []:
            text = str(item).strip()
            if not text.isdigit() or len(text) > 18:
                raise ValidationError(f"{item!r} is not an id")
            ids.append(int(text))
        return ids


class MatrixForm(forms.Form):
    """The matrix's controls; the page and the API read the same query parameters."""

    metric = forms.ChoiceField(choices=[(m.name, m.title) for m in RUN_METRICS], required=False)
    good = forms.FloatField(help_text=OVERRIDE_HELP)
    bad = forms.FloatField(help_text=OVERRIDE_HELP)
    view = forms.ChoiceField(choices=VIEWS, required=False)
    operation = forms.ChoiceField(choices=[("", "most common")] + [(o, o) for o in Operation])
    method = forms.ChoiceField(choices=[("", "most common")] + [(m, m) for m in Method])
    pattern = forms.ChoiceField(choices=[("", "most common")] + [(p, p) for p in Pattern])
    read_size = forms.IntegerField(
        min_value=1, max_value=MAX_READ_SIZE, help_text="in bytes in the URL"
    )
    fraction = FractionField(help_text="of the file, in (0, 1]")
    clients = forms.IntegerField(min_value=1, max_value=MAX_CLIENTS)
    address_family = forms.ChoiceField(
        choices=[("", "most common"), *RUN_FAMILIES], help_text=FAMILY_HELP
    )
    site = forms.ModelChoiceField(Site.objects.order_by("name"), empty_label="all sites")
    protocol = forms.ChoiceField(choices=[("", "all protocols"), *Endpoint.Protocol.choices])
    vantage_point = forms.ModelChoiceField(
        VantagePoint.objects.order_by("name"), to_field_name="name", empty_label="all"
    )

    def __init__(
        self, *args: Any, recent: Sequence[RecentParameterSet] = (), **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False
        self._offer_recent_values(recent)

    def _offer_recent_values(self, recent: Sequence[RecentParameterSet]) -> None:
        """read_size, fraction and clients are numbers (any may be asked for), offered as
        the values of recent parameter sets plus the one in the query."""
        labels: dict[str, Callable[[Any], str]] = {
            "read_size": format_size,
            "fraction": lambda v: f"{v:g}",
            "clients": str,
        }
        for name, label in labels.items():
            values = {getattr(r.parameter_set, name) for r in recent}
            asked = self.data.get(name) if self.is_bound else None
            choices = [("", "most common")] + [(v, label(v)) for v in sorted(values)]
            if asked and asked not in {str(v) for v in values}:
                choices.append((asked, asked))
            self.fields[name].widget = forms.Select(choices=choices)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        metric = data.get("metric") or DEFAULT_METRIC
        good, bad = data.get("good"), data.get("bad")
        if (good is None) != (bad is None):
            missing = "bad" if bad is None else "good"
            self.add_error(missing, "give both good and bad boundaries, or neither")
        elif good is not None and bad is not None:
            error = order_error(metric=metric, good=good, bad=bad)
            if error:
                self.add_error("bad", error)
        return data


class ThresholdForm(forms.Form):
    """The page's form that saves a metric's thresholds for everyone, or resets them."""

    metric = forms.ChoiceField(choices=[(m, m) for m in METRICS])
    good = forms.FloatField(required=False)
    bad = forms.FloatField(required=False)
    reset = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("reset") or "metric" not in data:
            return data
        good, bad = data.get("good"), data.get("bad")
        for name, value in (("good", good), ("bad", bad)):
            if value is None and name not in self.errors:
                self.add_error(name, "needed to save the thresholds")
        if good is not None and bad is not None:
            errors = threshold_errors(metric=data["metric"], good=good, bad=bad)
            for name, messages in errors.items():
                self.add_error(name, messages)
        return data


class AlertsForm(forms.Form):
    """Filters of the alerts page and API; every field is optional."""

    # Drawn in Python (LightSelect): a federation's 500 endpoints cost Django's option
    # templates about 100 ms a request.
    site = forms.ModelChoiceField(
        Site.objects.order_by("name"), empty_label="all sites", widget=LightSelect
    )
    protocol = forms.ChoiceField(choices=[("", "all protocols"), *Endpoint.Protocol.choices])
    endpoint = forms.ModelChoiceField(
        Endpoint.objects.order_by("name"), empty_label="all endpoints", widget=LightSelect
    )
    vantage_point = forms.ModelChoiceField(
        VantagePoint.objects.order_by("name"),
        to_field_name="name",
        empty_label="all",
        widget=LightSelect,
    )
    operation = forms.ChoiceField(choices=[("", "any")] + [(o, o) for o in Operation])
    method = forms.ChoiceField(choices=[("", "any")] + [(m, m) for m in Method])
    pattern = forms.ChoiceField(choices=[("", "any")] + [(p, p) for p in Pattern])
    read_size = forms.IntegerField(min_value=1, max_value=MAX_READ_SIZE, help_text="bytes")
    fraction = FractionField()
    clients = forms.IntegerField(min_value=1, max_value=MAX_CLIENTS)
    address_family = forms.ChoiceField(choices=[("", "any"), *RUN_FAMILIES], help_text=FAMILY_HELP)
    days = forms.IntegerField(
        min_value=1, max_value=365, help_text="runs of the last N days (slower: at most 31)"
    )
    metric = forms.MultipleChoiceField(
        choices=[(m, METRICS[m].title) for m in SPEED_METRICS],
        help_text="checked for slowdowns; none chosen: "
        + ", ".join(METRICS[m].label for m in DEFAULT_SLOWER_METRICS),
    )
    drop_pct = forms.FloatField(
        min_value=1, max_value=100, help_text="slower: throughput down by this %"
    )
    rise_pct = forms.FloatField(
        min_value=1, max_value=10_000, help_text="slower: times and latencies up by this %"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False
        self.fields["metric"].widget.attrs["size"] = len(SPEED_METRICS)
        defaults = {
            "days": DEFAULT_DAYS,
            "drop_pct": DEFAULT_DROP_PCT,
            "rise_pct": DEFAULT_RISE_PCT,
        }
        for name, value in defaults.items():
            self.fields[name].widget.attrs["placeholder"] = f"{value:g}"
        for name in ("read_size", "fraction", "clients"):
            self.fields[name].widget.attrs["placeholder"] = "any"


class CompareForm(forms.Form):
    """What to compare: endpoints (or whole sites, of some protocols), a metric, a parameter
    set (fields left out: the most measured set that agrees) and a range of days."""

    endpoint = IdsField(required=False, help_text="endpoint ids (repeat the parameter)")
    site = IdsField(required=False, help_text="site ids: all their endpoints")
    protocol = forms.MultipleChoiceField(
        choices=Endpoint.Protocol.choices,
        required=False,
        help_text="keep the endpoints of these protocols",
    )
    metric = forms.ChoiceField(
        choices=[(m.name, m.title) for m in RUN_METRICS],
        required=False,
    )
    operation = forms.ChoiceField(
        choices=[("", MOST_MEASURED)] + [(o.value, o.value) for o in Operation], required=False
    )
    method = forms.ChoiceField(
        choices=[("", MOST_MEASURED)] + [(m.value, m.value) for m in Method], required=False
    )
    pattern = forms.ChoiceField(
        choices=[("", MOST_MEASURED)] + [(p.value, p.value) for p in Pattern], required=False
    )
    read_size = forms.IntegerField(
        min_value=1, max_value=MAX_READ_SIZE, required=False, help_text="bytes"
    )
    fraction = FractionField(required=False, help_text="of the file, in (0, 1]")
    clients = forms.IntegerField(min_value=1, max_value=MAX_CLIENTS, required=False)
    address_family = forms.ChoiceField(
        choices=[("", MOST_MEASURED), *RUN_FAMILIES], required=False, help_text=FAMILY_HELP
    )
    vantage_point = forms.CharField(
        max_length=50, required=False, help_text="a vantage point's name (default: all)"
    )
    server_version = forms.CharField(
        max_length=200,
        required=False,
        help_text="only runs whose server reported this version (or a part of it, e.g. "
        "'XRootD v5.6'); every run shows the version it saw",
    )
    since = forms.DateField(
        required=False, help_text=f"first day (default: {COMPARE_DEFAULT_DAYS} days before until)"
    )
    until = forms.DateField(required=False, help_text="last day, included (default: today, UTC)")
    bucket = forms.ChoiceField(
        choices=[(b, b) for b in BUCKETS], required=False, help_text="default: day"
    )

    def clean_vantage_point(self) -> VantagePoint | None:
        name = self.cleaned_data.get("vantage_point") or ""
        if not name:
            return None
        vantage_point = VantagePoint.objects.filter(name=name).first()
        if vantage_point is None:
            raise ValidationError(f"no vantage point is named {name!r}")
        return vantage_point

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        self._clean_range(data)
        if not self.errors:
            self._clean_endpoints(data)
        return data

    def _clean_range(self, data: dict[str, Any]) -> None:
        until = data.get("until") or timezone.now().date()
        since = data.get("since") or default_range(until)[0]
        if since > until:
            self.add_error("since", "must not be after until")
        elif (until - since).days + 1 > MAX_DAYS:
            self.add_error("since", f"the range spans more than {MAX_DAYS} days")
        data.update(since=since, until=until)

    def _clean_endpoints(self, data: dict[str, Any]) -> None:
        endpoint_ids, site_ids = data.get("endpoint") or [], data.get("site") or []
        if not endpoint_ids and not site_ids:
            self.add_error("endpoint", "pick at least one endpoint or site")
            return
        endpoints = list(endpoints_chosen(endpoint_ids=endpoint_ids, site_ids=site_ids))
        unknown = set(endpoint_ids) - {e.pk for e in endpoints}
        if unknown:
            self.add_error("endpoint", f"no endpoint has the id {min(unknown)}")
        missing = set(site_ids) - {e.site_id for e in endpoints}
        if missing:
            self.add_error("site", f"no site with endpoints has the id {min(missing)}")
        protocols = data.get("protocol")
        if protocols:
            endpoints = [e for e in endpoints if e.protocol in protocols]
            if not endpoints and not self.errors:
                self.add_error("protocol", "none of the endpoints chosen speaks these protocols")
        if len(endpoints) > MAX_ENDPOINTS:
            field = "site" if site_ids else "endpoint"
            self.add_error(
                field, f"{len(endpoints)} endpoints: compare at most {MAX_ENDPOINTS} at once"
            )
        data["endpoints"] = endpoints

    def query(self) -> dict[str, Any]:
        """compare_data's arguments (call once the form is valid)."""
        data = self.cleaned_data
        return {
            "endpoints": data["endpoints"],
            "metric": data.get("metric") or DEFAULT_METRIC,
            "since": data["since"],
            "until": data["until"],
            "bucket": data.get("bucket") or "day",
            "parameters": {f: data.get(f) for f in PARAMETER_SET_FIELDS},
            "vantage_point": data.get("vantage_point") or None,
            "server_version": data.get("server_version") or None,
        }


def _fraction(value: float) -> None:
    if not fraction_in_bounds(value):
        raise ValidationError(FRACTION_ERROR)


class ValuesField(forms.Field):
    """A repeated query parameter (?method=direct&method=copy): at most MAX_VALUES values,
    each cleaned by `item` (an error names the value's position)."""

    widget = forms.MultipleHiddenInput

    def __init__(self, item: forms.Field, *, max_values: int = MAX_VALUES, **kwargs: Any) -> None:
        super().__init__(required=False, **kwargs)
        self.item = item
        self.max_values = max_values

    def to_python(self, value: Any) -> list[Any]:
        values = [value] if isinstance(value, str | int | float) else list(value or [])
        if len(values) > self.max_values:
            raise ValidationError(f"Ensure this field has no more than {self.max_values} elements.")
        cleaned, errors = [], []
        for i, item in enumerate(values):
            try:
                cleaned.append(self.item.clean(item))
            except ValidationError as error:
                errors += [f"value {i}: {message}" for message in error.messages]
        if errors:
            raise ValidationError(errors)
        return cleaned


class ResultsForm(forms.Form):
    """The campaign results' runs to read; a parameter may repeat (?method=direct&method=copy)."""

    endpoint = ValuesField(
        forms.IntegerField(min_value=1, max_value=MAX_ID), help_text="endpoint ids"
    )
    vantage_point = ValuesField(forms.CharField(max_length=50), help_text="vantage point names")
    operation = ValuesField(
        forms.ChoiceField(choices=[(o, o) for o in OPERATIONS]), help_text="operations"
    )
    method = ValuesField(
        forms.ChoiceField(choices=[(m, m) for m in METHODS]), help_text="access methods"
    )
    pattern = ValuesField(
        forms.ChoiceField(choices=[(p, p) for p in PATTERNS]), help_text="read patterns"
    )
    read_size = ValuesField(
        forms.IntegerField(min_value=1, max_value=MAX_READ_SIZE), help_text="read sizes in bytes"
    )
    fraction = ValuesField(
        forms.FloatField(validators=[_fraction]), help_text="fractions of the file, in (0, 1]"
    )
    clients = ValuesField(
        forms.IntegerField(min_value=1, max_value=MAX_CLIENTS), help_text="clients"
    )
    address_family = ValuesField(
        forms.ChoiceField(choices=RUN_FAMILIES), help_text=f"address families: {FAMILY_HELP}"
    )
    since = forms.DateField(required=False, help_text="runs created on or after this day")
    until = forms.DateField(required=False, help_text="runs created on or before this day")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and until < since:
            self.add_error("until", "must not be before since")
        return data

    def results_filter(self) -> ResultsFilter:
        """The filter the query asks for (call once the form is valid)."""
        return ResultsFilter(**{k: v for k, v in self.cleaned_data.items() if v not in (None, [])})
