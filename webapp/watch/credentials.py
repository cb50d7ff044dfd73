"""Credentials that will fail a scheduled campaign's runs (docs/watch.md "Credentials
expiring"): the tokens and proxies of the enabled endpoints of scheduled, unpaused campaigns
that expire within FEDPROBE_CREDENTIAL_WARN_DAYS or have expired, stored credentials that
no longer parse, and oauth clients whose issuer refused or could not be reached on the
endpoint's latest run. The watch turns them into alerts; home lists them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import JSONField, OuterRef, Subquery

from webapp.campaigns.models import Campaign, Run
from webapp.sites.credential_expiry import CredentialExpiry, endpoint_credential_expiry
from webapp.sites.models import Endpoint
from workers.engine.credentials import CredentialKind
from workers.engine.errors import CREDENTIAL_PHASE


@dataclass(frozen=True)
class ExpiringCredential:
    """One endpoint's failing credential and the scheduled campaigns whose runs it fails."""

    expiry: CredentialExpiry
    campaigns: tuple[str, ...]

    @property
    def message(self) -> str:
        return f"{self.expiry.message} (campaigns: {', '.join(self.campaigns)})"


def credentials_expiring(
    *, now: datetime, warn_days: int | None = None
) -> list[ExpiringCredential]:
    """The failing credentials of the enabled endpoints of scheduled, unpaused campaigns,
    the soonest first (those that do not parse or whose issuer refused: first). Three
    queries."""
    campaigns = Campaign.objects.exclude(schedule="").filter(schedule_paused_at__isnull=True)
    endpoints = (
        Endpoint.objects.filter(enabled=True, campaigns__in=campaigns)
        .exclude(credential_kind=CredentialKind.NONE)
        .exclude(credential="")
        .select_related("site")
        .prefetch_related("campaigns")
        .distinct()
        .annotate(latest_errors=_latest_errors())
    )
    found = []
    for endpoint in endpoints:
        expiry = _expiry(endpoint, now=now, warn_days=warn_days)
        if expiry is not None:
            names = sorted(c.name for c in endpoint.campaigns.all() if _scheduled(c))
            found.append(ExpiringCredential(expiry, tuple(names)))
    return sorted(found, key=_soonest)


def _expiry(endpoint: Endpoint, *, now: datetime, warn_days: int | None) -> CredentialExpiry | None:
    expiry = endpoint_credential_expiry(endpoint, now=now, warn_days=warn_days)
    refusal = _credential_refusal(getattr(endpoint, "latest_errors", None))
    if expiry is None and refusal and endpoint.credential_kind == CredentialKind.OAUTH_CLIENT:
        # The issuer refused the client (or was unreachable) on the latest run.
        return CredentialExpiry(
            endpoint_id=endpoint.pk,
            endpoint_name=endpoint.name,
            site_name=endpoint.site.name,
            kind=endpoint.credential_kind,
            expires_at=None,
            problem=f"its latest run got no token: {refusal}",
            now=now,
        )
    return expiry


def _latest_errors() -> Subquery:
    """The errors of the endpoint's latest ended run."""
    latest = Run.objects.filter(endpoint=OuterRef("pk"), status__in=Run.Status.ENDED).order_by(
        "-created_at", "-id"
    )
    return Subquery(latest.values("errors")[:1], output_field=JSONField())


def _credential_refusal(errors: object) -> str:
    """The first error's message if it is a credential problem found before any request."""
    if not isinstance(errors, list) or not errors or not isinstance(errors[0], dict):
        return ""
    first = errors[0]
    return str(first.get("message", "")) if first.get("phase") == CREDENTIAL_PHASE else ""


def _scheduled(campaign: Campaign) -> bool:
    return bool(campaign.schedule) and not campaign.schedule_paused


def _soonest(found: ExpiringCredential) -> tuple[int, str, str]:
    expires_at = found.expiry.expires_at
    return (
        0 if expires_at is None else 1,
        expires_at.isoformat() if expires_at else "",
        found.expiry.endpoint_name,
    )
