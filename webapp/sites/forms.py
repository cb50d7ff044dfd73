"""Forms for sites, endpoints, test files and vantage points (the models' validators apply)."""

from __future__ import annotations

from typing import Any

from django import forms

from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from workers.engine.errors import InvalidParams
from workers.engine.urls import check_url


class SiteForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Site
        fields = ["name", "tier", "storage_system", "location"]


class EndpointForm(forms.ModelForm):  # type: ignore[type-arg]
    """The credential is write-only: never rendered, kept when left empty, removed on request."""

    credential = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="A bearer token or X.509 proxy, stored encrypted. Leave empty to keep the "
        "stored one.",
    )
    clear_credential = forms.BooleanField(
        required=False, label="Clear the stored credential", help_text="Remove it."
    )

    class Meta:
        model = Endpoint
        # `credential` is not a model field here: save() decides whether to change it.
        fields = ["site", "name", "protocol", "base_url", "role", "enabled"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        if self.cleaned_data.get("credential") and self.cleaned_data.get("clear_credential"):
            self.add_error("credential", "give a new credential or clear it, not both")
        return self.cleaned_data

    def save(self, commit: bool = True) -> Endpoint:
        endpoint: Endpoint = super().save(commit=False)
        if self.cleaned_data.get("clear_credential"):
            endpoint.credential = ""
        elif self.cleaned_data.get("credential"):
            endpoint.credential = self.cleaned_data["credential"]
        if commit:
            endpoint.save()
        return endpoint


class TestFileForm(forms.ModelForm):  # type: ignore[type-arg]
    """A test file of one endpoint (given to the form, not chosen in it)."""

    __test__ = False

    size = forms.IntegerField(min_value=1, help_text="bytes")

    class Meta:
        model = TestFile
        fields = ["path", "size", "adler32", "is_default"]
        labels = {"is_default": "Default test file of the endpoint"}

    def __init__(self, *args: Any, endpoint: Endpoint, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.endpoint = endpoint
        self.instance.endpoint = endpoint

    def clean_path(self) -> str:
        path: str = self.cleaned_data["path"]
        try:
            check_url(self.endpoint.file_url(path), field="path")
        except InvalidParams as exc:
            raise forms.ValidationError(exc.message) from None
        # The (endpoint, path) constraint is not checked by the form: endpoint is not a field.
        if self.endpoint.files.filter(path=path).exists():
            raise forms.ValidationError(f"{self.endpoint.name} already has a test file {path}")
        return path


class VantagePointForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = VantagePoint
        fields = ["name", "location", "description"]
        help_texts = {
            "name": "Workers started with `celery -A workers worker -Q vantage.NAME` measure "
            "from here; renaming it changes the queue they must listen on."
        }
