"""The regression pages: /regressions/ (the list, filtered as the API is, severity first) and
/regressions/{id}/ (one regression with its series plotted, and the operators' forms:
Acknowledge, Silence until..., Unsilence, Resolve). Reads are webapp/watch/selectors.py, the
changes webapp/watch/actions.py, so the pages and /api/v1/regressions/ agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django import forms
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View

from webapp.accounts.access import ViewerRequiredMixin
from webapp.accounts.roles import can_operate, user_role
from webapp.dashboards.widgets import LightSelect
from webapp.watch.actions import (
    TransitionRefused,
    regression_acknowledge,
    regression_resolve,
    regression_silence,
    regression_unsilence,
)
from webapp.watch.forms import NoteForm, RegressionFilterForm, SilenceForm
from webapp.watch.models import Regression
from webapp.watch.selectors import (
    regression_detail,
    regression_get,
    regression_list,
    regression_rows,
    regression_sites,
)

PAGE_SIZE = 50
LIVE_STATES = [str(state) for state in Regression.LIVE]
ACT_REFUSAL = "acknowledging, silencing or resolving a regression needs the operator role"
ACTIONS = ("ack", "silence", "unsilence", "resolve")


class RegressionListView(ViewerRequiredMixin, View):
    """The regressions the filters select, severity first then newest, 50 a page. Without a
    query: the live ones (every state but resolved)."""

    template_name = "dashboards/regression_list.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        query = request.GET.copy()
        query.pop("page", None)
        if not query:
            query.setlist("state", LIVE_STATES)
        form = _light(RegressionFilterForm(query))
        if not form.is_valid():
            return render(request, self.template_name, {"form": form, "page": None}, status=400)
        keys = regression_list(filters=form.cleaned_data)
        page = Paginator(keys, PAGE_SIZE).get_page(request.GET.get("page"))
        rows = regression_rows(keys=[row.pk for row in page.object_list])
        context = {"form": form, "page": page, "rows": rows, "query": query.urlencode()}
        return render(request, self.template_name, context)


def _light(form: RegressionFilterForm) -> RegressionFilterForm:
    """The page's filters without a list of every endpoint and site (hundreds of options on
    each request): the endpoint is an id (each row links to its filter), the sites listed are
    those with regressions (any site id is still accepted, as by the API)."""
    endpoint = form.fields["endpoint"]
    endpoint.widget = forms.NumberInput(attrs={"min": 1, "placeholder": "any: an endpoint's id"})
    endpoint.help_text = "an endpoint's id (the endpoint link of a row filters by it)"
    sites: list[tuple[int | str, str]] = [*regression_sites()]
    chosen = str(form.data.get("site") or "")
    if chosen and chosen not in {str(pk) for pk, _ in sites}:
        sites.append((chosen, f"site {chosen}"))  # chosen, without regressions: still shown
    form.fields["site"].widget = LightSelect(choices=[("", "all sites"), *sites])
    return form


class RegressionDetailView(ViewerRequiredMixin, View):
    """GET: the regression, its series and events. POST (operators and admins): `action`
    ack, silence, unsilence or resolve with its form; a bad field is the page again with the
    form's error (400); a state that does not allow it, the page with why (409)."""

    template_name = "dashboards/regression_detail.html"

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        return self._page(request, _regression(pk))

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        if not can_operate(request.user):
            raise PermissionDenied(f"{ACT_REFUSAL}: you are a {user_role(request.user)}")
        regression = _regression(pk)
        action = request.POST.get("action", "")
        if action not in ACTIONS:
            return self._page(request, regression, refusal="unknown action", status=400)
        form = _action_form(action, request)
        if form is not None and not form.is_valid():
            return self._page(request, regression, bound_forms={action: form}, status=400)
        data = form.cleaned_data if form is not None else {}
        try:
            _ACT[action](regression, cast(User, request.user), data)
        except ValidationError as exc:
            bound = form or forms.Form()
            for field, errors in exc.message_dict.items():
                bound.add_error(field if field in bound.fields else None, errors)
            return self._page(request, regression, bound_forms={action: bound}, status=400)
        except TransitionRefused as exc:
            regression.refresh_from_db(fields=["state"])
            refusal = f"{exc} (it is {regression.state})"
            return self._page(request, regression, refusal=refusal, status=409)
        messages.success(request, _DONE[action])
        return redirect(reverse("dashboards:regression-detail", args=[regression.pk]))

    def _page(
        self,
        request: HttpRequest,
        regression: Regression,
        *,
        bound_forms: dict[str, forms.Form] | None = None,
        refusal: str = "",
        status: int = 200,
    ) -> HttpResponse:
        detail = regression_detail(regression=regression)
        bound = bound_forms or {}
        context: dict[str, Any] = {
            "regression": regression,
            "detail": detail,
            "plot": _plot_data(regression, detail),
            "can_act": can_operate(request.user),
            "ack_form": bound.get("ack") or NoteForm(prefix="ack"),
            "silence_form": bound.get("silence") or SilenceForm(prefix="silence"),
            "resolve_form": bound.get("resolve") or NoteForm(prefix="resolve"),
            "refusal": refusal,
            "acknowledgeable": regression.state
            in (Regression.State.OPEN, Regression.State.RECOVERING),
            "live": regression.state != Regression.State.RESOLVED,
        }
        return render(request, self.template_name, context, status=status)


def _regression(pk: int) -> Regression:
    try:
        return regression_get(pk=pk)
    except Regression.DoesNotExist as exc:
        raise Http404("no such regression") from exc


def _action_form(action: str, request: HttpRequest) -> forms.Form | None:
    if action == "silence":
        return SilenceForm(request.POST, prefix="silence")
    if action in ("ack", "resolve"):
        return NoteForm(request.POST, prefix=action)
    return None


def _plot_data(regression: Regression, detail: Any) -> dict[str, Any]:
    """What regression_detail.js draws: the series, its band and windows, the change night,
    the other vantage points and the version changes (names as data, drawn as text)."""
    return {
        "metric": regression.metric,
        "unit": detail["unit"],
        "vantage_point": regression.vantage_point.name if regression.vantage_point else "",
        "nights": detail["nights"],
        "band": detail["band"],
        "windows": detail["windows"],
        "change_night": regression.change_night.isoformat() if regression.change_night else None,
        "others": detail["others"],
        "versions": regression.versions,
    }


Act = Callable[[Regression, User, dict[str, Any]], object]
_ACT: dict[str, Act] = {
    "ack": lambda r, user, data: regression_acknowledge(regression=r, user=user, note=data["note"]),
    "resolve": lambda r, user, data: regression_resolve(regression=r, user=user, note=data["note"]),
    "silence": lambda r, user, data: regression_silence(
        regression=r, user=user, until=data["until"], note=data["note"]
    ),
    "unsilence": lambda r, user, data: regression_unsilence(regression=r),
}
_DONE = {
    "ack": "Acknowledged.",
    "resolve": "Resolved.",
    "silence": "Silenced.",
    "unsilence": "The silence is lifted.",
}
