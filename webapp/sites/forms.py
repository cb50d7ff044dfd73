"""Forms for sites, endpoints, test files and vantage points (the models' validators apply)."""

from __future__ import annotations

from typing import Any

from django import forms

from webapp.sites.credentials import credential_change, oauth_client_fields
from webapp.sites.file_lookup import ADLER32_HEX, TestFileFill, endpoint_file_fill
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint
from workers.engine.credentials import CredentialKind
from workers.engine.errors import InvalidParams
from workers.engine.oauth import OAuthClient
from workers.engine.urls import check_url


class SiteForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Site
        fields = ["name", "tier", "storage_system", "location"]


class SecretTextarea(forms.Textarea):
    """A textarea that never renders a value: neither the stored credential nor one typed
    into a form that came back with an error."""

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        return super().get_context(name, None, attrs)


def _secret_textarea() -> SecretTextarea:
    return SecretTextarea(
        attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false", "class": "secret"}
    )


class EndpointForm(forms.ModelForm):  # type: ignore[type-arg]
    """The credential is write-only: never rendered, kept when left empty, removed on request.

    Its kind decides what is read: the `credential` text for a token or an X.509 proxy, the
    oauth_* fields for an OAuth client (its secret, too, kept when left empty). The rule on
    what a kind, a credential and a protocol allow is the model's (Endpoint.clean).
    """

    credential = forms.CharField(
        required=False,
        strip=False,
        widget=_secret_textarea(),
        help_text="A bearer token, or an X.509 proxy file's text (PEM: certificates and key); "
        "stored encrypted, never shown. Leave empty to keep the stored one.",
    )
    credential_hosts = forms.CharField(
        required=False,
        label="Credential may also go to",
        help_text=f"{Endpoint._meta.get_field('credential_hosts').help_text}; separated by "
        "spaces or commas (pool7.example.org, .example.org).",
    )
    clear_credential = forms.BooleanField(
        required=False,
        label="Clear the stored credential",
        help_text="Remove it: the endpoint is then measured anonymously.",
    )
    oauth_token_url = forms.URLField(
        required=False,
        label="Token URL",
        assume_scheme="https",
        help_text="The issuer's token endpoint (https://), asked with the client-credentials "
        "grant before each run.",
    )
    oauth_client_id = forms.CharField(required=False, label="Client id")
    oauth_client_secret = forms.CharField(
        required=False,
        label="Client secret",
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted, never shown. Leave empty to keep the stored one.",
    )
    oauth_scope = forms.CharField(
        required=False,
        label="Scope",
        help_text="Space-separated, e.g. storage.read:/ (WLCG token profile).",
    )
    oauth_audience = forms.CharField(
        required=False, label="Audience", help_text="e.g. https://wlcg.cern.ch/jwt/v1/any"
    )

    OAUTH_FIELDS = ("token_url", "client_id", "client_secret", "scope", "audience")

    class Meta:
        model = Endpoint
        # `credential` is not a model field here: clean() decides whether to change it.
        fields = [
            "site",
            "name",
            "protocol",
            "base_url",
            "role",
            "enabled",
            "scratch_path",
            "credential_kind",
            "credential_hosts",
            "credential_teams",
        ]
        labels = {
            "credential_kind": "Credential kind",
            "credential_teams": "Credential shared with",
        }
        widgets = {"credential_teams": forms.CheckboxSelectMultiple}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # What is stored before this form changes the instance (the page shows it).
        self.stored_kind = self.instance.credential_kind
        self.stored_credential = self.instance.credential or ""
        self.stored_info = self.instance.credential_info()
        self.initial["credential_hosts"] = " ".join(self.instance.credential_hosts or [])
        stored_client = oauth_client_fields(kind=self.stored_kind, text=self.stored_credential)
        for name, value in stored_client.items():
            self.initial.setdefault(f"oauth_{name}", value)
        # A request without it (not a browser's) keeps the stored kind, as the API does.
        self.fields["credential_kind"].required = False

    def clean_credential_hosts(self) -> list[str]:
        """The text as the model stores it: a list (Endpoint.clean checks each)."""
        return str(self.cleaned_data.get("credential_hosts") or "").replace(",", " ").split()

    def endpoint_fields(self) -> list[forms.BoundField]:
        credential = ("credential_kind", "credential_hosts", "credential_teams")
        return [self[name] for name in self._meta.fields or () if name not in credential]

    def credential_fields(self) -> list[forms.BoundField]:
        names = (
            "credential_kind",
            "credential",
            "clear_credential",
            "credential_hosts",
            "credential_teams",
        )
        return [self[name] for name in names]

    def oauth_fields(self) -> list[forms.BoundField]:
        return [self[f"oauth_{name}"] for name in self.OAUTH_FIELDS]

    def clean(self) -> dict[str, Any]:
        super().clean()
        change = self._credential_change()
        # A change already refused keeps what is stored, so that nothing else is said of it.
        kind, text = change or (self.stored_kind, self.stored_credential)
        # Endpoint.clean (which the model form runs next) validates and normalizes them.
        self.cleaned_data["credential_kind"] = kind
        self.instance.credential = text
        return self.cleaned_data

    def _credential_change(self) -> tuple[str, str] | None:
        data = self.cleaned_data
        kind = data.get("credential_kind") or None  # not given: the stored one
        typed = data.get("credential") or ""
        if data.get("clear_credential"):
            if typed or data.get("oauth_client_secret"):
                self.add_error("credential", "give a new credential or clear it, not both")
                return None
            return CredentialKind.NONE, ""
        if (kind or self.stored_kind) == CredentialKind.OAUTH_CLIENT:
            return self._oauth_client_change(typed)
        return credential_change(
            stored_kind=self.stored_kind,
            stored=self.stored_credential,
            kind=kind,
            text=typed if typed.strip() else None,
        )

    def _oauth_client_change(self, typed: str) -> tuple[str, str] | None:
        """The oauth client of the oauth_* fields (the stored secret when none is given),
        with what is wrong named by its field."""
        if typed.strip():
            self.add_error("credential", "an OAuth client is given in its own fields below")
            return None
        data = self.cleaned_data
        fields = {name: (data.get(f"oauth_{name}") or "").strip() for name in self.OAUTH_FIELDS}
        if not fields["client_secret"] and self.stored_kind == CredentialKind.OAUTH_CLIENT:
            fields["client_secret"] = _stored_secret(self.stored_credential)
        client = OAuthClient(**fields)
        try:
            client.validate()
        except InvalidParams as exc:
            field = next((n for n in self.OAUTH_FIELDS if exc.message.startswith(n)), "token_url")
            self.add_error(f"oauth_{field}", exc.message)
            return None
        return CredentialKind.OAUTH_CLIENT, client.to_json()


