"""Template filters of the regression pages: what a regression was blamed on, in words
({{ regression|blamed_on }} -> "vantage point far"), and its change with its sign."""

from __future__ import annotations

from django import template

from webapp.watch.models import Regression

register = template.Library()
Blame = Regression.Blame


@register.filter
def blamed_on(regression: Regression) -> str:
    """The thing the regression was blamed on: "the site T2_X", "vantage point far",
    "protocol root", "a credential (...)"; "" when the watch blamed nothing."""
    target = (regression.blame or {}).get("target", "")
    site = regression.site or (regression.endpoint.site if regression.endpoint else None)
    if target == Blame.SITE:
        return f"the site {site.name}" if site else "the site"
    if target == Blame.VANTAGE_POINT:
        name = regression.vantage_point.name if regression.vantage_point else ""
        return f"vantage point {name}".strip()
    if target == Blame.PROTOCOL:
        return f"protocol {regression.protocol}".strip()
    if target == Blame.CREDENTIAL:
        credential = (regression.blame or {}).get("credential", "")
        return f"a credential ({credential})" if credential else "a credential"
    if target == "campaign":  # a scheduled slot that launched nothing
        return f"campaign {(regression.blame or {}).get('campaign', '')}".strip()
    return str(target)


@register.filter
def window_words(window: object) -> str:
    """A detector's window in words: "2026-10-01 to 2026-10-07", one night "2026-10-01", a
    span of times "2026-03-10 02:00 to 2026-03-10 06:00 UTC"; "—" when there is none."""
    if not isinstance(window, list | tuple) or len(window) != 2:
        return "—"
    first, last = (_moment_words(str(part)) for part in window)
    utc = " UTC" if len(str(window[0])) > len("2026-10-01") else ""
    return f"{first}{utc}" if first == last else f"{first} to {last}{utc}"


def _moment_words(text: str) -> str:
    """A night as is, an ISO time (UTC) to the minute: "2026-03-10 02:00"."""
    return text if len(text) <= len("2026-10-01") else text[:16].replace("T", " ")


@register.filter
def signed_pct(value: float | None) -> str:
    """A change in percent with its sign: -40.2 -> "-40%", 12.5 -> "+12%"; None -> "—"."""
    if value is None:
        return "—"
    return f"{value:+.0f}%"


@register.filter
def version_words(change: object) -> str:
    """A version change near the change point (versions.py: {kind, version, first_seen,
    previous}) in words: "server version 5.6.2 (was 5.6.1), first seen 2026-11-20"; a change
    stored as text is shown as it is."""
    if not isinstance(change, dict):
        return str(change)
    words = f"{change.get('kind', 'server')} version {change.get('version', '?')}"
    if change.get("previous"):
        words += f" (was {change['previous']})"
    if change.get("first_seen"):
        words += f", first seen {change['first_seen']}"
    return words
