"""A run's credential, sealed to one vantage point's key: only that vantage point's private
key opens it, and only for the run it was sealed for.

libsodium's sealed box (PyNaCl `SealedBox`: X25519 with an ephemeral key, XSalsa20-Poly1305):
the ciphertext is authenticated, so a changed byte fails to open. Who sealed it is told by
the channel it came over: the server's HTTPS answer to the agent's claim, verified against
the agent's CA folder. Inside the box, the run and the vantage point it is for and an expiry:
a box copied into another run's answer, or kept and replayed later, does not open as
a credential for it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass

from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

# A box may be opened this long after it was sealed (the claim's answer is read at once).
SEALED_LIFETIME_S = 600


class SealingError(Exception):
    """A key or a box that cannot be used; the message says why (never a secret)."""


def new_private_key() -> PrivateKey:
    return PrivateKey.generate()


def encode_key(key: PublicKey | PrivateKey) -> str:
    return base64.b64encode(bytes(key)).decode("ascii")


def public_key(text: str) -> PublicKey:
    """A public key as enrolment sends it (base64 of its 32 bytes)."""
    try:
        raw = base64.b64decode(text, validate=True)
        return PublicKey(raw)
    except (ValueError, CryptoError, TypeError):
        raise SealingError("not an X25519 public key (base64 of 32 bytes)") from None


def private_key(text: str) -> PrivateKey:
    try:
        return PrivateKey(base64.b64decode(text, validate=True))
    except (ValueError, CryptoError, TypeError):
        raise SealingError("not an X25519 private key (base64 of 32 bytes)") from None


def fingerprint(text: str) -> str:
    """What pages and the API show of a public key: SHA256:<base64 of its digest>, as ssh."""
    digest = hashlib.sha256(public_key(text).encode()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class Sealed:
    """What a box holds: the credential of one run, for one vantage point."""

    run_id: int
    vantage_point: str
    kind: str  # "token" or "x509_proxy"
    secret: str


def seal(credential: Sealed, recipient: str, *, now: float | None = None) -> str:
    """The credential sealed to `recipient` (its base64 public key), base64."""
    sealed_at = time.time() if now is None else now
    payload = json.dumps(
        {
            "run": credential.run_id,
            "vantage_point": credential.vantage_point,
            "kind": credential.kind,
            "secret": credential.secret,
            "expires": sealed_at + SEALED_LIFETIME_S,
        }
    ).encode()
    box = SealedBox(public_key(recipient)).encrypt(payload)
    return base64.b64encode(box).decode("ascii")


def open_sealed(
    text: str, key: PrivateKey, *, run_id: int, vantage_point: str, now: float | None = None
) -> Sealed:
    """Open a box sealed to `key` for run `run_id` of `vantage_point`; SealingError when it is
    not ours, was changed, is for another run or vantage point, or has expired."""
    try:
        payload = json.loads(SealedBox(key).decrypt(base64.b64decode(text, validate=True)))
    except (ValueError, CryptoError, TypeError):
        raise SealingError(
            "the sealed credential does not open with this vantage point's key"
        ) from None
    if payload.get("run") != run_id or payload.get("vantage_point") != vantage_point:
        raise SealingError(
            f"the sealed credential is for run {payload.get('run')} of "
            f"{payload.get('vantage_point')}, not run {run_id} of {vantage_point}"
        )
    if (time.time() if now is None else now) > float(payload.get("expires", 0)):
        raise SealingError("the sealed credential has expired")
    return Sealed(run_id, vantage_point, str(payload["kind"]), str(payload["secret"]))