def _stored_secret(stored: str) -> str:
    try:
        return OAuthClient.from_json(stored).client_secret
    except InvalidParams:
        return ""


class TestFileForm(forms.ModelForm):  # type: ignore[type-arg]
    """A test file of one endpoint (given to the form, not chosen in it). A blank size or
    adler32 is asked of the server, a typed one checked against it (file_lookup.py).

    With `ask_server=False` (a configuration import: the file states what is wanted, and a
    federation's worth of files must not wait on each server in turn) the values are taken as
    written: the size is required and a blank adler32 stays blank."""

    __test__ = False

    size = forms.IntegerField(
        min_value=1, required=False, help_text="bytes; leave blank to ask the server"
    )
    fill: TestFileFill | None = None

    class Meta:
        model = TestFile
        fields = ["path", "size", "adler32", "is_default"]
        labels = {"is_default": "Default test file of the endpoint"}

    def __init__(
        self, *args: Any, endpoint: Endpoint, ask_server: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.endpoint = endpoint
        self.instance.endpoint = endpoint
        self.ask_server = ask_server
        if not ask_server:
            self.fields["size"].required = True

    def clean_path(self) -> str:
        path: str = self.cleaned_data["path"]
        try:
            check_url(self.endpoint.file_url(path), field="path")
        except InvalidParams as exc:
            raise forms.ValidationError(exc.message) from None
        # The (endpoint, path) constraint is not checked by the form: endpoint is not a field
        # (a file being changed, as a configuration import does, keeps its own path).
        if self.endpoint.files.filter(path=path).exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError(f"{self.endpoint.name} already has a test file {path}")
        return path

    def clean_adler32(self) -> str:
        adler32: str = self.cleaned_data["adler32"].strip().lower()
        if adler32 and not ADLER32_HEX.fullmatch(adler32):
            raise forms.ValidationError("8 hex digits, or blank to ask the server")
        return adler32

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if self.errors or not self.ask_server:  # a bad path or value, or taken as written
            return cleaned
        self.fill = endpoint_file_fill(
            endpoint=self.endpoint,
            path=cleaned["path"],
            size=cleaned.get("size"),
            adler32=cleaned.get("adler32") or "",
        )
        for name, message in self.fill.errors.items():
            self.add_error(name or None, message)
        cleaned.update(size=self.fill.size, adler32=self.fill.adler32)
        return cleaned


class VantagePointForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = VantagePoint
        fields = ["name", "location", "description", "max_parallel_runs"]
        help_texts = {
            "name": "Workers started with `celery -A webapp worker -Q vantage.NAME` measure "
            "from here; renaming it changes the queue they must listen on."
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Omitted (an older page, a script): kept as it is (1 for a new vantage point).
        self.fields["max_parallel_runs"].required = False

    def clean_max_parallel_runs(self) -> int:
        value = self.cleaned_data.get("max_parallel_runs")
        return int(value) if value is not None else self.instance.max_parallel_runs

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        refusal = self.instance.rename_refusal(name)
        if refusal:
            raise forms.ValidationError(refusal)
        return name
