"""Tokens for unattended probes: the OAuth2 client-credentials grant (RFC 6749, 4.4), as an
INDIGO IAM or CILogon issuer answers it, with a cache that hands out a token until shortly
before it expires.

WLCG tokens live minutes to hours, so a nightly probe cannot hold a static one: it holds a
client id and secret and asks the issuer's token endpoint before each run.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from workers.engine.credentials import Credential
from workers.engine.egress import EgressPolicy
from workers.engine.errors import CREDENTIAL_PHASE, ErrorClass, InvalidParams, ProbeError

# A cached token is handed out while it has at least this long to live (and what the run
# asks for on top): fetching a fresh one costs a round trip to the issuer, no more.
REFRESH_MARGIN_S = 120.0
# A token request takes at most this long, and never longer than the run has (time_s).
TOKEN_REQUEST_TIMEOUT_S = 30.0
# An issuer that gave no token is not asked again for this long: the runs of a campaign
# follow each other within seconds, and each would wait for it (or be refused) again. They
# fail at once with its first answer; a changed client (another secret) is asked at once.
ISSUER_RETRY_AFTER_S = 300.0
_FIELDS = ("token_url", "client_id", "client_secret", "scope", "audience")


@dataclass(frozen=True)
class OAuthClient:
    """What an `oauth-client` credential holds: the issuer's token endpoint, the client's id
    and secret, and the scope and audience its tokens are asked for."""

    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str = ""
    audience: str = ""

    @classmethod
    def from_json(cls, text: str) -> OAuthClient:
        """Parse the stored form (a JSON object); InvalidParams names what is wrong."""
        try:
            data = json.loads(text)
        except ValueError:
            raise InvalidParams(
                "credential",
                "an oauth-client credential is a JSON object with token_url, client_id, "
                "client_secret, scope and audience",
            ) from None
        if not isinstance(data, dict):
            raise InvalidParams("credential", "an oauth-client credential is a JSON object")
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise InvalidParams("credential", f"unknown fields {unknown}: use {list(_FIELDS)}")
        for name in _FIELDS:
            if not isinstance(data.get(name, ""), str):
                raise InvalidParams("credential", f"{name} must be text")
        client = cls(**{name: data.get(name, "").strip() for name in _FIELDS})
        client.validate()
        return client

    def validate(self) -> None:
        for name in ("token_url", "client_id", "client_secret"):
            if not getattr(self, name):
                raise InvalidParams("credential", f"{name} is missing")
        parts = urlsplit(self.token_url)
        if parts.scheme != "https" or not parts.hostname:
            raise InvalidParams("credential", "token_url must be an https:// URL")

    def to_json(self) -> str:
        """The stored form (it holds the secret: only for the encrypted field)."""
        return json.dumps({name: getattr(self, name) for name in _FIELDS})

    def public_json(self) -> dict[str, str]:
        """Everything but the secret."""
        return {name: getattr(self, name) for name in _FIELDS if name != "client_secret"}

    @property
    def cache_key(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()


def fetch_token(
    client: OAuthClient,
    *,
    egress: EgressPolicy | None,
    ca_dir: str | None,
    timeout_s: float = TOKEN_REQUEST_TIMEOUT_S,
) -> tuple[Credential, float]:
    """A fresh token from the issuer and when it expires (time.time()); ProbeError class
    auth when the issuer refuses, tls / refused / timeout as for any other connection."""
    from workers.engine.httpclient import ClientConfig, send_form

    what = f"token request to {client.token_url}"
    form = {"grant_type": "client_credentials"}
    if client.scope:
        form["scope"] = client.scope
    if client.audience:
        form["audience"] = client.audience
    config = ClientConfig.for_tls(egress=egress, ca_dir=ca_dir)
    asked_at = time.time()
    status, body = send_form(
        config,
        client.token_url,
        form,
        basic_auth=(client.client_id, client.client_secret),
        timeout_s=timeout_s,
        what=what,
    )
    answer = _json_object(body)
    if status != 200:
        error = answer.get("error_description") or answer.get("error") or body[:200].decode()
        error_class = ErrorClass.AUTH if status in (400, 401, 403) else ErrorClass.SERVER_ERROR
        raise ProbeError(error_class, f"{what}: {status}: {error}")
    token = answer.get("access_token")
    if not isinstance(token, str) or not token:
        raise ProbeError(ErrorClass.SERVER_ERROR, f"{what}: the answer has no access_token")
    credential = Credential.token(token)
    expires_at = credential.expires_at
    if expires_at is not None:
        return credential, expires_at.timestamp()
    lifetime = answer.get("expires_in")
    seconds = float(lifetime) if isinstance(lifetime, int | float) else 3600.0
    return credential, asked_at + seconds


class TokenCache:
    """Tokens by client, reused until REFRESH_MARGIN_S before they expire; thread-safe."""

    def __init__(
        self, margin_s: float = REFRESH_MARGIN_S, retry_after_s: float = ISSUER_RETRY_AFTER_S
    ) -> None:
        self._margin_s = margin_s
        self._retry_after_s = retry_after_s
        self._tokens: dict[str, tuple[Credential, float]] = {}
        self._failures: dict[str, tuple[ProbeError, float]] = {}  # by client: why, when
        self._lock = threading.Lock()

    def token(
        self,
        client: OAuthClient,
        *,
        egress: EgressPolicy | None,
        ca_dir: str | None,
        valid_for_s: float = 0.0,
        time_s: float = TOKEN_REQUEST_TIMEOUT_S,
    ) -> Credential:
        """A token that lives at least `valid_for_s` + the margin from now, asked for within
        `time_s` (the run's time left; at most TOKEN_REQUEST_TIMEOUT_S); ProbeError (phase
        credential) when the issuer gives none, now or in the last `retry_after_s`."""
        key = client.cache_key
        with self._lock:
            cached = self._tokens.get(key)
            if cached is not None and cached[1] - time.time() > self._margin_s + valid_for_s:
                return cached[0]
            failed = self._failures.get(key)
            if failed is not None and time.monotonic() - failed[1] < self._retry_after_s:
                first, ago = failed[0], time.monotonic() - failed[1]
                raise ProbeError(
                    first.error_class,
                    f"{first.message} (not asked again: it gave no token {ago:.0f} s ago; it "
                    f"is asked again {self._retry_after_s:.0f} s after)",
                    phase=CREDENTIAL_PHASE,
                )
            try:
                credential, expires_at = fetch_token(
                    client,
                    egress=egress,
                    ca_dir=ca_dir,
                    timeout_s=max(0.1, min(time_s, TOKEN_REQUEST_TIMEOUT_S)),
                )
            except ProbeError as exc:
                # No request reached the endpoint: a fault of the tester's credential.
                self._failures[key] = (exc, time.monotonic())
                raise ProbeError(exc.error_class, exc.message, phase=CREDENTIAL_PHASE) from exc
            self._failures.pop(key, None)
            self._tokens[key] = (credential, expires_at)
            return credential

    def forget(self) -> None:
        with self._lock:
            self._tokens.clear()
            self._failures.clear()


def _json_object(body: bytes) -> dict[str, object]:
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
