"""The campaign form: parameter lists typed as text ("4k, 1M"), bounded as the API bounds them
(webapp/campaigns/validation.py), and the matrix they make previewed before anything is saved."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from itertools import groupby
from typing import Any

from django import forms
from django.db.models import Field, Q
from django.forms.models import construct_instance
from django.utils import timezone

from webapp.accounts.roles import User
from webapp.campaigns.cron import DEFAULT_ZONE, CronError, slip_error, time_zone
from webapp.campaigns.cron_words import cron_phrase, cron_words
from webapp.campaigns.estimates import CampaignDuration, campaign_duration
from webapp.campaigns.models import (
    AXES,
    CAMPAIGN_PARAMETER_FIELDS,
    OPERATIONS_OFFERED,
    SHARED,
    Campaign,
    RunParameter,
)
from webapp.campaigns.services import (
    MatrixPreview,
    campaign_preview,
    campaign_save,
    matrix_rows_draft,
)
from webapp.campaigns.traces import Trace
from webapp.campaigns.validation import (
    FLOAT_BOUNDS,
    FRACTION_ERROR,
    INT_BOUNDS,
    MAX_LIST,
    METHODS,
    PATTERNS,
    campaign_credential_refusal,
    campaign_family_errors,
    campaign_operation_errors,
    campaign_rule_errors,
    campaign_trace_errors,
    distinct,
    fraction_in_bounds,
)
from webapp.sites.models import Endpoint, TestFile, VantagePoint
from workers.engine.units import format_size, parse_size, size_text


def _in_bounds(name: str, show: Callable[[int], str] = str) -> Callable[[int], int]:
    low, high = INT_BOUNDS[name]

    def check(value: int) -> int:
        if not low <= value <= high:
            raise forms.ValidationError(f"{show(value)} is not in {show(low)}..{show(high)}")
        return value

    return check


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise forms.ValidationError(str(exc)) from None


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise forms.ValidationError(f"{text!r} is not a whole number") from None


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise forms.ValidationError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and fraction_in_bounds(value)):
        raise forms.ValidationError(f"{text}: {FRACTION_ERROR}")
    return value


def _choice(choices: Sequence[str]) -> Callable[[str], str]:
    def check(text: str) -> str:
        if text not in choices:
            raise forms.ValidationError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return check


# Each axis' value when none is typed: the one a run gets when nobody says otherwise.
AXIS_DEFAULTS = {p.campaign_field: p.engine_default for p in AXES}


class ValueListField(forms.CharField):
    """Comma-separated values, each parsed (and bounded) by `parse`, shown back by `show`;
    a value given twice counts once. Empty or left out: the axis' one default value (the
    engine's, AXIS_DEFAULTS), which a new form shows filled in and as the placeholder."""

    def __init__(
        self,
        *,
        parse: Callable[[str], Any],
        show: Callable[[Any], str] = str,
        default: Any,
        **kwargs: Any,
    ) -> None:
        self.parse, self.show, self.default = parse, show, [default]
        super().__init__(required=False, initial=self.default, **kwargs)
        self.widget.attrs["placeholder"] = self.show(default)

    def to_python(self, value: Any) -> list[Any]:  # type: ignore[override]
        text = super().to_python(value) or ""
        items = [item.strip() for item in text.split(",")]
        items = [item for item in items if item]
        if len(items) > MAX_LIST:
            raise forms.ValidationError(f"at most {MAX_LIST} values")
        return distinct(self.parse(item) for item in items)

    def clean(self, value: Any) -> list[Any]:
        """Empty: the default, unless the field is made required (a configuration file
        names every axis: an empty list there is an error)."""
        return super().clean(value) or self.default

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(self.show(item) for item in value)
        return value


class OperationsField(forms.MultipleChoiceField):
    """The operations, as checkboxes (a configuration file's comma-separated text too);
    none checked: read. Replay needs the campaign's trace (campaign_trace_errors)."""

    widget = forms.CheckboxSelectMultiple

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            choices=[(o, o) for o in OPERATIONS_OFFERED],
            required=False,
            initial=[AXIS_DEFAULTS["operations"]],
            **kwargs,
        )

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, str):
            value = [item.strip() for item in value.split(",") if item.strip()]
        return distinct(super().to_python(value))

    def clean(self, value: Any) -> list[str]:
        return super().clean(value) or [AXIS_DEFAULTS["operations"]]


def _default(name: str) -> Any:
    """The model's default of an advanced parameter (the API's default too)."""
    field = Campaign._meta.get_field(name)
    assert isinstance(field, Field)
    default = field.default
    assert isinstance(default, int | float | str)
    return default


