"""Rate limits: login attempts per client address, API writes per user.

Rates are settings (REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], from FEDPROBE_THROTTLE_LOGIN
and FEDPROBE_THROTTLE_WRITES); counts live in the default cache, shared by every web process
when FEDPROBE_CACHE_URL names a Redis server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

if TYPE_CHECKING:
    # rest_framework.views loads DEFAULT_THROTTLE_CLASSES, this module among them.
    from rest_framework.views import APIView


class LoginRateThrottle(SimpleRateThrottle):
    """Login attempts (pages and API) per client address."""

    scope = "login"

    def allow_page_request(self, request: HttpRequest) -> bool:
        """allow_request for a Django page (not an API view): the count is keyed by the client
        address alone, which DRF's Request reads from the Django request it wraps."""
        from rest_framework.views import APIView

        return self.allow_request(Request(request), APIView())

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class WriteRateThrottle(SimpleRateThrottle):
    """API writes per user (per address when anonymous); reads are not counted."""

    scope = "writes"

    def allow_request(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: APIView) -> str:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            ident = f"user-{user.pk}"
        else:
            ident = f"addr-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
