"""When an endpoint's credential stops working, said before its runs fail: a token or proxy
that expires within the warning window (FEDPROBE_CREDENTIAL_WARN_DAYS) or has expired, or a
stored credential that no longer parses (docs/watch.md "Credentials expiring")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from webapp.sites.models import Endpoint
from workers.engine.credentials import CredentialKind

KIND_WORDS = {
    CredentialKind.TOKEN.value: "token",
    CredentialKind.X509_PROXY.value: "X.509 proxy",
    CredentialKind.OAUTH_CLIENT.value: "oauth client",
}


@dataclass(frozen=True)
class CredentialExpiry:
    """An endpoint's credential that fails (or will fail) its runs, and when."""

    endpoint_id: int
    endpoint_name: str
    site_name: str
    kind: str
    expires_at: datetime | None  # None: it does not parse, or its issuer refused
    problem: str  # "" for a plain expiry; else what is wrong
    now: datetime

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= self.now

    @property
    def message(self) -> str:
        """'the token of endpoint X expires in 3 days (2026-11-30 12:00 UTC): its runs will
        fail from then'."""
        what = f"the {KIND_WORDS.get(self.kind, self.kind)} of endpoint {self.endpoint_name}"
        if self.expires_at is None:
            return f"{what}: {self.problem}: its runs fail"
        stamp = self.expires_at.strftime("%Y-%m-%d %H:%M UTC")
        if self.expired:
            return (
                f"{what} expired {_span(self.now - self.expires_at)} ago ({stamp}): its runs fail"
            )
        return (
            f"{what} expires in {_span(self.expires_at - self.now)} ({stamp}): "
            "its runs will fail from then"
        )


def endpoint_credential_expiry(
    endpoint: Endpoint, *, now: datetime, warn_days: int | None = None
) -> CredentialExpiry | None:
    """The endpoint's credential problem within `warn_days` (default the setting), or None."""
    days = settings.FEDPROBE_CREDENTIAL_WARN_DAYS if warn_days is None else warn_days
    info = endpoint.credential_info()
    problem = info.get("problem") or ""
    expires = info.get("expires_at")
    if not problem and not expires:
        return None
    expires_at = datetime.fromisoformat(expires) if expires and not problem else None
    if expires_at is not None and expires_at > now + timedelta(days=days):
        return None
    return CredentialExpiry(
        endpoint_id=endpoint.pk,
        endpoint_name=endpoint.name,
        site_name=endpoint.site.name,
        kind=str(info.get("kind", "")),
        expires_at=expires_at,
        problem=problem,
        now=now,
    )


def _span(delta: timedelta) -> str:
    """A duration in the largest whole unit: '3 days', '5 h', '12 min'."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds >= 2 * 86400:
        return f"{seconds // 86400} days"
    if seconds >= 3600:
        return f"{seconds // 3600} h"
    return f"{max(1, seconds // 60)} min"
