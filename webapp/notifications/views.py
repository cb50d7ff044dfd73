"""Pages: /subscriptions/ (yours and your teams', and a form for a new one), a subscription's
edit page and, for admins, /notifications/deliveries/ (what is not sent yet, or failed, and
why)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View

from webapp.accounts.access import AdminRequiredMixin, ViewerRequiredMixin
from webapp.notifications.forms import SubscriptionForm
from webapp.notifications.models import Subscription
from webapp.notifications.selectors import (
    deliveries_troubled,
    subscriptions_managed_by,
    subscriptions_of,
)
from webapp.notifications.services import subscription_save

FIELD_OF = {"target": "about", "target_id": "about"}


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # ViewerRequiredMixin let only signed-in users in
    return request.user


def _saved(request: HttpRequest, form: SubscriptionForm) -> Subscription | None:
    """The subscription the valid form makes or changes, or None with the refusals on the
    form's fields."""
    if not form.is_valid():
        return None
    try:
        return subscription_save(
            by=_user(request), values=form.values(), subscription=form.subscription
        )
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            name = FIELD_OF.get(field, field)
            form.add_error(name if name in form.fields else None, errors)
        return None


class SubscriptionListView(ViewerRequiredMixin, View):
    def get(self, request: HttpRequest) -> HttpResponse:
        return self._page(request, SubscriptionForm(user=_user(request)))

    def post(self, request: HttpRequest) -> HttpResponse:
        form = SubscriptionForm(request.POST, user=_user(request))
        if _saved(request, form) is not None:
            messages.success(request, "Subscribed.")
            return redirect("notifications:subscriptions")
        return self._page(request, form, status=400)

    def _page(
        self, request: HttpRequest, form: SubscriptionForm, status: int = 200
    ) -> HttpResponse:
        subscriptions = list(subscriptions_of(user=_user(request)))
        _label(subscriptions, form)
        context = {"form": form, "subscriptions": subscriptions, "section": "subscriptions"}
        return render(request, "notifications/subscription_list.html", context, status=status)


def _label(subscriptions: list[Subscription], form: SubscriptionForm) -> None:
    """Each subscription's `about_label`: the name of what it is about, as the form has it."""
    labels = _labels(form.fields["about"].choices)  # type: ignore[attr-defined]
    for subscription in subscriptions:
        key = f"{subscription.target}:{subscription.target_id}"
        subscription.about_label = labels.get(key, subscription.target_label)  # type: ignore[attr-defined]


def _labels(choices: list[tuple[str, Any]]) -> dict[str, str]:
    """{"site:3": "CERN", ...} from the form's grouped choices."""
    labels = {"all:None": "Everything"}
    for _, group in choices:
        if isinstance(group, list):
            labels.update({value: str(label) for value, label in group})
    return labels


class SubscriptionEditView(ViewerRequiredMixin, View):
    """Change a subscription of yours or of a team you are in (an admin: any): what about,
    channel, format, digest, address, webhook, secret, paused; the URL and secret are never
    shown, and left empty they are kept."""

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        subscription = self._subscription(request, pk)
        return self._page(request, SubscriptionForm(user=_user(request), subscription=subscription))

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        subscription = self._subscription(request, pk)
        form = SubscriptionForm(request.POST, user=_user(request), subscription=subscription)
        if _saved(request, form) is not None:
            messages.success(request, "Saved.")
            return redirect("notifications:subscriptions")
        return self._page(request, form, status=400)

    def _subscription(self, request: HttpRequest, pk: int) -> Subscription:
        rows = subscriptions_managed_by(user=_user(request)).select_related("owner", "team")
        return get_object_or_404(rows, pk=pk)

    def _page(
        self, request: HttpRequest, form: SubscriptionForm, status: int = 200
    ) -> HttpResponse:
        subscription = form.subscription
        assert subscription is not None
        _label([subscription], form)
        context = {"form": form, "subscription": subscription, "section": "subscriptions"}
        return render(request, "notifications/subscription_edit.html", context, status=status)


class SubscriptionDeleteView(ViewerRequiredMixin, View):
    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        get_object_or_404(subscriptions_managed_by(user=_user(request)), pk=pk).delete()
        messages.success(request, "Unsubscribed.")
        return redirect("notifications:subscriptions")


class DeliveryListView(AdminRequiredMixin, View):
    refusal = "deliveries show every subscriber's addresses"

    def get(self, request: HttpRequest) -> HttpResponse:
        context = {"deliveries": deliveries_troubled(), "section": "subscriptions"}
        return render(request, "notifications/delivery_list.html", context)