class AdvancedChoiceField(forms.ChoiceField):
    """One of the model field's choices; empty or left out: the default."""

    def __init__(self, *, name: str, **kwargs: Any) -> None:
        field = Campaign._meta.get_field(name)
        assert isinstance(field, Field)
        self.default = _default(name)
        choices = [(value, label) for value, label in field.flatchoices]
        super().__init__(choices=choices, required=False, initial=self.default, **kwargs)

    def clean(self, value: Any) -> str:
        return str(super().clean(value) or self.default)


class AdvancedFloatField(forms.FloatField):
    """A bounded number that, empty or left out, is the default (as in the API)."""

    def __init__(self, *, name: str, **kwargs: Any) -> None:
        low, high = FLOAT_BOUNDS[name]
        self.default = _default(name)
        super().__init__(
            min_value=low, max_value=high, required=False, initial=self.default, **kwargs
        )

    def to_python(self, value: Any) -> float:  # type: ignore[override]
        number = super().to_python(value)
        return self.default if number is None else number


class AdvancedSizeField(forms.CharField):
    """One size in bytes, typed with units (0, 64k, 1M); empty or left out: the default."""

    def __init__(self, *, name: str, **kwargs: Any) -> None:
        self.check = _in_bounds(name, format_size)
        self.default = _default(name)
        super().__init__(required=False, initial=self.default, **kwargs)

    def to_python(self, value: Any) -> int:  # type: ignore[override]
        text = super().to_python(value)
        return self.check(_size(text)) if text else self.default

    def prepare_value(self, value: Any) -> Any:
        return size_text(value) if isinstance(value, int) else value


def _bounded(name: str, **kwargs: Any) -> forms.IntegerField:
    low, high = INT_BOUNDS[name]
    return forms.IntegerField(min_value=low, max_value=high, **kwargs)


class AdvancedIntegerField(forms.IntegerField):
    """A bounded whole number that, empty or left out, is the default (as in the API)."""

    def __init__(self, *, name: str, **kwargs: Any) -> None:
        low, high = INT_BOUNDS[name]
        self.default = _default(name)
        super().__init__(
            min_value=low, max_value=high, required=False, initial=self.default, **kwargs
        )

    def to_python(self, value: Any) -> int:
        number = super().to_python(value)
        return self.default if number is None else number


def _grouped(
    items: Sequence[Any], group: Callable[[Any], str], label: Callable[[Any], str]
) -> list[Any]:
    """Choices in <optgroup>s (the items come ordered by their group)."""
    return [
        (name, [(item.pk, label(item)) for item in members])
        for name, members in groupby(items, key=group)
    ]


def _disabled(endpoint: Endpoint) -> str:
    return "" if endpoint.enabled else " - disabled: not read"


# Fields the page folds away: each has a default, so a campaign needs none of them.
ADVANCED = CAMPAIGN_PARAMETER_FIELDS[len(AXES) :]


def _advanced_field(parameter: RunParameter) -> forms.Field:
    """The form field of a parameter a campaign gives all its runs (SHARED): a bounded
    number (a size with units) defaulted as the API defaults it; empty, if it may be."""
    name = parameter.campaign_field
    texts: dict[str, Any] = {"help_text": parameter.help_text}
    if parameter.label:
        texts["label"] = parameter.label
    model_field = Campaign._meta.get_field(name)
    if isinstance(model_field, Field) and model_field.null:
        return _bounded(name, required=False, **texts)
    if isinstance(model_field, Field) and model_field.choices:
        return AdvancedChoiceField(name=name, **texts)
    if name in FLOAT_BOUNDS:
        return AdvancedFloatField(name=name, **texts)
    if parameter.size:
        return AdvancedSizeField(name=name, **texts)
    return AdvancedIntegerField(name=name, **texts)


SCHEDULE_EXAMPLES = ("0 2 * * *", "30 6 * * 1", "*/15 * * * *", "0 2 1 * *")


def schedule_help(current: str, zone: str = DEFAULT_ZONE) -> str:
    """The schedule field's help: cron examples in words, and the schedule given, if any, in
    `zone` (UTC where it is not a zone name)."""
    try:
        time_zone(zone)
    except CronError:
        zone = DEFAULT_ZONE
    examples = "; ".join(f"`{cron}`: {cron_words(cron, zone=zone)}" for cron in SCHEDULE_EXAMPLES)
    text = (
        "Cron in the time zone below (minute hour day-of-month month day-of-week): "
        f"{examples}. Empty: launched by hand."
    )
    phrase = cron_phrase(current, zone=zone) if current.strip() else None
    return f"{text} This one: {phrase}." if phrase else text


