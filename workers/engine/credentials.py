"""What a run presents to its endpoint: a WLCG bearer token or an X.509 proxy, and the CA
directory it verifies servers against.

A `Credential` holds its secret in memory only: not in its repr, the run JSON or any message.
For a run it is written to a private folder (`run_secrets`: 0600 files in a 0700 folder that
the run holds a lock on while it lasts), which the client processes read through the
environment variables the grid's tools know (BEARER_TOKEN_FILE, X509_USER_PROXY,
X509_CERT_DIR). The folder is removed when the run ends; what a killed process left behind is
removed by the next run or worker start (`remove_stale_run_dirs`): a folder whose lock nobody
holds. The lock, not a process id, says whose it is, so workers sharing the base folder (two
instances under one user, containers sharing /tmp with process ids of their own) never remove
each other's.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from workers.engine.egress_guard import GuardLink
from workers.engine.errors import CREDENTIAL_PHASE, ErrorClass, InvalidParams, ProbeError
from workers.engine.protocols import SCHEMES, protocol_of

# Where the grid keeps its CA certificates (hashed links), when the host has them.
GRID_CA_DIR = "/etc/grid-security/certificates"
# Debian's system store as a hashed folder (for XrdCl, which takes only a folder).
SYSTEM_CA_DIR = "/etc/ssl/certs"
# XrdCl's NetworkStack (XRD_NETWORKSTACK) for a run pinned to one address family.
XRD_NETWORK_STACKS = {"4": "IPv4", "6": "IPv6"}
# RFC 6750 b64token: what may appear in a bearer token.
# The WLCG token profile's audience that every storage service accepts by convention.
WLCG_ANY_AUDIENCE = "https://wlcg.cern.ch/jwt/v1/any"
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
_PRIVATE_KEY = re.compile(
    rb"-----BEGIN (?:RSA |EC |ENCRYPTED )?PRIVATE KEY-----.+?-----END (?:RSA |EC |ENCRYPTED )?"
    rb"PRIVATE KEY-----",
    re.S,
)
_RUN_DIR = re.compile(r"^run-(\d+)-[0-9a-f]+$")
# The file in a run folder whose lock the run holds while it lasts.
LOCK_NAME = ".held"
# The environment through which grid clients find credentials, cleared in every client so
# that nothing the worker's own environment holds is presented by accident.
_DISCOVERY_VARIABLES = ("BEARER_TOKEN", "BEARER_TOKEN_FILE", "X509_USER_PROXY", "X509_USER_CERT")


class CredentialKind(StrEnum):
    """What an endpoint's credential is (the API's `credential_kind`)."""

    NONE = "none"
    TOKEN = "token"
    OAUTH_CLIENT = "oauth-client"
    X509_PROXY = "x509-proxy"


class AuthMethod(StrEnum):
    """How a run authenticated (the run JSON's `auth`): the credential it presented, and
    how the protocol carries it."""

    NONE = "none"
    TOKEN = "token"  # ztn on root(s)://, Authorization: Bearer on https/davs
    GSI = "gsi"  # an X.509 proxy over XRootD's gsi or GridFTP
    X509 = "x509"  # an X.509 proxy as TLS client certificate (https/davs)


@dataclass(frozen=True)
class CredentialInfo:
    """What may be shown of a credential without revealing it (JWT claims are decoded,
    not verified: only the endpoint can verify them)."""

    kind: str
    issuer: str | None = None
    subject: str | None = None
    audience: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    expires_at: datetime | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "issuer": self.issuer,
            "subject": self.subject,
            "audience": list(self.audience),
            "scopes": list(self.scopes),
            "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
        }


@dataclass(frozen=True)
class Credential:
    """A bearer token or an X.509 proxy (PEM: proxy certificate, its key, the chain)."""

    kind: CredentialKind
    secret: str = field(repr=False)

    def __post_init__(self) -> None:
        if self.kind not in (CredentialKind.TOKEN, CredentialKind.X509_PROXY):
            raise ValueError(f"a run presents a token or a proxy, not {self.kind}")

    @classmethod
    def token(cls, text: str) -> Credential:
        """A bearer token as found in a token file (surrounding whitespace dropped)."""
        token = text.strip()
        if not token:
            raise InvalidParams("credential", "the token is empty")
        if not _TOKEN_CHARS.match(token):
            raise InvalidParams(
                "credential", "a bearer token is one line of letters, digits and -._~+/="
            )
        credential = cls(CredentialKind.TOKEN, token)
        credential.info()  # a JWT must decode
        return credential

    @classmethod
    def x509_proxy(cls, pem: str) -> Credential:
        """An X.509 proxy file's text: its certificates and the proxy's private key."""
        credential = cls(CredentialKind.X509_PROXY, pem.strip() + "\n")
        credential.info()
        return credential

    @classmethod
    def parse(cls, kind: str, text: str) -> Credential:
        if kind == CredentialKind.TOKEN:
            return cls.token(text)
        if kind == CredentialKind.X509_PROXY:
            return cls.x509_proxy(text)
        raise InvalidParams("credential_kind", f"{kind!r} is not token or x509-proxy")

    def info(self) -> CredentialInfo:
        """Raise InvalidParams (field `credential`) when the credential is malformed."""
        if self.kind == CredentialKind.TOKEN:
            return token_info(self.secret)
        return proxy_info(self.secret)

    @property
    def expires_at(self) -> datetime | None:
        return self.info().expires_at

    def check_valid(self, *, until: datetime, why: str = "") -> None:
        """Raise ProbeError (class auth) when the credential has expired by `until`.

        `why` says what `until` is ("the run's deadline"); empty means now.
        """
        expires = self.expires_at
        if expires is None or expires > until:
            return
        what = "token" if self.kind == CredentialKind.TOKEN else "X.509 proxy"
        stamp = expires.isoformat(timespec="seconds")
        if not why:
            raise ProbeError(
                ErrorClass.AUTH, f"the {what} expired at {stamp}", phase=CREDENTIAL_PHASE
            )
        raise ProbeError(
            ErrorClass.AUTH,
            f"the {what} expires at {stamp}, before {why} ({until.isoformat(timespec='seconds')})",
            phase=CREDENTIAL_PHASE,
        )

    def auth_method(self, scheme: str) -> AuthMethod:
        """How this credential is presented over `scheme`; InvalidParams where it cannot be."""
        scheme = scheme.lower()
        declared = SCHEMES.get(scheme)
        if self.kind == CredentialKind.TOKEN:
            if declared is not None and declared.token:
                return AuthMethod.TOKEN
            if others := _token_schemes_beside(scheme):
                raise InvalidParams(
                    "credential",
                    f"a token is never sent over plain {scheme}://: use {' or '.join(others)}",
                )
            raise InvalidParams("credential", f"{scheme}:// takes no bearer token")
        if declared is not None and declared.proxy is not None:
            return AuthMethod(declared.proxy)
        raise InvalidParams("credential", f"{scheme}:// takes no X.509 proxy")


def _token_schemes_beside(scheme: str) -> list[str]:
    """The schemes of `scheme`'s protocol a token does go over (https, davs beside http)."""
    try:
        protocol = protocol_of(scheme)
    except ValueError:
        return []
    return [other.name for other in protocol.schemes if other.token]


def describe(credential: Credential | None) -> str:
    """What a credential is, for an error message: never the secret."""
    if credential is None:
        return "no credential"
    info = credential.info()
    if credential.kind == CredentialKind.X509_PROXY:
        return f"an X.509 proxy of {info.subject}, under the CA {_root_issuer(credential.secret)}"
    if info.issuer is None:
        return "an opaque token"
    audience = ", ".join(info.audience) or "no audience"
    scopes = " ".join(info.scopes) or "no scope"
    return f"a token of {info.issuer} for {audience}, scope {scopes}"


def _root_issuer(pem: str) -> str:
    """The issuer of the last certificate of a proxy file: the CA that signed the user's."""
    from cryptography import x509

    return x509.load_pem_x509_certificates(pem.encode())[-1].issuer.rfc4514_string()


def refusal_hint(credential: Credential | None, url: str) -> str:
    """Why a door most likely refused this token for `url`, from its claims (decoded, not
    verified): scopes that do not cover the file, else its audience (the door checks both
    when it authorizes; lab-notes: a wrong audience reads as "permission denied" or 403,
    nothing more). Empty when the token tells nothing (none, opaque, or without scopes)."""
    if credential is None or credential.kind != CredentialKind.TOKEN:
        return ""
    info = credential.info()
    if not info.scopes:
        return ""
    parts = urlsplit(url)
    path = "/" + parts.path.lstrip("/")
    if not scope_covers(info.scopes, path):
        return (
            f"the token's scopes ({' '.join(info.scopes)}) do not cover reading {path}: it "
            f"needs storage.read:{path} or a scope above it"
        )
    audience = ", ".join(info.audience) or "none"
    own = f"https://{parts.netloc.rpartition('@')[2]}"
    return (
        f"its scopes cover {path}, so the token's audience ({audience}) is likely not one "
        f"this door accepts, or the door does not trust its issuer {info.issuer}; doors "
        f"commonly accept their own address ({own}) or {WLCG_ANY_AUDIENCE}"
    )


def token_info(token: str) -> CredentialInfo:
    """The claims of a JWT (decoded, not verified); an opaque token has none to show."""
    parts = token.split(".")
    if len(parts) != 3:
        return CredentialInfo(CredentialKind.TOKEN)
    try:
        claims = json.loads(_b64url(parts[1]))
        json.loads(_b64url(parts[0]))
    except (ValueError, binascii.Error):
        raise InvalidParams("credential", "the token looks like a JWT but does not decode") from (
            None
        )
    if not isinstance(claims, dict):
        raise InvalidParams("credential", "the token's JWT claims are not an object")
    audience = claims.get("aud")
    audiences = [audience] if isinstance(audience, str) else audience or []
    scope = claims.get("scope")
    expires = claims.get("exp")
    return CredentialInfo(
        kind=CredentialKind.TOKEN,
        issuer=_text(claims.get("iss")),
        subject=_text(claims.get("sub")),
        audience=tuple(str(a) for a in audiences if isinstance(a, str)),
        scopes=tuple(scope.split()) if isinstance(scope, str) else (),
        expires_at=_timestamp(expires),
    )


def proxy_info(pem: str) -> CredentialInfo:
    """Subject, issuer and expiry of a proxy file; its end is the earliest of its chain's."""
    from cryptography import x509  # only runs with proxies pay for importing it
    from cryptography.hazmat.primitives import serialization

    data = pem.encode()
    try:
        chain = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise InvalidParams("credential", "the X.509 proxy holds no PEM certificate") from None
    key = _PRIVATE_KEY.search(data)
    if key is None:
        raise InvalidParams("credential", "the X.509 proxy holds no private key")
    try:
        serialization.load_pem_private_key(key.group(0), password=None)
    except (ValueError, TypeError):
        raise InvalidParams(
            "credential", "the X.509 proxy's private key does not load (encrypted?)"
        ) from None
    first = chain[0]
    return CredentialInfo(
        kind=CredentialKind.X509_PROXY,
        issuer=first.issuer.rfc4514_string(),
        subject=first.subject.rfc4514_string(),
        expires_at=min(cert.not_valid_after_utc for cert in chain),
    )


def scope_covers(scopes: tuple[str, ...], path: str) -> bool:
    """Does a WLCG `storage.read:/dir` (or `storage.modify:`) scope allow reading `path`?

    A scope's path covers itself and what is below it; `storage.read:/` covers everything.
    """
    for scope in scopes:
        name, _, where = scope.partition(":")
        if name not in ("storage.read", "storage.modify"):
            continue
        base = "/" + where.strip("/")
        if base in ("/", path) or path.startswith(base.rstrip("/") + "/"):
            return True
    return False


def discover_credential(scheme: str, env: Mapping[str, str] = os.environ) -> Credential | None:
    """The credential a grid client on this host would use for `scheme`, found as the WLCG
    Bearer Token Discovery spec and the X.509 conventions say: BEARER_TOKEN,
    BEARER_TOKEN_FILE, $XDG_RUNTIME_DIR/bt_u<uid>, /tmp/bt_u<uid>; then X509_USER_PROXY,
    /tmp/x509up_u<uid>. A token is preferred where the protocol takes both; plain http://
    gets nothing (a token is never sent in clear)."""
    scheme = scheme.lower()
    declared = SCHEMES.get(scheme)
    takes_token = declared is not None and declared.token
    takes_proxy = declared is not None and declared.proxy is not None
    if takes_token and (token := _discover_token(env)) is not None:
        return Credential.token(token)
    if takes_proxy:
        proxy = env.get("X509_USER_PROXY") or f"/tmp/x509up_u{os.getuid()}"
        if os.path.isfile(proxy):
            return Credential.x509_proxy(read_secret_file(proxy, "X509_USER_PROXY"))
    return None


def _discover_token(env: Mapping[str, str]) -> str | None:
    if env.get("BEARER_TOKEN", "").strip():
        return env["BEARER_TOKEN"]
    uid = os.getuid()
    candidates = [env.get("BEARER_TOKEN_FILE")]
    if env.get("XDG_RUNTIME_DIR"):
        candidates.append(os.path.join(env["XDG_RUNTIME_DIR"], f"bt_u{uid}"))
    candidates.append(f"/tmp/bt_u{uid}")
    for path in filter(None, candidates):
        if os.path.isfile(path):
            return read_secret_file(path, "token file")
    return None


def read_secret_file(path: str, field_name: str) -> str:
    """A token or proxy file's text; InvalidParams naming the field when it cannot be read."""
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidParams(field_name, f"cannot read {path}: {exc.__class__.__name__}") from None


def resolve_ca_dir(explicit: str | None, env: Mapping[str, str] = os.environ) -> str | None:
    """The CA folder servers are verified against: `explicit`, FEDPROBE_CA_DIR, X509_CERT_DIR,
    /etc/grid-security/certificates when it exists; None means the system store."""
    for candidate in (explicit, env.get("FEDPROBE_CA_DIR"), env.get("X509_CERT_DIR")):
        if candidate:
            return candidate
    return GRID_CA_DIR if os.path.isdir(GRID_CA_DIR) else None


def check_ca_dir(ca_dir: str | None) -> None:
    if ca_dir is not None and not os.path.isdir(ca_dir):
        raise InvalidParams("ca_dir", f"{ca_dir!r} is not a folder")


@dataclass(frozen=True)
class Access:
    """How a client process authenticates, verifies servers and is held to the egress
    policy: paths and a socket, never secrets, so it can travel to the client processes in
    their spec."""

    auth: AuthMethod = AuthMethod.NONE
    token_file: str | None = None
    proxy_file: str | None = None
    ca_dir: str | None = None
    # Where the process puts itself under the run's egress guard (None: no policy).
    guard: GuardLink | None = None
    # The hosts the credential may also be presented to (RunParams.credential_hosts).
    credential_hosts: tuple[str, ...] = ()
    # A third-party copy's destination: what it is given (this Access is the source's).
    destination: Access | None = None
    # The one address family the process may connect over ("4", "6"; "any": the client
    # library's choice), and in a run per address ("each") the address (families.py).
    address_family: str = "any"
    address: str | None = None

    def apply_environment(self, env: MutableMapping[str, str] = os.environ) -> None:
        """Set, in this process only, what XrdCl, xrdcp and globus-url-copy read."""
        for name in _DISCOVERY_VARIABLES:
            env.pop(name, None)
        env["X509_CERT_DIR"] = self.ca_dir or SYSTEM_CA_DIR
        if self.token_file:
            env["BEARER_TOKEN_FILE"] = self.token_file
            env["XrdSecPROTOCOL"] = "ztn"
        elif self.proxy_file:
            env["X509_USER_PROXY"] = self.proxy_file
            env["XrdSecPROTOCOL"] = "gsi"
        else:
            # No credential: never one found on this host by discovery (/tmp/bt_u<uid>,
            # /tmp/x509up_u<uid>); a server that demands one refuses us, as it should.
            env["XrdSecPROTOCOL"] = "unix"
            env["BEARER_TOKEN_FILE"] = os.devnull
        # xrdcp's; XrdCl in this process read its environment on import (configure_client).
        stack = XRD_NETWORK_STACKS.get(self.address_family)
        if stack is not None:
            env["XRD_NETWORKSTACK"] = stack

    def bearer_token(self) -> str | None:
        if not self.token_file:
            return None
        return Path(self.token_file).read_text().strip()


def secrets_base(env: Mapping[str, str] = os.environ) -> Path:
    """Where runs keep their private folders: FEDPROBE_SECRETS_DIR, else a folder of this
    user's in the temporary folder."""
    configured = env.get("FEDPROBE_SECRETS_DIR")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"fedprobe-secrets-{os.getuid()}"


@contextlib.contextmanager
def run_secrets(
    credential: Credential | None,
    *,
    scheme: str,
    ca_dir: str | None,
    base: Path | None = None,
) -> Iterator[Access]:
    """A private folder holding the run's credential, removed when the run ends."""
    auth = AuthMethod.NONE if credential is None else credential.auth_method(scheme)
    if credential is None:
        yield Access(auth, ca_dir=ca_dir)
        return
    folder, lock = _private_folder(base or secrets_base())
    try:
        name = "token" if credential.kind == CredentialKind.TOKEN else "x509_proxy"
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(credential.secret)
        if credential.kind == CredentialKind.TOKEN:
            yield Access(auth, token_file=str(path), ca_dir=ca_dir)
        else:
            yield Access(auth, proxy_file=str(path), ca_dir=ca_dir)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(lock)  # after the removal: no cleaner takes the folder while it is emptied


@contextlib.contextmanager
def private_run_file(name: str, text: str, *, base: Path | None = None) -> Iterator[str]:
    """`text` in a 0600 file `name` of a private run folder (as run_secrets keeps a
    credential: a 0700 folder, locked while the run lasts, removed after it and by
    remove_stale_run_dirs if the worker dies): what a run gets over the network rather than
    from this host's disk (a replay's trace). Yields the file's path."""
    folder, lock = _private_folder(base or secrets_base())
    try:
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        yield str(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(lock)


def remove_stale_run_dirs(base: Path | None = None) -> list[Path]:
    """Remove the run folders no run holds any more (a worker killed mid-run): those whose
    lock can be taken, and those left by a version before the locks whose process is gone; a
    folder still being made (`new-*`) once it is a minute old."""
    base = base or secrets_base()
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in base.iterdir():
            if _abandoned(entry):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


def _abandoned(entry: Path) -> bool:
    if not (entry.name.startswith(("run-", "new-")) and entry.is_dir()):
        return False
    try:
        lock = os.open(entry / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        if entry.name.startswith("new-"):  # between its mkdir and its lock: give it time
            return time.time() - entry.stat().st_mtime > 60
        match = _RUN_DIR.match(entry.name)  # made before the locks
        return match is not None and not _pid_alive(int(match.group(1)))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a live run holds it
    finally:
        os.close(lock)
    return True


def _private_folder(base: Path) -> tuple[Path, int]:
    """A new run folder in `base` and the descriptor of its lock, held until the run ends.
    Made under a `new-` name and renamed once locked, so a cleaner never sees a `run-`
    folder that nobody holds yet."""
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    if base.stat().st_uid != os.getuid() or base.stat().st_mode & 0o077:
        raise ProbeError(  # the worker host's fault (harness), not the endpoint's
            ErrorClass.HARNESS,
            f"{base} must belong to this user with mode 0700 (it holds run credentials)",
        )
    name = f"{os.getpid()}-{secrets.token_hex(8)}"
    making = base / f"new-{name}"
    making.mkdir(mode=0o700)
    lock = os.open(making / LOCK_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    folder = base / f"run-{name}"
    making.rename(folder)
    return folder, lock


def _pid_alive(pid: int) -> bool:
    """Is the process running? A zombie (killed, its parent gone, not reaped yet: common in
    containers whose init does not reap) is not."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: a signal answered, so it runs
    return stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _timestamp(value: object) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return datetime.fromtimestamp(value, UTC)
