"""The subscription form of /subscriptions/: the API's fields, with the target as one choice."""

from __future__ import annotations

from typing import Any

from django import forms

from webapp.notifications.models import Subscription
from webapp.notifications.selectors import target_choices


class SubscriptionForm(forms.Form):
    """A new subscription; `values()` gives the fields subscription_save takes."""

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
    email = forms.EmailField(required=False, help_text="email: where to (default: yours)")
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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["about"].choices = target_choices()  # type: ignore[attr-defined]

    def values(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        target, _, target_id = data.pop("about").partition(":")
        return {**data, "target": target, "target_id": int(target_id) if target_id else None}
