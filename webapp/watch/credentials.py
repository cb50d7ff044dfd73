"""Credentials that will fail a scheduled campaign's runs (docs/watch.md "Credentials
expiring"): the tokens and proxies of the enabled endpoints of scheduled, unpaused campaigns
that expire within FEDPROBE_CREDENTIAL_WARN_DAYS or have expired, stored credentials that
no longer parse, and oauth clients whose issuer refused or could not be reached on the
endpoint's latest run. Home and the campaign preview list them; the watch's pass
(`credentials_expiring_alert`) keeps one tester-fault regression per endpoint whose
credential is among them (key `endpoint:<id>:credential`, blamed on the credential, never on
the site), opened before the runs fail and resolved once the credential is replaced, no
longer expiring, or no scheduled campaign uses it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import JSONField, OuterRef, Subquery, TextField
from django.db.models.functions import Cast

from webapp.accounts.crypto import CredentialDecryptError, decrypt_credential
from webapp.campaigns.models import Campaign, Run
from webapp.sites.credential_expiry import (
    KIND_WORDS,
    CredentialExpiry,
    endpoint_credential_expiry,
)
from webapp.sites.models import Endpoint
from webapp.watch.episodes import Finding, regression_open
from webapp.watch.models import Regression
from webapp.watch.states import regression_set_state
from workers.engine.credentials import CredentialKind
from workers.engine.errors import CREDENTIAL_PHASE


@dataclass(frozen=True)
class ExpiringCredential:
    """One endpoint's failing credential and the scheduled campaigns whose runs it fails."""

    expiry: CredentialExpiry
    campaigns: tuple[str, ...]
    site_id: int

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
        # Decrypted here, not by the field: one that no longer decrypts is a failing one.
        .defer("credential")
        .annotate(sealed=Cast("credential", TextField()), latest_errors=_latest_errors())
    )
    found = []
    for endpoint in endpoints:
        expiry = _expiry(endpoint, now=now, warn_days=warn_days)
        if expiry is not None:
            names = sorted(c.name for c in endpoint.campaigns.all() if _scheduled(c))
            found.append(ExpiringCredential(expiry, tuple(names), endpoint.site_id))
    return sorted(found, key=_soonest)


def _expiry(endpoint: Endpoint, *, now: datetime, warn_days: int | None) -> CredentialExpiry | None:
    try:
        endpoint.credential = decrypt_credential(str(getattr(endpoint, "sealed", "")))
    except CredentialDecryptError as exc:
        return _failing(endpoint, str(exc), now=now)
    expiry = endpoint_credential_expiry(endpoint, now=now, warn_days=warn_days)
    refusal = _credential_refusal(getattr(endpoint, "latest_errors", None))
    if expiry is None and refusal and endpoint.credential_kind == CredentialKind.OAUTH_CLIENT:
        # The issuer refused the client (or was unreachable) on the latest run.
        return _failing(endpoint, f"its latest run got no token: {refusal}", now=now)
    return expiry


def _failing(endpoint: Endpoint, problem: str, *, now: datetime) -> CredentialExpiry:
    return CredentialExpiry(
        endpoint_id=endpoint.pk,
        endpoint_name=endpoint.name,
        site_name=endpoint.site.name,
        kind=endpoint.credential_kind,
        expires_at=None,
        problem=problem,
        now=now,
    )


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


State = Regression.State
DETECTOR = "credential-expiry"


def credential_key(endpoint_id: int) -> str:
    return f"endpoint:{endpoint_id}:credential"


def credentials_expiring_alert(*, now: datetime) -> list[Regression]:
    """Open (tester-fault), update or resolve each endpoint's credential regression as of
    `now`, one per credential that credentials_expiring finds (a replaced credential that
    fails too: the old one's resolved, a new one opened; one whose alert a person resolved:
    none, until it is replaced); returns those opened or resolved. Four queries (five while
    some are resolved by hand), and the changes."""
    found = {c.expiry.endpoint_id: c for c in credentials_expiring(now=now)}
    live = {
        r.key: r
        for r in Regression.objects.filter(
            key__startswith="endpoint:", key__endswith=":credential", state__in=Regression.LIVE
        )
    }
    by_hand = _resolved_by_hand([credential_key(e) for e in found if credential_key(e) not in live])
    changed = []
    for endpoint_id, expiring in found.items():
        key = credential_key(endpoint_id)
        regression = live.pop(key, None)
        if regression is not None and regression.blame.get("identity") == _identity(expiring):
            _update(regression, expiring)
            continue
        if regression is not None:
            changed.append(_resolved(regression, now, _replaced_note(expiring)))
        elif (key, tuple(_identity(expiring))) in by_hand:
            continue
        changed.append(_open(expiring, now))
    for regression in live.values():
        changed.append(_resolved(regression, now, _resolved_note(regression)))
    return changed


