"""The subscription form of /subscriptions/ and of a subscription's edit page: the API's
fields, with the target as one choice."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import User

from webapp.accounts.models import Team
from webapp.notifications.models import Subscription
from webapp.notifications.selectors import target_choices, teams_for_subscribing

KEEP = "left empty: kept as it is"


class SubscriptionForm(forms.Form):
    """A new subscription (for you or a team you are in), or a change of `subscription` (whose
    it is stays; an empty URL or secret keeps the one saved); `values()` gives the fields
    subscription_save takes."""

    team = forms.ChoiceField(
        label="For",
        required=False,
        help_text="you, or a team you are in: its email goes to each member, a webhook once",
    )
    about = forms.ChoiceField(label="About", help_text="what you want to be told about")
    channel = forms.ChoiceField(choices=Subscription.Channel.choices)
    format = forms.ChoiceField(
        choices=Subscription.Format.choices,
        initial=Subscription.Format.GENERIC,
        help_text='webhooks: generic JSON, or Slack\'s `{"text": ...}` (Mattermost too)',
    )
    digest = forms.BooleanField(
        required=False, help_text="one message a day instead of one per state change"
    )
    email = forms.EmailField(
        required=False, help_text="email: where to (default: yours; a team's: each member's)"
    )
    url = forms.CharField(
        label="URL",
        required=False,
        max_length=2000,
        widget=forms.PasswordInput(render_value=False),
        help_text="webhook: its URL, never shown again (it may carry its token)",
    )
    secret_header = forms.CharField(
        label="Secret header",
        required=False,
        max_length=100,
        help_text="webhook: a header for the secret",
    )
    secret = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.PasswordInput(render_value=False),
        help_text="webhook: the header's value, never shown again",
    )
    active = forms.BooleanField(required=False, help_text="unticked: paused, nothing is sent")

    def __init__(
        self, *args: Any, user: User, subscription: Subscription | None = None, **kwargs: Any
    ) -> None:
        if subscription is not None:
            kwargs.setdefault("initial", _initial(subscription))
        super().__init__(*args, **kwargs)
        self.subscription = subscription
        self.fields["about"].choices = target_choices()  # type: ignore[attr-defined]
        if subscription is None:
            teams = [(str(t.pk), f"team {t.name}") for t in teams_for_subscribing(user=user)]
            self.fields["team"].choices = [("", "me"), *teams]  # type: ignore[attr-defined]
            del self.fields["active"]
        else:
            del self.fields["team"]  # whose it is does not change
            for name in ("url", "secret"):
                self.fields[name].help_text += f"; {KEEP}"

    def values(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        target, _, target_id = data.pop("about").partition(":")
        values = {**data, "target": target, "target_id": int(target_id) if target_id else None}
        if "team" in values:
            values["team"] = Team.objects.get(pk=values["team"]) if values["team"] else None
        if self.subscription is not None:
            for name in ("url", "secret"):
                values[name] = values[name] or None  # write-only: empty keeps it
        return values


def _initial(subscription: Subscription) -> dict[str, Any]:
    about = "all"
    if subscription.target != Subscription.Target.ALL:
        about = f"{subscription.target}:{subscription.target_id}"
    fields = ("channel", "format", "digest", "email", "secret_header", "active")
    return {"about": about, **{name: getattr(subscription, name) for name in fields}}
