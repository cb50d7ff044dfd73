"""The two refusals Django answers with a bare page of its own, answered as pages of the site:
a form sent with a stale CSRF token (logged in again in another tab, a page left open for a
day) and a GET on an address that only a button may POST to (a bookmark, the history)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve, reverse

# Form fields whose value may be a secret, by name: never shown back (a webhook's URL may
# carry its secret too, and an endpoint's URL a password).
_SECRET_NAME = re.compile(
    r"password|passwd|secret|token|credential|key|authz|url|csrf", re.IGNORECASE
)


@dataclass(frozen=True)
class TypedField:
    """One field of a refused form, shown back so that what was typed is not lost."""

    name: str
    value: str


def typed_fields(request: HttpRequest) -> tuple[list[TypedField], list[str]]:
    """The refused form's fields that may be shown back, and the names of those kept hidden
    (files are not kept at all)."""
    shown: list[TypedField] = []
    hidden: list[str] = []
    for name in request.POST:
        if _SECRET_NAME.search(name):
            if not name.startswith("csrf"):
                hidden.append(name)
            continue
        values = [value for value in request.POST.getlist(name) if value.strip()]
        if values:
            shown.append(TypedField(name, ", ".join(values)))
    return shown, hidden


def _same_site_referer(request: HttpRequest) -> str:
    """The page the form was on, if the browser said so and it is one of ours."""
    referer = urlsplit(request.headers.get("Referer", ""))
    if referer.netloc != request.get_host() or not referer.path.startswith("/"):
        return ""
    return referer.path + (f"?{referer.query}" if referer.query else "")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """settings.CSRF_FAILURE_VIEW: what happened, what to do, and what was typed."""
    shown, hidden = typed_fields(request) if request.method == "POST" else ([], [])
    context = {
        "back": _same_site_referer(request) or request.path,
        "shown": shown,
        "hidden": hidden,
        "no_cookie": "cookie" in reason.lower(),
    }
    return render(request, "403_csrf.html", context, status=403)


def _page_above(path: str) -> str:
    """The nearest page above an action's address (/campaigns/1/cancel/ -> /campaigns/1/):
    where its button is; home if none above it is a page."""
    parts = path.strip("/").split("/")
    while len(parts) > 1:
        parts.pop()
        candidate = "/" + "/".join(parts) + "/"
        try:
            resolve(candidate)
        except Resolver404:
            continue
        return candidate
    return reverse("home")


class MethodNotAllowedPageMiddleware:
    """A page instead of Django's empty 405 for people (the API keeps its JSON answer)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or request.path.startswith("/api/"):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        action = request.path.strip("/").rsplit("/", 1)[-1].replace("-", " ")
        context = {"action": action, "page": _page_above(request.path), "path": request.path}
        page = render(request, "405.html", context, status=405)
        if "Allow" in response:
            page["Allow"] = response["Allow"]
        return page
