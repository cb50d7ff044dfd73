"""Subscriptions: checked and saved the same way by the API and the page.

A subscription is its maker's, or a team's (`team` given, by one of its members or an
admin): a team's email goes to each member's own address, so it has no `email` of its own.
Who it is for never changes (delete it and subscribe again). The webhook's `url` and `secret`
are write-only: left out (None) of a change, they are kept; but a new `url` without the
`secret` is refused, so a saved secret never goes to an address it was not given for."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.db import transaction

from webapp.accounts.models import Team
from webapp.accounts.roles import is_admin
from webapp.notifications.models import Subscription
from webapp.sites.models import Endpoint, Site, VantagePoint
from workers.engine.egress import EgressPolicy, literal_refusal
from workers.engine.errors import ProbeError

Target = Subscription.Target
Channel = Subscription.Channel

TARGET_MODELS: dict[str, Any] = {
    Target.SITE: Site,
    Target.ENDPOINT: Endpoint,
    Target.VANTAGE_POINT: VantagePoint,
}
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")
# Fields a subscription is made of, as the API and the form name them.
FIELDS = (
    "team",
    "channel",
    "format",
    "target",
    "target_id",
    "digest",
    "email",
    "url",
    "secret_header",
    "secret",
    "active",
)


def subscription_save(
    *, by: User, values: dict[str, Any], subscription: Subscription | None = None
) -> Subscription:
    """Create (or change) a subscription as `by`; ValidationError names each bad field and
    nothing is saved then; PermissionDenied when `by` may not (not the owner, not a member
    of the team, not an admin). A webhook URL must be one workers may connect to (the egress
    policy)."""
    if subscription is not None and not subscription.managed_by(by):
        raise PermissionDenied(
            "a subscription is changed by its owner, its team's members or an admin"
        )
    row = subscription or Subscription(owner=by)
    moved_without_secret = _moved_without_secret(row, values, new=subscription is None)
    for name, value in values.items():
        if name not in FIELDS:
            raise ValidationError({name: "not a field of a subscription"})
        if name == "team":
            _set_team(row, value, by=by, new=subscription is None)
        elif name in ("url", "secret") and subscription is not None and value is None:
            continue  # write-only: left out means kept
        else:
            setattr(row, name, value)
    _check(row, moved_without_secret=moved_without_secret)
    with transaction.atomic():
        row.save()
    return row


def _moved_without_secret(row: Subscription, values: dict[str, Any], *, new: bool) -> bool:
    """Whether a change gives another `url` but not the `secret`: the saved secret was given
    for its URL, and must not follow it elsewhere (a team member could send the team's secret
    anywhere)."""
    url = values.get("url")
    return bool(
        not new and row.secret and url is not None and url != row.url
        and values.get("secret") is None
    )  # fmt: skip


def _set_team(row: Subscription, team: Team | None, *, by: User, new: bool) -> None:
    if not new:
        if team != row.team:
            raise ValidationError(
                {"team": "who a subscription is for does not change: subscribe anew instead"}
            )
        return
    if team is None:
        return  # the maker's own
    if not (team.has_member(by) or is_admin(by)):
        raise PermissionDenied(f"subscribing team {team.name} needs a member of it or an admin")
    row.owner, row.team = None, team


def _check(row: Subscription, *, moved_without_secret: bool = False) -> None:
    errors: dict[str, str] = {}
    if moved_without_secret:
        errors["secret"] = (
            "give the secret again with a new url (the API's empty one drops it): the saved "
            "one goes only to the url it was given for"
        )
    if row.channel not in Channel.values:
        errors["channel"] = f"one of {', '.join(Channel.values)}"
    if row.format not in Subscription.Format.values:
        errors["format"] = f"one of {', '.join(Subscription.Format.values)}"
    errors.update(_target_errors(row))
    if row.channel == Channel.EMAIL:
        errors.update(_email_errors(row))
    elif row.channel == Channel.WEBHOOK:
        errors.update(_webhook_errors(row))
    if errors:
        raise ValidationError(errors)


def _target_errors(row: Subscription) -> dict[str, str]:
    if row.target == Target.ALL:
        row.target_id = None
        return {}
    model = TARGET_MODELS.get(row.target)
    if model is None:
        return {"target": f"one of {', '.join(Target.values)}"}
    if row.target_id is None:
        return {"target_id": f"the id of the {row.target.replace('_', ' ')} to watch"}
    if not model.objects.filter(pk=row.target_id).exists():
        return {"target_id": f"no {row.target.replace('_', ' ')} has id {row.target_id}"}
    return {}


def _email_errors(row: Subscription) -> dict[str, str]:
    row.url = row.url_shown = row.secret_header = row.secret = ""
    if row.team is not None:
        if row.email:
            return {"email": "a team's email goes to each member's own address: give none"}
        return {}
    row.email = (row.email or getattr(row.owner, "email", "") or "").strip()
    if not row.email:
        return {"email": "an address to send to (your account has none)"}
    try:
        validate_email(row.email)
    except ValidationError:
        return {"email": "not an email address"}
    return {}


def _webhook_errors(row: Subscription) -> dict[str, str]:
    row.email = ""
    errors: dict[str, str] = {}
    refusal = webhook_url_refusal(row.url or "")
    if refusal:
        errors["url"] = refusal
    else:
        parts = urlsplit(row.url)
        row.url_shown = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"[:298] + "/…"
    if row.secret_header and not _HEADER_NAME.fullmatch(row.secret_header):
        errors["secret_header"] = "not a header name"
    if row.secret and not row.secret_header:
        errors["secret_header"] = "the header the secret goes in (Authorization, X-Token...)"
    if any(c in (row.secret or "") for c in "\r\n"):
        errors["secret"] = "one line"
    return errors


def webhook_url_refusal(url: str) -> str | None:
    """Why a server may not POST to `url` (None: it may): not http(s), or an address the
    egress policy refuses, after resolving the host. Connecting checks it again."""
    try:
        parts = urlsplit(url.strip())
        hostname = parts.hostname
    except ValueError:  # http://[::1 and friends
        return "not a valid URL"
    if parts.scheme not in ("http", "https") or not hostname:
        return "an http:// or https:// URL"
    literal = literal_refusal(hostname)
    if literal:
        return f"refused by the egress policy: {literal}"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        EgressPolicy.allowing(settings.FEDPROBE_EGRESS_ALLOW).check_host(hostname, port)
    except ValueError:
        return "not a valid port"
    except ProbeError as exc:
        return exc.message
    return None