class CampaignForm(forms.ModelForm):  # type: ignore[type-arg]
    """Checks everything the API checks; `preview` is the matrix once the fields are valid."""

    # Querysets and grouped choices are set per form: _offer_endpoints_and_files.
    endpoints = forms.ModelMultipleChoiceField(
        queryset=Endpoint.objects.none(), help_text="Enabled endpoints, by site."
    )
    test_files = forms.ModelMultipleChoiceField(
        queryset=TestFile.objects.none(),
        required=False,
        help_text="None chosen: each endpoint's default test file.",
    )
    vantage_points = forms.ModelMultipleChoiceField(
        queryset=VantagePoint.objects.all(),
        required=False,
        help_text=f"None chosen: the {VantagePoint.LOCAL!r} vantage point (this host).",
    )
    operations = OperationsField(
        help_text="What the clients do: read the test files, write under the endpoint's "
        "scratch path, copy the test files to the destination endpoint (tpc-pull, tpc-push), "
        "or storm its metadata (stat and open the test files, list their folder)."
    )
    destination_endpoint = forms.ModelChoiceField(
        queryset=Endpoint.objects.none(),
        required=False,
        help_text="Third-party copies (tpc-pull, tpc-push) land under its scratch path.",
    )
    methods = ValueListField(
        parse=_choice(METHODS),
        default=AXIS_DEFAULTS["methods"],
        help_text=f"Comma-separated: {', '.join(METHODS)}.",
    )
    patterns = ValueListField(
        parse=_choice(PATTERNS),
        default=AXIS_DEFAULTS["patterns"],
        help_text=f"Comma-separated: {', '.join(PATTERNS)}.",
    )
    read_sizes = ValueListField(
        parse=lambda text: _in_bounds("read_sizes", format_size)(_size(text)),
        show=size_text,
        default=AXIS_DEFAULTS["read_sizes"],
        help_text="Comma-separated, with units: 4k, 64k, 1M (k = 1024 bytes).",
    )
    fractions = ValueListField(
        parse=_fraction,
        default=AXIS_DEFAULTS["fractions"],
        help_text="Comma-separated, each in (0, 1]: 0.1, 1.",
    )
    clients = ValueListField(
        parse=lambda text: _in_bounds("clients")(_whole(text)),
        default=AXIS_DEFAULTS["clients"],
        help_text="Comma-separated client counts: 1, 4, 16.",
    )
    # The advanced parameters (ADVANCED): folded away on the page, each defaulted as the
    # API defaults it; those of RUN_PARAMETERS are added below the class (_advanced_field).
    repetitions = AdvancedIntegerField(name="repetitions")
    trace = forms.ModelChoiceField(
        queryset=Trace.objects.all(),
        required=False,
        help_text="Replay: the recorded job (Traces) its runs replay. Its files are read at "
        "the same paths on each endpoint, which must hold them (at least as large as the "
        "recording read).",
        error_messages={"invalid_choice": "no such trace: upload it (Traces) first"},
    )

    class Meta:
        model = Campaign
        fields = [
            "name",
            "description",
            "endpoints",
            "test_files",
            "vantage_points",
            # The operations first, with the copies' destination right after them.
            "operations",
            "destination_endpoint",
            *(name for name in CAMPAIGN_PARAMETER_FIELDS if name != "operations"),
            "trace",
            "schedule",
            "schedule_tz",
            "schedule_slip_s",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args: Any, user: User | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user  # who saves it: a new campaign's owner
        self.fields["schedule"].help_text = schedule_help(
            self.data.get("schedule", "") if self.is_bound else self.instance.schedule,
            self.data.get("schedule_tz", "") if self.is_bound else self.instance.schedule_tz,
        )
        # Omitted (an older page, a script): the model's defaults, as the API has them.
        self.fields["schedule_tz"].required = False
        self.fields["schedule_slip_s"].required = False
        self.preview: MatrixPreview | None = None
        self.duration: CampaignDuration | None = None  # asked for by Preview only
        self.next_launches: list[datetime] = []  # asked for by Preview only
        self.slip_pending = 0  # a new campaign's slip: its slots' delays come with its id
        self._offer_endpoints_and_files()
        if self.instance.pk is None and not self.is_bound:
            self.initial.setdefault(
                "vantage_points", VantagePoint.objects.filter(name=VantagePoint.LOCAL)
            )

    def basic_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.fields if name not in ADVANCED]

    def advanced_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in ADVANCED]

    def advanced_errors(self) -> bool:
        """Whether an advanced field has an error (the page then unfolds them)."""
        return any(self[name].errors for name in ADVANCED)

    def _offer_endpoints_and_files(self) -> None:
        """Enabled endpoints and their files, grouped; a campaign being edited keeps its
        disabled ones on offer (marked), so that saving it does not drop them."""
        usable = Q(enabled=True)
        if self.instance.pk is not None:
            usable |= Q(pk__in=self.instance.endpoints.all())
        endpoints = Endpoint.objects.filter(usable).select_related("site")
        files = TestFile.objects.filter(endpoint__in=endpoints).select_related("endpoint")
        self.fields["endpoints"].queryset = endpoints  # type: ignore[attr-defined]
        self.fields["test_files"].queryset = files  # type: ignore[attr-defined]
        self.fields["destination_endpoint"].queryset = endpoints  # type: ignore[attr-defined]
        self.fields["endpoints"].widget.choices = _grouped(
            list(endpoints.order_by("site__name", "name")),
            lambda e: e.site.name,
            lambda e: f"{e.name} ({e.protocol}, {e.get_role_display()}){_disabled(e)}",
        )
        self.fields["test_files"].widget.choices = _grouped(
            list(files.order_by("endpoint__name", "path")),
            lambda f: f"{f.endpoint.name}{_disabled(f.endpoint)}",
            lambda f: f"{f.path} ({format_size(f.size)})",
        )

    def clean_schedule_tz(self) -> str:
        return str(self.cleaned_data.get("schedule_tz") or DEFAULT_ZONE)

    def clean_schedule_slip_s(self) -> int:
        return int(self.cleaned_data.get("schedule_slip_s") or 0)

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        rule_errors = campaign_rule_errors(
            endpoints=list(cleaned["endpoints"]),
            test_files=list(cleaned["test_files"]),
            methods=cleaned["methods"],
        ) or campaign_operation_errors(
            operations=cleaned["operations"],
            endpoints=list(cleaned["endpoints"]),
            destination=cleaned.get("destination_endpoint"),
        )
        rule_errors = rule_errors or campaign_trace_errors(
            operations=cleaned["operations"], trace=cleaned.get("trace")
        )
        rule_errors = rule_errors or campaign_family_errors(
            address_family=cleaned.get("address_family") or "any",
            endpoints=list(cleaned["endpoints"]),
        )
        for field, message in rule_errors.items():
            self.add_error(field, message)
        if not rule_errors:
            owner = self.instance.owner if self.instance.pk else self.user
            refusal = campaign_credential_refusal(endpoints=cleaned["endpoints"], owner=owner)
            if refusal:
                rule_errors["endpoints"] = refusal
                self.add_error("endpoints", refusal)
            destination = cleaned.get("destination_endpoint")
            refusal = campaign_credential_refusal(
                endpoints=[destination] if destination else [], owner=owner
            )
            if refusal:
                rule_errors["destination_endpoint"] = refusal
                self.add_error("destination_endpoint", refusal)
        slip = slip_error(schedule=cleaned["schedule"], slip_s=cleaned["schedule_slip_s"])
        if slip:
            self.add_error("schedule_slip_s", slip)
        if not rule_errors and not slip:
            self._check_matrix(cleaned)
        return cleaned

    def _check_matrix(self, cleaned: dict[str, Any]) -> None:
        draft = construct_instance(self, Campaign(), fields=self._meta.fields)
        rows = matrix_rows_draft(
            endpoints=cleaned["endpoints"],
            test_files=cleaned["test_files"],
            vantage_points=cleaned["vantage_points"],
        )
        self.preview = campaign_preview(campaign=draft, rows=rows)
        if self.preview.refusal:
            self.add_error(None, f"matrix: {self.preview.refusal}")
        elif "preview" in self.data:
            self.duration = campaign_duration(campaign=draft, rows=rows)
            self._preview_launches(draft)

    def _preview_launches(self, draft: Campaign) -> None:
        """The next launches of the schedule as entered: with each slot's slip for a saved
        campaign (it hashes the campaign's id), the bare slots for a new one."""
        saved = self.instance
        draft.pk = saved.pk
        draft.created_at = saved.created_at
        draft.schedule_resumed_at = saved.schedule_resumed_at
        self.next_launches = draft.schedule_next_launches(timezone.now())
        self.slip_pending = 0 if saved.pk else draft.schedule_slip_s

    def save(self, commit: bool = True) -> Campaign:
        """Save the campaign and its relations; no vantage point chosen means the local one."""
        assert commit, "the campaign's relations are saved with it"
        cleaned = self.cleaned_data
        return campaign_save(
            campaign=self.instance,
            endpoints=cleaned["endpoints"],
            test_files=cleaned["test_files"],
            vantage_points=cleaned["vantage_points"],
        )


# Model fields the class's Meta names keep their place in the form (Meta.fields' order).
CampaignForm.base_fields.update({p.campaign_field: _advanced_field(p) for p in SHARED})
