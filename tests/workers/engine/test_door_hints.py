"""A refusal that names its likely cause, against the real lab: a token whose scopes cover
the file but whose audience the door does not accept is told so, and roots:// to a port that
speaks no TLS (a plain xrootd port) says to try root:// instead of blaming certificates."""

from __future__ import annotations

import pytest

from tests.workers.engine.test_authenticated_sites import FILE, failure, probe, url, write
from workers.lab import Lab

pytestmark = pytest.mark.lab


@pytest.mark.parametrize("endpoint", ["local-roots", "local-https"])
def test_a_token_for_another_audience_is_refused_naming_its_audience(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory, endpoint: str
) -> None:
    token = write(tmp_path_factory, "token", lab.mint_token(audience="https://other.example"))
    result = probe(url(lab, endpoint), f"--token-file={token}", f"--ca-dir={lab.ca_dir()}")
    error_class, message = failure(result)
    assert error_class == "auth", message
    assert (
        "the token's audience (https://other.example) is likely not one this door accepts"
        in message
    ), message


def test_a_token_for_another_path_is_refused_naming_its_scopes_not_its_audience(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory
) -> None:
    token = write(tmp_path_factory, "token", lab.mint_token(scope="storage.read:/elsewhere"))
    result = probe(url(lab, "local-roots"), f"--token-file={token}", f"--ca-dir={lab.ca_dir()}")
    error_class, message = failure(result)
    assert error_class == "auth", message
    assert f"the token's scopes (storage.read:/elsewhere) do not cover reading {FILE}" in message
    assert "audience (" not in message


def test_roots_to_a_plain_xrootd_port_says_to_try_root(lab: Lab) -> None:
    plain = url(lab, "local-root")
    assert plain.startswith("root://")
    result = probe("roots" + plain[len("root") :], f"--ca-dir={lab.ca_dir()}")
    error_class, message = failure(result)
    assert error_class == "tls", message
    assert "does not speak TLS: try root://" in message, message
    assert "certificate" not in message, message
