"""Endpoint credentials: what may be stored for a kind and protocol, what may be shown of
them, what a run presents, and the CA folder servers are verified against.

A stored credential is the text the engine parses: a bearer token, an X.509 proxy (PEM),
or an `oauth-client`'s JSON (token URL, client id and secret, scope, audience). Its secret
never leaves this module's callers but for the engine: `credential_info` shows what can be
shown, and messages never quote it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from workers.engine.credentials import GRID_CA_DIR, SYSTEM_CA_DIR, Credential, CredentialKind
from workers.engine.egress import EgressPolicy
from workers.engine.errors import InvalidParams
from workers.engine.oauth import TOKEN_REQUEST_TIMEOUT_S, OAuthClient, TokenCache

if TYPE_CHECKING:
    from webapp.sites.models import Endpoint

# The worker's tokens, by oauth client: a worker process asks the issuer again only shortly
# before the token it holds expires (workers.engine.oauth.REFRESH_MARGIN_S).
TOKEN_CACHE = TokenCache()
# An expiry this close is pointed out on the pages ("expires in N min").
EXPIRY_NOTICE_S = 2 * 3600
# Hashed entries of an OpenSSL CA folder: certificates, CRLs, and the grid's policies.
_HASHED = re.compile(r"^[0-9a-f]{8}\.(\d+|r\d+|signing_policy|namespaces)$")

KIND_CHOICES = [
    (CredentialKind.NONE.value, "none (anonymous)"),
    (CredentialKind.TOKEN.value, "bearer token (JWT or opaque)"),
    (CredentialKind.OAUTH_CLIENT.value, "OAuth client (a fresh token before each run)"),
    (CredentialKind.X509_PROXY.value, "X.509 proxy (PEM)"),
]


class CredentialInfo(TypedDict, total=False):
    """What the pages and the API show of a credential (never its secret)."""

    kind: str
    issuer: str | None
    subject: str | None
    audience: list[str]
    scopes: list[str]
    expires_at: str | None
    token_url: str
    client_id: str
    problem: str


def credential_change(
    *, stored_kind: str, stored: str, kind: str | None, text: str | None
) -> tuple[str, str]:
    """The (kind, credential) an endpoint gets from a change giving either, both or neither.

    A kind alone keeps the stored credential when it is the stored kind (and drops it for
    `none`); a credential alone replaces the stored one of the same kind.
    """
    if kind is None:
        return stored_kind, stored if text is None else text
    if text is not None:
        return kind, text
    if kind == CredentialKind.NONE:
        return kind, ""
    return kind, stored if kind == stored_kind else ""


def credential_check(*, kind: str, text: str, protocol: str) -> str:
    """The credential as stored (normalized), or ValidationError naming `credential` or
    `credential_kind`."""
    try:
        chosen = CredentialKind(kind)
    except ValueError:
        raise ValidationError(
            {"credential_kind": f"{kind!r} is not one of {', '.join(CredentialKind)}"}
        ) from None
    if chosen == CredentialKind.NONE:
        if text.strip():
            raise ValidationError(
                {"credential": "kind none takes no credential: choose its kind, or leave it empty"}
            )
        return ""
    if protocol:
        try:
            _presented(chosen).auth_method(protocol)
        except InvalidParams as exc:
            raise ValidationError({"credential_kind": exc.message}) from None
    text = text.replace("\r\n", "\n")  # a browser's textarea sends CRLF
    if not text.strip():
        raise ValidationError({"credential": f"kind {chosen} needs its credential"})
    try:
        if chosen == CredentialKind.OAUTH_CLIENT:
            return OAuthClient.from_json(text).to_json()
        return Credential.parse(chosen, text).secret
    except InvalidParams as exc:
        raise ValidationError({"credential": exc.message}) from None


def _presented(kind: CredentialKind) -> Credential:
    """A credential of what `kind` presents to the endpoint (an oauth client: a token), to
    ask the engine whether the protocol takes it; its secret is never used."""
    if kind == CredentialKind.X509_PROXY:
        return Credential(CredentialKind.X509_PROXY, "")
    return Credential(CredentialKind.TOKEN, "")


def credential_info(*, kind: str, text: str) -> CredentialInfo:
    """What may be shown of a stored credential. A stored one that no longer parses (stored
    before kinds existed) says why in `problem`."""
    if kind == CredentialKind.NONE or not text:
        return {"kind": kind}
    try:
        if kind == CredentialKind.OAUTH_CLIENT:
            return _client_info(OAuthClient.from_json(text))
        info = Credential.parse(kind, text).info().to_json()
    except InvalidParams as exc:
        return {"kind": kind, "problem": f"the stored credential does not parse: {exc.message}"}
    return {
        "kind": kind,
        "issuer": _text_or_none(info["issuer"]),
        "subject": _text_or_none(info["subject"]),
        "audience": _strings(info["audience"]),
        "scopes": _strings(info["scopes"]),
        "expires_at": _text_or_none(info["expires_at"]),
    }


def _client_info(client: OAuthClient) -> CredentialInfo:
    parts = urlsplit(client.token_url)
    return {
        "kind": CredentialKind.OAUTH_CLIENT.value,
        "issuer": f"{parts.scheme}://{parts.netloc}",
        "subject": None,
        "audience": [client.audience] if client.audience else [],
        "scopes": client.scope.split(),
        "expires_at": None,
        "token_url": client.token_url,
        "client_id": client.client_id,
    }


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def oauth_client_fields(*, kind: str, text: str) -> dict[str, str]:
    """The stored oauth client's fields but its secret (for a form to start from)."""
    if kind != CredentialKind.OAUTH_CLIENT or not text:
        return {}
    try:
        return OAuthClient.from_json(text).public_json()
    except InvalidParams:
        return {}


