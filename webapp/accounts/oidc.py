"""Single sign-on through an OpenID Connect provider (INDIGO IAM, CERN SSO), with
mozilla-django-oidc doing the authorization code flow (state, nonce, PKCE).

What is ours: the provider's endpoints come from its discovery document (only the issuer
is configured); an ID token must name our issuer and client (the library checks neither);
users are matched by (issuer, subject) and made with a role mapped from their groups
(`sso_user_sign_in`); a refusal says why on the login page. Off, every view here is a 404
and the backend authenticates nobody.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from webapp.accounts.roles import ROLES
from webapp.accounts.services import SignInRefused, sso_user_sign_in

log = logging.getLogger(__name__)

DISCOVERY_TTL_S = 3600
# mozilla-django-oidc's endpoint settings, and where the discovery document has them.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
REFUSAL_ATTRIBUTE = "fedprobe_sso_refusal"


def sso_enabled() -> bool:
    return bool(settings.FEDPROBE_OIDC_ISSUER)


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be had, or is not the issuer's."""


_discovery_lock = threading.Lock()
_discovered: dict[str, tuple[float, dict[str, Any]]] = {}


def provider_configuration(issuer: str) -> dict[str, Any]:
    """The issuer's discovery document, fetched at most once an hour per process."""
    with _discovery_lock:
        cached = _discovered.get(issuer)
        if cached is not None and time.monotonic() - cached[0] < DISCOVERY_TTL_S:
            return cached[1]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as failed:
        raise ProviderUnavailable(f"{url}: {failed}") from failed
    if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
        raise ProviderUnavailable(f"{url} is not the discovery document of {issuer}")
    missing = [key for key in DISCOVERED.values() if not document.get(key)]
    if missing:
        raise ProviderUnavailable(f"{url} has no {', '.join(missing)}")
    with _discovery_lock:
        _discovered[issuer] = (time.monotonic(), document)
    return document


def forget_provider_configuration() -> None:
    with _discovery_lock:
        _discovered.clear()


def oidc_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, its endpoints from the discovery document."""
    if attr in DISCOVERED:
        return provider_configuration(settings.FEDPROBE_OIDC_ISSUER)[DISCOVERED[attr]]
    return import_from_settings(attr, *default)


def mapped_role(claims: dict[str, Any]) -> str | None:
    """The highest role the user's groups map to, else the default role (None: refused)."""
    groups = claims.get(settings.FEDPROBE_OIDC_ROLE_CLAIM) or []
    if isinstance(groups, str):
        groups = [groups]
    roles = {settings.FEDPROBE_OIDC_ROLE_MAP.get(str(group)) for group in groups}
    held = [role for role in ROLES if role in roles]
    if held:
        return held[-1]
    default = settings.FEDPROBE_OIDC_DEFAULT_ROLE
    return None if default == "none" else str(default)


class SsoBackend(OIDCAuthenticationBackend):
    """Signs in the provider's users on the callback; every other login goes to ModelBackend."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The library reads its settings here, on every request that loads the backends:
        # we read them (and discover the endpoints) only on a sign-in callback.
        ModelBackend.__init__(self, *args, **kwargs)
        from django.contrib.auth import get_user_model

        self.UserModel = get_user_model()

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> AbstractBaseUser | None:
        # Only the callback passes a nonce: a login form posted to ?code=...&state=... is not
        # a sign-in through the provider.
        if request is None or "nonce" not in kwargs or not sso_enabled():
            return None
        try:
            OIDCAuthenticationBackend.__init__(self)
        except ProviderUnavailable as failed:
            raise SuspiciousOperation(f"provider unavailable: {failed}") from failed
        return super().authenticate(request, **kwargs)  # type: ignore[no-any-return]

    def get_user(self, user_id: int) -> AbstractBaseUser | None:
        # The library's get_user keeps a deactivated user's session alive; Django's does not.
        return ModelBackend.get_user(self, user_id)

    def _verify_jws(self, payload: str | bytes, key: Any) -> dict[str, Any]:
        """The token's signature with the provider's key and algorithm, its expiry, and that
        it was issued by our issuer to our client (which the library does not check)."""
        try:
            algorithm = jwt.get_unverified_header(payload).get("alg")
        except jwt.InvalidTokenError as bad:
            raise SuspiciousOperation(f"ID token refused: {bad}") from bad
        if algorithm != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(
                f"ID token refused: signed with {algorithm!r}, not {self.OIDC_RP_SIGN_ALGO}"
            )
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[algorithm],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.FEDPROBE_OIDC_ISSUER,
                leeway=60,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as bad:
            raise SuspiciousOperation(f"ID token refused: {bad}") from bad

    def get_userinfo(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """The ID token's claims with the userinfo endpoint's (groups are often only there);
        both must be about the same subject."""
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("userinfo is about another subject than the ID token")
        return {**payload, **userinfo}

    def get_or_create_user(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> AbstractBaseUser | None:
        claims = self.get_userinfo(access_token, id_token, payload)
        username = claims.get(settings.FEDPROBE_OIDC_USERNAME_CLAIM)
        if not isinstance(username, str) or not username:
            raise SuspiciousOperation(
                f"the provider's claims have no {settings.FEDPROBE_OIDC_USERNAME_CLAIM}"
            )
        try:
            return sso_user_sign_in(
                issuer=settings.FEDPROBE_OIDC_ISSUER,
                subject=str(claims["sub"]),
                username=username,
                email=str(claims.get("email") or ""),
                role=mapped_role(claims),
                provider=settings.FEDPROBE_OIDC_NAME,
            )
        except SignInRefused as refused:
            setattr(self.request, REFUSAL_ATTRIBUTE, str(refused))
            return None


class SsoAuthenticateView(OIDCAuthenticationRequestView):
    """`GET /accounts/oidc/authenticate/?next=...`: off to the provider."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the endpoints are discovered in get(), not here

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404("single sign-on is not configured")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except ProviderUnavailable as failed:
            log.warning("single sign-on: %s", failed)
            messages.error(
                request,
                f"{settings.FEDPROBE_OIDC_NAME} cannot be reached: try again later, or log "
                "in with a password.",
            )
            return HttpResponseRedirect(reverse("login"))
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)  # type: ignore[no-any-return]


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """`GET /accounts/oidc/callback/?code=...&state=...`: where the provider sends users back.

    The library checks the state against the session (and the backend the nonce and the
    token); any failure sends the user to the login page with the reason.
    """

    get_settings = staticmethod(oidc_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not sso_enabled():
            raise Http404("single sign-on is not configured")
        try:
            return super().get(request)  # type: ignore[no-any-return]
        except (SuspiciousOperation, requests.RequestException, jwt.PyJWTError, KeyError) as failed:
            log.warning("single sign-on refused: %s", failed)
            return self.login_failure()

    def login_failure(self) -> HttpResponse:
        error = self.request.GET.get("error", "")[:64]
        unverified = "its answer could not be verified; try again"
        reason = getattr(self.request, REFUSAL_ATTRIBUTE, None) or (
            f"it answered {error}" if error.isidentifier() else unverified
        )
        messages.error(
            self.request, f"Signing in with {settings.FEDPROBE_OIDC_NAME} failed: {reason}."
        )
        return HttpResponseRedirect(reverse("login"))
