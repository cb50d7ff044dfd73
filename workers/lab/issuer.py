"""The lab's token issuer: WLCG-profile JWTs (ES256), and a small OAuth2 server handing them out.

Over HTTPS on 127.0.0.1 with the lab's host certificate it serves
`/.well-known/openid-configuration`, the JWKS (`/jwks`) and `POST /token`, the
client-credentials grant of RFC 6749 4.4 (client id and secret by HTTP Basic or as form
fields; `scope` and `audience` form fields). Tokens are signed by hand with `cryptography`:
header {"alg": "ES256", "typ": "JWT", "kid"}, signature r||s, base64url.

`mint_token` makes one without the server (for `lab token` and tests). xrootd's SciTokens
plugin never asks this server for its keys: `seed_scitokens_cache` writes them into the
plugin's key cache, as scitokens-cpp has no CA setting to trust the lab CA with.

Run as a process by the lab: `python -m workers.lab.issuer --config issuer.json`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import socket
import sqlite3
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, unquote

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

LAB_AUDIENCE = "https://fedprobe.lab"
DEFAULT_SCOPE = "storage.read:/fedprobe"
# The lab's ready-made tokens (pki/read-token, pki/write-token). Both read the test files and
# the scratch folders; only the write token creates (storage.create), overwrites and deletes
# (storage.modify) there. xrdcp stats its target first and HTTP DELETE needs read + modify,
# so a write token reads too.
READ_SCOPE = "storage.read:/fedprobe storage.read:/scratch"
WRITE_SCOPE = f"{READ_SCOPE} storage.create:/scratch storage.modify:/scratch"
READY_MADE_TOKEN_LIFETIME_S = 7 * 24 * 3600
DEFAULT_CLIENT_ID = "fedprobe-lab"
SHORT_CLIENT_ID = "fedprobe-lab-short"
# The lab's default client (`lab register` stores it, asking for scratch_write_scope) and one
# for tests that outlive a token.
CLIENT_LIFETIMES_S = {DEFAULT_CLIENT_ID: 20 * 60, SHORT_CLIENT_ID: 30}
TOKEN_PATH = "/token"
JWKS_PATH = "/jwks"
CONFIGURATION_PATH = "/.well-known/openid-configuration"
# WLCG token profile scopes: storage.read:/path and friends.
_SCOPE = re.compile(
    r"^(storage\.(read|stat|create|modify)|compute\.(read|create|modify|cancel)):/\S*$"
)
_MAX_BODY = 64 * 1024
_REQUEST_TIMEOUT_S = 10.0
_CACHE_LIFETIME_S = 10 * 365 * 24 * 3600


def scratch_write_scope(scratch_path: str) -> str:
    """The scopes of a client that reads the test files and writes under one site's scratch
    folder (`/scratch/near/`) and nowhere else: what `lab register` gives a token door, so
    that the token a copy hands to the other site cannot write there."""
    folder = "/" + scratch_path.strip("/")
    writes = " ".join(f"storage.{action}:{folder}" for action in ("read", "create", "modify"))
    return f"{DEFAULT_SCOPE} {writes}"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# -- keys and tokens ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SigningKey:
    """The issuer's EC P-256 key; its `kid` is the RFC 7638 thumbprint of the public key."""

    key: ec.EllipticCurvePrivateKey

    @classmethod
    def load(cls, path: Path) -> SigningKey:
        key = serialization.load_pem_private_key(path.read_bytes(), None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{path} holds no EC private key")
        return cls(key)

    @classmethod
    def ensure(cls, path: Path) -> SigningKey:
        """The key in `path`, made (mode 0600) when there is none."""
        if path.exists():
            return cls.load(path)
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _write_secret(path, pem)
        return cls(key)

    def public_jwk(self) -> dict[str, str]:
        numbers = self.key.public_key().public_numbers()
        coordinates = {
            "crv": "P-256",
            "kty": "EC",
            "x": b64url(numbers.x.to_bytes(32, "big")),
            "y": b64url(numbers.y.to_bytes(32, "big")),
        }
        return {**coordinates, "kid": _thumbprint(coordinates), "alg": "ES256", "use": "sig"}

    @property
    def kid(self) -> str:
        return self.public_jwk()["kid"]

    def jwks(self) -> dict[str, list[dict[str, str]]]:
        return {"keys": [self.public_jwk()]}

    def sign_jwt(self, claims: Mapping[str, object]) -> str:
        header = {"alg": "ES256", "typ": "JWT", "kid": self.kid}
        signing_input = f"{_json_b64(header)}.{_json_b64(claims)}"
        der = self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{signing_input}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def _thumbprint(coordinates: Mapping[str, str]) -> str:
    canonical = json.dumps(coordinates, sort_keys=True, separators=(",", ":"))
    return b64url(hashlib.sha256(canonical.encode()).digest())[:16]


def _json_b64(value: Mapping[str, object]) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def token_claims(
    *,
    issuer: str,
    subject: str,
    scope: str,
    audience: str,
    lifetime_s: float,
    expired: bool = False,
    now: float | None = None,
) -> dict[str, object]:
    """WLCG profile claims. An expired token was valid from two hours ago until one hour ago."""
    issued = int(time.time() if now is None else now)
    if expired:
        issued, expires = issued - 7200, issued - 3600
    else:
        expires = issued + max(1, round(lifetime_s))
    return {
        "wlcg.ver": "1.0",
        "iss": issuer,
        "sub": subject,
        "aud": audience,
        "scope": scope,
        "iat": issued,
        "nbf": issued,
        "exp": expires,
        "jti": str(uuid.uuid4()),
    }


def mint_token(
    signing_key: Path | SigningKey,
    issuer: str,
    *,
    scope: str = DEFAULT_SCOPE,
    audience: str = LAB_AUDIENCE,
    lifetime_s: float = 3600,
    expired: bool = False,
    subject: str = "lab user",
) -> str:
    """A signed token of the issuer, without asking its server."""
    key = signing_key if isinstance(signing_key, SigningKey) else SigningKey.load(signing_key)
    claims = token_claims(
        issuer=issuer,
        subject=subject,
        scope=scope,
        audience=audience,
        lifetime_s=lifetime_s,
        expired=expired,
    )
    return key.sign_jwt(claims)


def decode_claims(token: str) -> dict[str, Any]:
    """The claims of a token, unverified (for tests and messages)."""
    payload = json.loads(b64url_decode(token.split(".")[1]))
    assert isinstance(payload, dict)
    return payload


# -- clients -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OAuthClient:
    """A registered client of the issuer: the tokens it gets live `lifetime_s`."""

    client_id: str
    client_secret: str
    lifetime_s: int
    scope: str = DEFAULT_SCOPE


def ensure_clients(path: Path) -> dict[str, OAuthClient]:
    """The registered clients, kept in `path` (0600); secrets are made once and kept."""
    clients = load_clients(path) if path.exists() else {}
    wanted = {
        client_id: clients.get(client_id)
        or OAuthClient(client_id, secrets.token_urlsafe(24), lifetime_s)
        for client_id, lifetime_s in CLIENT_LIFETIMES_S.items()
    }
    if wanted != clients:
        text = json.dumps({c.client_id: asdict(c) for c in wanted.values()}, indent=2)
        _write_secret(path, (text + "\n").encode())
    return wanted


def load_clients(path: Path) -> dict[str, OAuthClient]:
    data = json.loads(path.read_text())
    return {
        str(client_id): OAuthClient(
            client_id=str(client_id),
            client_secret=str(entry["client_secret"]),
            lifetime_s=int(entry["lifetime_s"]),
            scope=str(entry.get("scope", DEFAULT_SCOPE)),
        )
        for client_id, entry in data.items()
    }


# -- what xrootd's SciTokens plugin trusts -----------------------------------------------------


def seed_scitokens_cache(
    cache_home: Path, issuer: str, jwks: Mapping[str, object], owner: tuple[int, int] | None
) -> Path:
    """Put the issuer's keys in scitokens-cpp's key cache under `cache_home`
    ($XDG_CACHE_HOME of the xrootds), valid for years: the plugin then never fetches them."""
    folder = cache_home / "scitokens"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    database = folder / "scitokens_cpp.sqllite"  # sic: the library's spelling
    far = int(time.time()) + _CACHE_LIFETIME_S
    keys = json.dumps({"jwks": jwks, "expires": far, "next_update": far})
    with sqlite3.connect(database) as connection:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS keycache (issuer text UNIQUE PRIMARY KEY NOT NULL,"
            " keys text NOT NULL)"
        )
        connection.execute("INSERT OR REPLACE INTO keycache VALUES (?, ?)", (issuer, keys))
    connection.close()
    for path in (cache_home, folder, database):
        if owner is not None:
            os.chown(path, *owner)
    return database


# -- the server --------------------------------------------------------------------------------


@dataclass(frozen=True)
class IssuerConfig:
    """What `python -m workers.lab.issuer` reads from its --config file."""

    issuer: str
    port: int
    host_cert: str
    host_key: str
    signing_key: str
    clients: str
    ready_file: str

    @classmethod
    def read(cls, path: Path) -> IssuerConfig:
        data = json.loads(path.read_text())
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    def configuration(self) -> dict[str, object]:
        """The OpenID Connect discovery document."""
        return {
            "issuer": self.issuer,
            "jwks_uri": self.issuer + JWKS_PATH,
            "token_endpoint": self.issuer + TOKEN_PATH,
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "id_token_signing_alg_values_supported": ["ES256"],
            "scopes_supported": sorted({DEFAULT_SCOPE, *WRITE_SCOPE.split()}),
        }


class OAuthError(Exception):
    """An RFC 6749 5.2 error answer."""

    def __init__(self, status: HTTPStatus, error: str, description: str) -> None:
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


class IssuerServer(ThreadingHTTPServer):
    """HTTPS: each connection's TLS handshake runs in its own thread, not in accept()."""

    daemon_threads = True

    def __init__(self, config: IssuerConfig) -> None:
        self.config = config
        self.key = SigningKey.load(Path(config.signing_key))
        self.clients = load_clients(Path(config.clients))
        self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.tls.load_cert_chain(config.host_cert, config.host_key)
        super().__init__(("127.0.0.1", config.port), IssuerHandler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        raw = cast(socket.socket, request)
        raw.settimeout(_REQUEST_TIMEOUT_S)
        try:
            with self.tls.wrap_socket(raw, server_side=True) as tls:
                super().finish_request(tls, client_address)
        except (ssl.SSLError, OSError) as exc:
            sys.stderr.write(f"{client_address[0]}: TLS: {exc}\n")

    def grant(self, form: Mapping[str, str], basic: tuple[str, str] | None) -> dict[str, object]:
        """The client-credentials grant: the answer for a valid client, else OAuthError."""
        client = self.authenticate(form, basic)
        grant_type = form.get("grant_type")
        if grant_type != "client_credentials":
            raise OAuthError(
                HTTPStatus.BAD_REQUEST,
                "unsupported_grant_type" if grant_type else "invalid_request",
                f"grant_type must be client_credentials, not {grant_type!r}",
            )
        scope = " ".join(form.get("scope", client.scope).split())
        bad = [s for s in scope.split() if not _SCOPE.match(s)]
        if not scope or bad:
            raise OAuthError(
                HTTPStatus.BAD_REQUEST, "invalid_scope", f"not WLCG storage scopes: {bad}"
            )
        audience = form.get("audience", LAB_AUDIENCE)
        claims = token_claims(
            issuer=self.config.issuer,
            subject=client.client_id,
            scope=scope,
            audience=audience,
            lifetime_s=client.lifetime_s,
        )
        return {
            "access_token": self.key.sign_jwt(claims),
            "token_type": "Bearer",
            "expires_in": client.lifetime_s,
            "scope": scope,
        }

    def authenticate(self, form: Mapping[str, str], basic: tuple[str, str] | None) -> OAuthClient:
        client_id, secret = basic or (form.get("client_id", ""), form.get("client_secret", ""))
        client = self.clients.get(client_id)
        # Compare even for an unknown id, so that timing does not tell which ids exist.
        known = client.client_secret if client else secrets.token_urlsafe(24)
        if not hmac.compare_digest(secret.encode(), known.encode()) or client is None:
            raise OAuthError(HTTPStatus.UNAUTHORIZED, "invalid_client", "unknown client or secret")
        return client


class IssuerHandler(BaseHTTPRequestHandler):
    server: IssuerServer
    server_version = "fedprobe-lab-issuer"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        config = self.server.config
        if self.path == CONFIGURATION_PATH:
            self.answer(HTTPStatus.OK, config.configuration())
        elif self.path == JWKS_PATH:
            self.answer(HTTPStatus.OK, self.server.key.jwks())
        else:
            self.answer(HTTPStatus.NOT_FOUND, {"error": "not_found"})

    def do_POST(self) -> None:
        if self.path != TOKEN_PATH:
            self.answer(HTTPStatus.NOT_FOUND, {"error": "not_found"})
            return
        try:
            form = self.read_form()
            self.answer(HTTPStatus.OK, self.server.grant(form, self.basic_credentials()))
        except OAuthError as exc:
            headers = {"WWW-Authenticate": 'Basic realm="fedprobe lab"'}
            self.answer(
                exc.status,
                {"error": exc.error, "error_description": exc.description},
                headers if exc.status == HTTPStatus.UNAUTHORIZED else {},
            )

    def read_form(self) -> dict[str, str]:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 <= length <= _MAX_BODY:
            raise OAuthError(HTTPStatus.BAD_REQUEST, "invalid_request", "body too large")
        kind = self.headers.get("Content-Type", "").split(";")[0].strip()
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        if kind != "application/x-www-form-urlencoded":
            raise OAuthError(
                HTTPStatus.BAD_REQUEST,
                "invalid_request",
                "the body must be application/x-www-form-urlencoded",
            )
        return {name: values[0] for name, values in parse_qs(body).items()}

    def basic_credentials(self) -> tuple[str, str] | None:
        scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            client_id, _, secret = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        # RFC 6749 2.3.1: both are form-urlencoded before they are joined.
        return unquote(client_id.replace("+", " ")), unquote(secret.replace("+", " "))

    def answer(
        self,
        status: HTTPStatus,
        body: Mapping[str, object],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _write_secret(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    partial.replace(path)


def serve(config: IssuerConfig) -> None:
    """Serve until SIGTERM or SIGINT; write our pid to `ready_file` once listening."""
    server = IssuerServer(config)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, name="issuer", daemon=True)
    thread.start()
    Path(config.ready_file).write_text(f"{os.getpid()}\n")
    stop.wait()
    server.shutdown()
    server.server_close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.lab.issuer", description="The lab's OAuth2 token issuer."
    )
    parser.add_argument("--config", type=Path, required=True)
    options = parser.parse_args(argv)
    serve(IssuerConfig.read(options.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
