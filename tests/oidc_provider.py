"""A small OpenID Connect provider for the single sign-on tests, on a free loopback port.

It serves what a real provider (INDIGO IAM, CERN SSO's Keycloak) serves for the
authorization code flow: the discovery document, an authorize endpoint that approves its
one configured user at once, a token endpoint (client_secret_basic, PKCE S256) that issues
an RS256-signed ID token, the JWKS, and userinfo. Knobs on the instance make it misbehave as
an attacker or a misconfigured provider would: another signing key, issuer, audience or
nonce in the ID token.

    with OidcProvider(client_id="fedprobe", client_secret="s3cret") as provider:
        provider.user = {"sub": "1", "preferred_username": "alice", "groups": [...]}
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

KID = "test-key-1"


class OidcProvider:
    def __init__(self, *, client_id: str, client_secret: str) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.user: dict[str, Any] = {"sub": "user-1", "preferred_username": "alice"}
        # Misbehaviour, all off: sign with another key, name another issuer or audience,
        # put another nonce in the ID token.
        self.signing_key: rsa.RSAPrivateKey | None = None
        self.id_token_issuer: str | None = None
        self.id_token_audience: str | None = None
        self.id_token_nonce: str | None = None
        self.codes: dict[str, dict[str, Any]] = {}
        self.access_tokens: dict[str, dict[str, Any]] = {}
        self.token_requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> OidcProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "code_challenge_methods_supported": ["S256"],
        }

    def jwks(self) -> dict[str, Any]:
        jwk = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]}

    def authorize(self, query: dict[str, str]) -> tuple[int, str]:
        """Approve the configured user: a code for the client, back to its redirect URI."""
        if query.get("client_id") != self.client_id or query.get("response_type") != "code":
            return 400, "unknown client or response type"
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            return 400, "PKCE S256 required"
        code = secrets.token_urlsafe(16)
        self.codes[code] = {**query, "claims": dict(self.user)}
        back = urlencode({"code": code, "state": query.get("state", "")})
        return 302, f"{query['redirect_uri']}?{back}"

    def token(self, form: dict[str, str], authorization: str) -> tuple[int, dict[str, Any]]:
        self.token_requests += 1
        expected = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        if authorization != f"Basic {expected}":
            return 401, {"error": "invalid_client"}
        grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or form.get("grant_type") != "authorization_code":
            return 400, {"error": "invalid_grant"}
        if form.get("redirect_uri") != grant["redirect_uri"]:
            return 400, {"error": "invalid_grant", "error_description": "redirect_uri"}
        verifier = form.get("code_verifier", "").encode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
        if challenge.decode() != grant["code_challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "code_verifier"}
        access_token = secrets.token_urlsafe(24)
        self.access_tokens[access_token] = grant["claims"]
        return 200, {
            "access_token": access_token,
            "token_type": "Bearer",
            "expires_in": 300,
            "id_token": self.id_token(grant),
        }

    def id_token(self, grant: dict[str, Any]) -> str:
        now = int(time.time())
        claims = {
            "iss": self.id_token_issuer or self.issuer,
            "aud": self.id_token_audience or self.client_id,
            "sub": grant["claims"]["sub"],
            "iat": now,
            "exp": now + 300,
            "nonce": self.id_token_nonce or grant.get("nonce"),
        }
        key = self.signing_key or self.key
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": KID})

    def userinfo(self, authorization: str) -> tuple[int, dict[str, Any]]:
        claims = self.access_tokens.get(authorization.removeprefix("Bearer "))
        if claims is None:
            return 401, {"error": "invalid_token"}
        return 200, claims


def _handler(provider: OidcProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {name: values[0] for name, values in parse_qs(url.query).items()}
            if url.path == "/.well-known/openid-configuration":
                self._json(200, provider.discovery())
            elif url.path == "/jwks":
                self._json(200, provider.jwks())
            elif url.path == "/userinfo":
                self._json(*provider.userinfo(self.headers.get("Authorization", "")))
            elif url.path == "/authorize":
                status, where = provider.authorize(query)
                self.send_response(status)
                if status == 302:
                    self.send_header("Location", where)
                self.end_headers()
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length).decode()
            form = {name: values[0] for name, values in parse_qs(body).items()}
            if urlsplit(self.path).path == "/token":
                self._json(*provider.token(form, self.headers.get("Authorization", "")))
            else:
                self._json(404, {"error": "not found"})

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet tests

    return Handler
