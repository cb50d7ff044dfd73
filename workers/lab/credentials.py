"""What the authenticated sites trust and what clients present to them: the lab's PKI (pki.py),
the issuer's signing key and its OAuth2 clients (issuer.py), in the lab dir's pki/ and certs/.

Made once per lab dir and kept across `up`s (a secret handed out stays valid); only the
issuer's URL, which holds the lab's port, changes with the base port.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from workers.lab.errors import LabError
from workers.lab.issuer import (
    DEFAULT_CLIENT_ID,
    DEFAULT_SCOPE,
    LAB_AUDIENCE,
    SHORT_CLIENT_ID,
    TOKEN_PATH,
    SigningKey,
    ensure_clients,
    load_clients,
    mint_token,
    scratch_write_scope,
)
from workers.lab.paths import LabPaths
from workers.lab.pki import Authority, LabPki
from workers.lab.servers import Tls


@dataclass(frozen=True)
class LabCredentials:
    """The lab dir's credentials, for tokens of the issuer at `issuer`."""

    paths: LabPaths
    issuer: str

    @property
    def pki(self) -> LabPki:
        return LabPki(self.paths.pki, self.paths.certs)

    @property
    def authority(self) -> Authority:
        return self.pki.lab

    def ensure(self, key_owner: tuple[int, int] | None) -> None:
        """Make what is missing: the CAs and their certificates, the signing key, clients."""
        self.pki.ensure(key_owner)
        SigningKey.ensure(self.paths.signing_key)
        ensure_clients(self.paths.oauth_clients)

    def server_tls(self) -> Tls:
        lab = self.authority
        return Tls(cert=lab.host_cert, key=lab.host_key, ca_dir=lab.ca_dir)

    def signing_key(self) -> SigningKey:
        return SigningKey.load(self.paths.signing_key)

    def mint_token(
        self,
        scope: str = DEFAULT_SCOPE,
        audience: str = LAB_AUDIENCE,
        lifetime_s: float = 3600,
        expired: bool = False,
    ) -> str:
        return mint_token(
            self.paths.signing_key,
            self.issuer,
            scope=scope,
            audience=audience,
            lifetime_s=lifetime_s,
            expired=expired,
        )

    def write_token(self, path: Path, token: str) -> Path:
        """A token file for BEARER_TOKEN_FILE: XrdSecztn refuses one others may read."""
        partial = path.with_name(path.name + ".partial")
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        partial.replace(path)
        return path

    def write_proxy(
        self, path: Path | None = None, *, expired: bool = False, rogue: bool = False
    ) -> Path:
        authority = self.pki.rogue if rogue else self.pki.lab
        if not authority.user_cert.exists():
            raise LabError(f"no lab PKI in {self.paths.root}: run `lab up` there first")
        target = path or self.paths.proxy(expired=expired, rogue=rogue)
        return authority.write_proxy(target, expired=expired)

    def oauth_client(self, short: bool = False, scratch_path: str | None = None) -> dict[str, str]:
        """What a fedprobe `oauth-client` credential holds, for one of the issuer's clients:
        asking for its read-only scope, or with `scratch_path` for writes there too."""
        client = load_clients(self.paths.oauth_clients)[
            SHORT_CLIENT_ID if short else DEFAULT_CLIENT_ID
        ]
        return {
            "token_url": self.issuer + TOKEN_PATH,
            "client_id": client.client_id,
            "client_secret": client.client_secret,
            "scope": scratch_write_scope(scratch_path) if scratch_path else client.scope,
            "audience": LAB_AUDIENCE,
        }
