"""The regressions' filters (the page's form and the API's query: they accept the same) and
the forms of what people do to a regression (acknowledge, silence, resolve)."""

from __future__ import annotations

from typing import Any

from django import forms

from webapp.campaigns.selectors import SERIES_METRICS
from webapp.sites.models import Endpoint, Site, VantagePoint
from webapp.watch.actions import NOTE_MAX_LENGTH
from webapp.watch.models import Regression
from workers.engine.errors import ErrorClass

METRIC_CHOICES = [
    *((m, f"{m} ({unit})") for m, unit in SERIES_METRICS.items()),
    ("availability", "availability (share of runs that succeeded)"),
    *((f"error:{c.value}", f"error:{c.value} (share of runs)") for c in ErrorClass),
]


class RegressionFilterForm(forms.Form):
    """Filters of the regressions page and API; every field is optional."""

    state = forms.MultipleChoiceField(
        choices=Regression.State.choices, help_text="any of these states; none: every state"
    )
    verdict = forms.MultipleChoiceField(choices=Regression.Verdict.choices)
    site = forms.ModelChoiceField(
        Site.objects.order_by("name"),
        empty_label="all sites",
        help_text="a site's id: its regressions and its endpoints'",
    )
    endpoint = forms.ModelChoiceField(
        Endpoint.objects.order_by("name"), empty_label="all endpoints", help_text="an id"
    )
    vantage_point = forms.ModelChoiceField(
        VantagePoint.objects.order_by("name"),
        to_field_name="name",
        empty_label="all",
        help_text="a vantage point's name",
    )
    metric = forms.ChoiceField(choices=[("", "all metrics"), *METRIC_CHOICES])
    blame = forms.ChoiceField(
        choices=[("", "anything"), *Regression.Blame.choices],
        help_text="what the regression was blamed on",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False
        self.fields["state"].widget.attrs["size"] = len(Regression.State.choices)
        self.fields["verdict"].widget.attrs["size"] = len(Regression.Verdict.choices)


class NoteForm(forms.Form):
    """Acknowledge or resolve: a note (required to acknowledge)."""

    note = forms.CharField(
        max_length=NOTE_MAX_LENGTH, required=False, widget=forms.Textarea(attrs={"rows": 3})
    )


class SilenceForm(forms.Form):
    """Silence until a time (UTC), with why."""

    until = forms.DateTimeField(
        help_text="UTC, e.g. 2026-12-01 08:00",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    note = forms.CharField(
        max_length=NOTE_MAX_LENGTH,
        help_text="why: shown to everyone",
        widget=forms.Textarea(attrs={"rows": 3}),
    )