def _resolved_by_hand(keys: list[str]) -> set[tuple[str, tuple[str, ...]]]:
    """(key, credential identity) of the alerts among `keys` a person resolved: that
    credential is known, and is not alerted about again."""
    if not keys:
        return set()
    # One filter(): the resolving event is the one a person made.
    rows = Regression.objects.filter(
        key__in=keys,
        state=State.RESOLVED,
        events__state=State.RESOLVED,
        events__actor__isnull=False,
    )
    return {
        (key, tuple(blame.get("identity") or ())) for key, blame in rows.values_list("key", "blame")
    }


def _identity(expiring: ExpiringCredential) -> list[str]:
    """What the alert is about: the credential's kind and expiry ("" when it fails
    otherwise). Another credential with the same expiry makes the same alert true."""
    expiry = expiring.expiry
    expires_at = expiry.expires_at.isoformat() if expiry.expires_at else ""
    return [expiry.kind, expires_at, "fails" if expiry.problem else "expires"]


def _described(expiring: ExpiringCredential) -> dict[str, Any]:
    """The regression's fields that say what fails and when (none relative to `now`: a pass
    that finds the same changes nothing)."""
    expiry = expiring.expiry
    failing = expiry.expires_at is None or expiry.expired
    what = f"the {KIND_WORDS.get(expiry.kind, expiry.kind)} of endpoint {expiry.endpoint_name}"
    campaigns = ", ".join(expiring.campaigns)
    if expiry.expires_at is None:
        when = f": {expiry.problem}: the runs of {campaigns} fail"
    elif failing:
        when = f" expired at {_stamp(expiry.expires_at)}: the runs of {campaigns} fail"
    else:
        when = (
            f" expires at {_stamp(expiry.expires_at)}: the runs of {campaigns} will fail from "
            "then; replace it before"
        )
    return {
        "summary": f"{what} (site {expiry.site_name}){when}",
        "severity": Regression.Severity.CRITICAL if failing else Regression.Severity.WARNING,
        "blame": {
            "target": Regression.Blame.CREDENTIAL,
            "rule": "expiring",
            "credential": what.removeprefix("the "),
            "endpoint": expiry.endpoint_name,
            "kind": expiry.kind,
            "expires_at": expiry.expires_at.isoformat() if expiry.expires_at else None,
            "problem": expiry.problem,
            "campaigns": list(expiring.campaigns),
            "identity": _identity(expiring),
        },
        "detector": _detector(expiry),
    }


def _detector(expiry: CredentialExpiry) -> dict[str, Any]:
    """The warning window the expiry fell in (none for a credential that fails otherwise)."""
    days = int(settings.FEDPROBE_CREDENTIAL_WARN_DAYS)
    window = None
    if expiry.expires_at is not None:
        warned_from = expiry.expires_at - timedelta(days=days)
        window = [warned_from.isoformat(), expiry.expires_at.isoformat()]
    return {
        "name": DETECTOR,
        "parameters": {"warn_days": days},
        "baseline_window": None,
        "target_window": window,
    }


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _open(expiring: ExpiringCredential, now: datetime) -> Regression:
    described = _described(expiring)
    finding = Finding(
        key=credential_key(expiring.expiry.endpoint_id),
        metric="availability",
        bad=None,
        tester_fault=True,
        verdict=Regression.Verdict.REGRESSION,
        subject={"endpoint_id": expiring.expiry.endpoint_id, "site_id": expiring.site_id},
        **described,
    )
    return regression_open(finding=finding, state=State.TESTER_FAULT, night=now.date(), at=now)


def _update(regression: Regression, expiring: ExpiringCredential) -> None:
    """The same credential, said anew if anything changed (expired since, campaigns)."""
    described = _described(expiring)
    if any(getattr(regression, name) != value for name, value in described.items()):
        Regression.objects.filter(pk=regression.pk).update(**described)


def _resolved(regression: Regression, now: datetime, note: str) -> Regression:
    regression_set_state(regression=regression, state=State.RESOLVED, at=now, note=note)
    return regression


def _replaced_note(expiring: ExpiringCredential) -> str:
    expiry = expiring.expiry
    return f"the credential of endpoint {expiry.endpoint_name} was replaced"


def _resolved_note(regression: Regression) -> str:
    """Why a credential's alert is over: its endpoint disabled, unscheduled, or its credential
    replaced or no longer failing (one or two queries: resolutions are few)."""
    endpoint = regression.endpoint
    if endpoint is None:
        return "its endpoint is gone"
    if not endpoint.enabled:
        return f"endpoint {endpoint.name} is disabled"
    if not any(_scheduled(c) for c in endpoint.campaigns.all()):
        return f"no scheduled campaign measures endpoint {endpoint.name} any more"
    expires = endpoint.credential_info().get("expires_at")
    if expires and expires != regression.blame.get("expires_at"):
        return (
            f"the credential of endpoint {endpoint.name} was replaced: it expires at "
            f"{_stamp(datetime.fromisoformat(expires))}"
        )
    return f"the credential of endpoint {endpoint.name} no longer fails its runs"
