"""The advice as the site and endpoint pages show it, and the one click that creates the
campaign a too-thin answer asks for.

The statements are the advice app's (webapp/advice/); this module only arranges them for a
page: grouped per protocol and vantage point (the site page's verdicts) or per vantage point
(the endpoint page's), each with links to its runs, and a too-thin one with its suggested
campaign. The click sends the question and vantage point to the endpoint's address: the
advice app rebuilds the campaign from them (webapp/advice/suggestions.py), never from
fields a client sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import View

from webapp.accounts.access import OperatorRequiredMixin
from webapp.accounts.roles import can_operate
from webapp.advice.selectors import questions
from webapp.advice.statements import Statement
from webapp.advice.suggestions import PLANS, SUGGESTED_KNEES, create_suggested_campaign
from webapp.sites.models import Endpoint, VantagePoint

# Runs linked one by one under a statement; the rest are one click further (the runs list).
EVIDENCE_SHOWN = 6


@dataclass(frozen=True)
class Offer:
    """A suggested campaign as the page offers it, and what its form sends."""

    campaign: dict[str, Any]
    fields: dict[str, Any]


@dataclass(frozen=True)
class ShownStatement:
    """A statement with what its page needs: names, links to its runs, and the campaign a
    too-thin answer asks for."""

    statement: Statement
    endpoint: Endpoint | None
    evidence: list[tuple[int, str]]
    more_evidence: list[tuple[int, str]]
    runs_url: str
    offer: Offer | None


@dataclass(frozen=True)
class AdviceGroup:
    """The statements for one protocol (on the site page) and one vantage point."""

    protocol: str
    vantage_point: str
    statements: list[ShownStatement]


def advice_context(
    request: HttpRequest, statements: Sequence[Statement], *, by_protocol: bool, api_url: str
) -> dict[str, Any]:
    """What the advice section of a page needs (templates/dashboards/advice_section.html):
    `api_url` answers the same statements."""
    return {
        "advice_groups": advice_groups(statements, by_protocol=by_protocol),
        "advice_api_url": api_url,
        "advice_max_age_days": settings.FEDPROBE_ADVICE_MAX_AGE_DAYS,
        "can_create_campaigns": can_operate(request.user),
    }


def advice_groups(statements: Sequence[Statement], *, by_protocol: bool) -> list[AdviceGroup]:
    """The statements per (protocol,) vantage point, in the order the advice gave them."""
    endpoints = Endpoint.objects.in_bulk({s.endpoint_id for s in statements})
    vantage_points = VantagePoint.objects.in_bulk(
        {s.vantage_point_id for s in statements if s.vantage_point_id is not None}
    )
    grouped: dict[tuple[str, int | None], list[Statement]] = {}
    for statement in statements:
        protocol = statement.protocol if by_protocol else ""
        grouped.setdefault((protocol, statement.vantage_point_id), []).append(statement)
    groups = []
    for (protocol, vantage_point_id), members in grouped.items():
        vantage_point = vantage_points.get(vantage_point_id) if vantage_point_id else None
        shown = [_shown(s, endpoints.get(s.endpoint_id), vantage_point) for s in members]
        groups.append(
            AdviceGroup(
                protocol=protocol,
                vantage_point=vantage_point.name if vantage_point else VantagePoint.LOCAL,
                statements=shown,
            )
        )
    return groups


def _shown(
    statement: Statement, endpoint: Endpoint | None, vantage_point: VantagePoint | None
) -> ShownStatement:
    links = [(pk, reverse("campaigns:run-detail", args=[pk])) for pk in statement.evidence]
    query = f"endpoint={statement.endpoint_id}"
    if vantage_point is not None:
        query += f"&vantage_point={vantage_point.name}"
    return ShownStatement(
        statement=statement,
        endpoint=endpoint,
        evidence=links[:EVIDENCE_SHOWN],
        more_evidence=links[EVIDENCE_SHOWN:],
        runs_url=f"{reverse('campaigns:run-list')}?{query}",
        offer=_offer(statement),
    )


def _offer(statement: Statement) -> Offer | None:
    """The campaign a too-thin statement asks for, if one can be made (a test file to read)."""
    campaign = statement.suggested_campaign
    if statement.enough_data or campaign is None:
        return None
    return Offer(campaign=campaign, fields=_offer_fields(campaign))


def _offer_fields(campaign: dict[str, Any]) -> dict[str, Any]:
    fields = {name: campaign.get(name) for name in SuggestedCampaignForm.base_fields}
    return {name: "" if value is None else value for name, value in fields.items()}


class SuggestedCampaignForm(forms.Form):
    """What identifies a suggested campaign on an endpoint: its question and vantage point
    (none: this host's)."""

    question = forms.ChoiceField(choices=[(q, q) for q in PLANS])
    vantage_point = forms.ModelChoiceField(queryset=VantagePoint.objects.all(), required=False)
    # The knee's: of reads, writes or a metadata storm (the suggestion's own).
    operation = forms.ChoiceField(choices=[(o, o) for o in SUGGESTED_KNEES], required=False)

    def __init__(self, *args: Any, endpoint: Endpoint, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.endpoint = endpoint

    def clean_question(self) -> str:
        question: str = self.cleaned_data["question"]
        if question not in questions(self.endpoint):
            role = self.endpoint.get_role_display()
            raise ValidationError(f"not asked of {self.endpoint.name} (a {role} endpoint)")
        return question


class SuggestedCampaignCreateView(OperatorRequiredMixin, View):
    """POST from a site or endpoint page's offer: the campaign the advice suggests for the
    question on this endpoint is created, not launched, and the user lands on its page to
    launch it. A GET (history, a bookmark) goes to the endpoint page's advice."""

    http_method_names = ["get", "post"]

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        return redirect(reverse("sites:endpoint-detail", args=[pk]) + "#advice")

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        endpoint = get_object_or_404(Endpoint, pk=pk)
        form = SuggestedCampaignForm(request.POST, endpoint=endpoint)
        if not form.is_valid():
            return _refused(request, form_words(form.errors.get_json_data()))
        owner = request.user
        assert isinstance(owner, User)  # OperatorRequiredMixin let only a signed-in user in
        try:
            campaign = create_suggested_campaign(
                question=form.cleaned_data["question"],
                endpoint=endpoint,
                vantage_point=form.cleaned_data["vantage_point"] or VantagePoint.local_unsaved(),
                owner=owner,
                operation=form.cleaned_data["operation"] or "read",
            )
        except ValidationError as error:
            return _refused(request, form_words(error.message_dict))
        messages.success(
            request,
            f"Created campaign {campaign.name!r}, not launched: check it, then Launch.",
        )
        return redirect("campaigns:campaign-detail", pk=campaign.pk)


def form_words(errors: dict[str, Any]) -> str:
    """{"vantage_point": ["no such"]} -> "vantage point: no such" (either error shape)."""
    return "; ".join(
        f"{name.replace('_', ' ')}: "
        + " ".join(m["message"] if isinstance(m, dict) else str(m) for m in found)
        for name, found in errors.items()
    )


def _refused(request: HttpRequest, reason: str) -> HttpResponse:
    """Nothing created: the page says why, with a way back to the page the offer came from."""
    back = request.headers.get("referer", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
        back = ""
    context = {"reason": reason, "back": back}
    return render(request, "dashboards/suggested_campaign_refused.html", context, status=400)