def credential_summary(info: CredentialInfo, *, now: datetime) -> dict[str, object]:
    """`info` for a page: its expiry as a datetime, and whether that is past or close."""
    expires_at = info.get("expires_at")
    return {
        **info,
        "expires": datetime.fromisoformat(expires_at) if expires_at else None,
        "expiry_note": expiry_note(expires_at, now=now),
    }


def expiry_note(expires_at: str | None, *, now: datetime) -> str:
    """'expired', 'expires in N min' when that is close, else ''."""
    if not expires_at:
        return ""
    left_s = (datetime.fromisoformat(expires_at) - now).total_seconds()
    if left_s <= 0:
        return "expired"
    if left_s <= EXPIRY_NOTICE_S:
        return f"expires in {max(1, int(left_s // 60))} min"
    return ""


def endpoint_run_credential(
    endpoint: Endpoint,
    *,
    egress: EgressPolicy | None,
    ca_dir: str | None,
    valid_for_s: float = 0.0,
    time_s: float = TOKEN_REQUEST_TIMEOUT_S,
) -> Credential | None:
    """What a run on `endpoint` presents: its token or proxy as stored, or for an oauth
    client a token from this process's cache (fetched when missing or about to expire,
    within `time_s`: the run's deadline covers it).

    Raises InvalidParams for a stored credential that does not parse, ProbeError (class
    auth, tls, refused, timeout, ...) when the issuer cannot give a token.
    """
    kind = endpoint.credential_kind
    if kind == CredentialKind.NONE or not endpoint.credential:
        return None
    if kind == CredentialKind.OAUTH_CLIENT:
        client = OAuthClient.from_json(endpoint.credential)
        return TOKEN_CACHE.token(
            client, egress=egress, ca_dir=ca_dir, valid_for_s=valid_for_s, time_s=time_s
        )
    return Credential.parse(kind, endpoint.credential)


# -- the CA folder ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CaFolder:
    """What `ca_dir_merge` linked: how many entries, from which folders."""

    path: Path
    entries: int
    sources: tuple[Path, ...]


def trusted_ca_sources() -> Path:
    """The host's CA folder: the grid's (IGTF trust anchors) when it has one, else the
    system store."""
    grid = Path(GRID_CA_DIR)
    return grid if grid.is_dir() else Path(SYSTEM_CA_DIR)


def ca_dir_merge(*, target: Path, sources: list[Path]) -> CaFolder:
    """Make `target` an OpenSSL CA folder holding links to the hashed entries of each of
    `sources` (earlier sources win a name; a later certificate whose hash is taken gets the
    next free `.N`). Entries no longer wanted are removed; the folder is updated in place,
    so a worker reading it meanwhile sees the old or the new link of each name."""
    wanted: dict[str, Path] = {}
    for source in sources:
        for entry in sorted(source.iterdir()) if source.is_dir() else []:
            name = _free_name(wanted, entry.name) if _HASHED.match(entry.name) else None
            if name is not None:
                wanted[name] = entry.absolute()
    target.mkdir(parents=True, exist_ok=True)
    for present in target.iterdir():
        if present.name not in wanted or not _links_to(present, wanted[present.name]):
            present.unlink()
    for name, destination in wanted.items():
        link = target / name
        if not link.is_symlink():
            tmp = target / f".{name}.new"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(destination)
            os.replace(tmp, link)
    return CaFolder(target, len(wanted), tuple(sources))


def _free_name(taken: dict[str, Path], name: str) -> str | None:
    """`name`, or the next free `<hash>.N` / `<hash>.rN` for a certificate or CRL whose name
    is taken; None for another entry whose name is taken (the first one's stays)."""
    if name not in taken:
        return name
    stem, _, suffix = name.partition(".")
    number = suffix.removeprefix("r")
    if not number.isdigit():
        return None
    prefix = suffix[: len(suffix) - len(number)]
    index = int(number)
    while f"{stem}.{prefix}{index}" in taken:
        index += 1
    return f"{stem}.{prefix}{index}"


def _links_to(link: Path, destination: Path) -> bool:
    return link.is_symlink() and Path(os.readlink(link)) == destination
