"""Pages every part of the application shares: the health check, the favicon and the error
pages. The access mixins are the accounts app's (webapp/accounts/access.py)."""

from __future__ import annotations

from django.db import connection
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponsePermanentRedirect,
    HttpResponseServerError,
    JsonResponse,
)
from django.shortcuts import render
from django.template import loader
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe


@never_cache
@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    """For load balancers and compose: 200 when the database answers, else 503. No login."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        return JsonResponse({"status": "unavailable", "database": "down"}, status=503)
    return JsonResponse({"status": "ok"})


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """Pages link the SVG icon; clients that ask for /favicon.ico anyway are sent to it."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


# Error pages: styled like every other page, with the reason where there is one.


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """403 with what PermissionDenied said: what the page needs and what the user is."""
    context = {"reason": str(exception) if exception.args else ""}
    return render(request, "403.html", context, status=403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404; an Http404's own message ("No Campaign matches the given query.") is the reason,
    the resolver's (a dict of the patterns tried) is not shown."""
    message = exception.args[0] if exception.args else ""
    context = {"reason": message if isinstance(message, str) else "", "path": request.path}
    return render(request, "404.html", context, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """500 without the request's context (no user, no database): the page renders even when
    the database or a context processor is what failed."""
    try:
        body = loader.get_template("500.html").render()
    except Exception:
        body = "<!doctype html><title>Server error</title><h1>Server error</h1>"
    return HttpResponseServerError(body)
