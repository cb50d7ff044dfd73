"""Pages: /subscriptions/ (yours, and a form for a new one) and, for admins,
/notifications/deliveries/ (what is not sent yet, or failed, and why)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View

from webapp.accounts.access import AdminRequiredMixin, ViewerRequiredMixin
from webapp.accounts.roles import is_admin
from webapp.notifications.forms import SubscriptionForm
from webapp.notifications.models import Subscription
from webapp.notifications.selectors import deliveries_troubled, subscriptions_of
from webapp.notifications.services import subscription_save

FIELD_OF = {"target": "about", "target_id": "about"}


class SubscriptionListView(ViewerRequiredMixin, View):
    def get(self, request: HttpRequest) -> HttpResponse:
        return self._page(request, SubscriptionForm())

    def post(self, request: HttpRequest) -> HttpResponse:
        form = SubscriptionForm(request.POST)
        if form.is_valid():
            try:
                subscription_save(owner=request.user, values=form.values())  # type: ignore[arg-type]
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(FIELD_OF.get(field, field), errors)
            else:
                messages.success(request, "Subscribed.")
                return redirect("notifications:subscriptions")
        return self._page(request, form, status=400)

    def _page(
        self, request: HttpRequest, form: SubscriptionForm, status: int = 200
    ) -> HttpResponse:
        labels = _labels(form.fields["about"].choices)  # type: ignore[attr-defined]
        subscriptions = list(subscriptions_of(user=request.user))  # type: ignore[arg-type]
        for subscription in subscriptions:
            key = f"{subscription.target}:{subscription.target_id}"
            subscription.about_label = labels.get(key, subscription.target_label)  # type: ignore[attr-defined]
        context = {"form": form, "subscriptions": subscriptions, "section": "subscriptions"}
        return render(request, "notifications/subscription_list.html", context, status=status)


def _labels(choices: list[tuple[str, Any]]) -> dict[str, str]:
    """{"site:3": "CERN", ...} from the form's grouped choices."""
    labels = {"all:None": "Everything"}
    for _, group in choices:
        if isinstance(group, list):
            labels.update({value: str(label) for value, label in group})
    return labels


class SubscriptionDeleteView(ViewerRequiredMixin, View):
    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        rows = Subscription.objects.all()
        if not is_admin(request.user):
            rows = rows.filter(owner=request.user.pk)
        get_object_or_404(rows, pk=pk).delete()
        messages.success(request, "Unsubscribed.")
        return redirect("notifications:subscriptions")


class DeliveryListView(AdminRequiredMixin, View):
    refusal = "deliveries show every subscriber's addresses"

    def get(self, request: HttpRequest) -> HttpResponse:
        context = {"deliveries": deliveries_troubled(), "section": "subscriptions"}
        return render(request, "notifications/delivery_list.html", context)
