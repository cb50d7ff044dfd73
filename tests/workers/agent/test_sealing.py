"""A run's credential sealed to a vantage point's key opens only with that key, unchanged,
for that run and vantage point, and not after it expired (workers/agent/sealing.py)."""

from __future__ import annotations

import base64

import pytest

from workers.agent.sealing import (
    SEALED_LIFETIME_S,
    Sealed,
    SealingError,
    encode_key,
    fingerprint,
    new_private_key,
    open_sealed,
    seal,
)

SECRET = "eyJhbGciOiJFUzI1NiJ9.the-endpoints-token.sig"
NOW = 1_800_000_000.0


def sealed_for(key_text: str, run_id: int = 7, vantage_point: str = "far") -> str:
    return seal(Sealed(run_id, vantage_point, "token", SECRET), key_text, now=NOW)


def test_only_the_vantage_points_own_key_opens_it() -> None:
    key, other = new_private_key(), new_private_key()
    box = sealed_for(encode_key(key.public_key))
    assert SECRET not in box and SECRET not in base64.b64decode(box).decode(errors="replace")
    opened = open_sealed(box, key, run_id=7, vantage_point="far", now=NOW + 1)
    assert (opened.kind, opened.secret) == ("token", SECRET)
    with pytest.raises(SealingError, match="does not open"):
        open_sealed(box, other, run_id=7, vantage_point="far", now=NOW + 1)


def test_a_changed_box_does_not_open() -> None:
    key = new_private_key()
    raw = bytearray(base64.b64decode(sealed_for(encode_key(key.public_key))))
    raw[-1] ^= 1
    with pytest.raises(SealingError, match="does not open"):
        open_sealed(base64.b64encode(raw).decode(), key, run_id=7, vantage_point="far", now=NOW)


def test_a_box_is_for_its_run_and_vantage_point_and_expires() -> None:
    key = new_private_key()
    box = sealed_for(encode_key(key.public_key))
    with pytest.raises(SealingError, match="not run 8 of far"):
        open_sealed(box, key, run_id=8, vantage_point="far", now=NOW)
    with pytest.raises(SealingError, match="not run 7 of near"):
        open_sealed(box, key, run_id=7, vantage_point="near", now=NOW)
    with pytest.raises(SealingError, match="expired"):
        open_sealed(box, key, run_id=7, vantage_point="far", now=NOW + SEALED_LIFETIME_S + 1)


def test_a_fingerprint_names_a_key_and_a_bad_key_is_refused() -> None:
    text = encode_key(new_private_key().public_key)
    assert fingerprint(text).startswith("SHA256:")
    assert fingerprint(text) != fingerprint(encode_key(new_private_key().public_key))
    for bad in ("", "not base64!", base64.b64encode(b"short").decode()):
        with pytest.raises(SealingError):
            fingerprint(bad)
