"""The users page's form: a new user, with a password or for single sign-on."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import AbstractUser

from webapp.accounts.roles import ROLES, VIEWER
from webapp.accounts.services import UserInputError, user_create

SIGN_IN_PASSWORD = "password"
SIGN_IN_SSO = "sso"


class UserCreateForm(forms.Form):
    username = forms.CharField(max_length=150, label="User name")
    email = forms.EmailField(required=False)
    role = forms.ChoiceField(choices=[(role, role) for role in ROLES], initial=VIEWER)
    sign_in = forms.ChoiceField(
        label="Signs in with",
        choices=[
            (SIGN_IN_PASSWORD, "a password, set here"),
            (SIGN_IN_SSO, "no password: single sign-on (or an API token only)"),
        ],
        initial=SIGN_IN_PASSWORD,
        widget=forms.RadioSelect,
        help_text="With single sign-on, the user's first sign-in with the same user name "
        "takes this account over.",
    )
    password = forms.CharField(
        required=False, strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "off"})
    )
    password_again = forms.CharField(
        required=False,
        strip=False,
        label="Password (again)",
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
    )

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean() or {}
        if cleaned.get("sign_in") == SIGN_IN_PASSWORD:
            if not cleaned.get("password"):
                self.add_error("password", "give the user's first password")
            elif cleaned.get("password") != cleaned.get("password_again"):
                self.add_error("password_again", "the two passwords differ")
        return cleaned

    def save(self) -> AbstractUser | None:
        """The new user, or None with the service's refusal on its field."""
        data = self.cleaned_data
        try:
            return user_create(
                username=data["username"],
                email=data["email"],
                role=data["role"],
                password=data["password"] if data["sign_in"] == SIGN_IN_PASSWORD else None,
            )
        except UserInputError as refused:
            field = refused.field if refused.field in self.fields else None
            self.add_error(field, refused.message)
            return None


class TeamCreateForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="unique, whatever its case")
    description = forms.CharField(max_length=300, required=False)


class TeamMemberForm(forms.Form):
    username = forms.CharField(max_length=150, label="User name")
    manager = forms.BooleanField(
        required=False, help_text="adds and removes members, deletes the team"
    )
