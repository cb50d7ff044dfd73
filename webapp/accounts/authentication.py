"""`Authorization: Token KEY` for the API, checked against the stored digests."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from webapp.accounts.models import ApiToken, api_key_digest


class ApiTokenAuthentication(TokenAuthentication):
    """DRF's header parsing and answers (401 with `WWW-Authenticate: Token`), our tokens.

    The row is found by the key's digest through a unique index: what a lookup's timing
    could tell is about the digest, which says nothing usable about a key.
    """

    def authenticate_credentials(self, key: str) -> tuple[AbstractBaseUser, ApiToken]:
        token = ApiToken.objects.select_related("user").filter(digest=api_key_digest(key)).first()
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        token.mark_used(now=timezone.now())
        return token.user, token
