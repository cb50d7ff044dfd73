"""Authenticated, TLS-protected endpoints of the real lab, through the `probe` command: each
protocol with each credential it takes, and the refusals the WLCG JWT compliance suite
checks (no credential, expired, wrong scope, wrong audience, a proxy or a server certificate
from an unknown CA, a name mismatch), each with its class and a message that says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workers.lab import Lab

pytestmark = pytest.mark.lab

FILE = "/fedprobe/file-1M"


def probe(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The run JSON of `python -m workers.engine ... --json` (exit status 0 or 1)."""
    done = subprocess.run(
        [sys.executable, "-m", "workers.engine", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode in (0, 1), done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def url(lab: Lab, endpoint: str, host: str | None = None) -> str:
    found = lab.endpoint(endpoint).file_url(FILE)
    return found.replace("127.0.0.1", host) if host else found


@pytest.fixture(scope="module")
def token_file(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory, "token", lab.mint_token())


def write(factory: pytest.TempPathFactory, name: str, text: str) -> Path:
    path = factory.mktemp("credentials") / name
    path.write_text(text)
    path.chmod(0o600)
    return path


def failure(result: dict[str, Any]) -> tuple[str, str]:
    assert result["status"] == "failed", result
    first = result["errors"][0]
    return first["class"], first["message"]


@pytest.mark.parametrize(
    ("endpoint", "method", "auth"),
    [
        ("local-roots", "direct", "token"),
        ("local-roots", "copy", "token"),
        ("local-https", "direct", "token"),
        ("local-https", "copy", "token"),
        ("local-davs", "direct", "token"),
        ("near-roots", "direct", "token"),
        ("near-https", "direct", "token"),
    ],
)
def test_a_token_reads_over_each_protocol_and_the_run_says_what_it_negotiated(
    lab: Lab, token_file: Path, endpoint: str, method: str, auth: str
) -> None:
    result = probe(
        url(lab, endpoint),
        f"--method={method}",
        "--pattern=random",
        "--clients=2",
        f"--token-file={token_file}",
        f"--ca-dir={lab.ca_dir()}",
    )
    assert result["status"] == "succeeded", result["errors"]
    assert result["auth"] == auth
    assert result["tls"]["version"].startswith("TLSv1"), result["tls"]
    assert "5.5.3" in result["server_version"]
    assert result["bytes_read"] > 0


@pytest.mark.parametrize(
    ("endpoint", "method", "auth"),
    [
        ("local-gsi-root", "direct", "gsi"),
        ("local-gsi-root", "copy", "gsi"),
        ("local-gsi-https", "direct", "x509"),
        ("near-gsi-root", "direct", "gsi"),
    ],
)
def test_an_x509_proxy_reads_with_gsi_and_as_tls_client_certificate(
    lab: Lab, endpoint: str, method: str, auth: str
) -> None:
    result = probe(
        url(lab, endpoint),
        f"--method={method}",
        f"--proxy={lab.write_proxy()}",
        f"--ca-dir={lab.ca_dir()}",
    )
    assert result["status"] == "succeeded", result["errors"]
    assert result["auth"] == auth
    assert (result["tls"] is not None) == (auth == "x509")


def test_discovery_finds_the_token_of_bearer_token_file(lab: Lab, token_file: Path) -> None:
    result = probe(
        url(lab, "local-roots"),
        f"--ca-dir={lab.ca_dir()}",
        env={"BEARER_TOKEN_FILE": str(token_file)},
    )
    assert (result["status"], result["auth"]) == ("succeeded", "token")


@pytest.mark.parametrize(
    "endpoint", ["local-roots", "local-https", "local-gsi-root", "local-gsi-https"]
)
def test_without_a_credential_the_site_refuses_as_auth(lab: Lab, endpoint: str) -> None:
    result = probe(url(lab, endpoint), "--anonymous", f"--ca-dir={lab.ca_dir()}")
    error_class, message = failure(result)
    assert error_class == "auth", message
    assert result["auth"] == "none"


@pytest.mark.parametrize("endpoint", ["local-roots", "local-https"])
def test_an_expired_token_fails_before_any_client_naming_its_expiry(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory, endpoint: str
) -> None:
    expired = write(tmp_path_factory, "expired", lab.mint_token(expired=True))
    result = probe(url(lab, endpoint), f"--token-file={expired}", f"--ca-dir={lab.ca_dir()}")
    error_class, message = failure(result)
    assert error_class == "auth"
    assert "token expired at" in message
    assert result["clients"] == []
    assert result["errors"][0]["phase"] == "credential"  # the tester's fault, not the site's


def test_a_token_ending_before_the_run_deadline_fails_naming_both(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory
) -> None:
    short = write(tmp_path_factory, "short", lab.mint_token(lifetime_s=30))
    result = probe(url(lab, "local-roots"), f"--token-file={short}", f"--ca-dir={lab.ca_dir()}")
    error_class, message = failure(result)
    assert error_class == "auth"
    assert "before the run's deadline" in message
    assert result["errors"][0]["phase"] == "credential"


@pytest.mark.parametrize("endpoint", ["local-roots", "local-https"])
@pytest.mark.parametrize(
    "claims",
    [{"scope": "storage.read:/elsewhere"}, {"audience": "https://another.site.example"}],
    ids=["wrong-scope", "wrong-audience"],
)
def test_a_token_for_another_path_or_audience_is_refused_as_auth(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory, endpoint: str, claims: dict[str, str]
) -> None:
    token = write(tmp_path_factory, "token", lab.mint_token(**claims))  # type: ignore[arg-type]
    result = probe(url(lab, endpoint), f"--token-file={token}", f"--ca-dir={lab.ca_dir()}")
    error_class, message = failure(result)
    assert error_class == "auth", message
    assert any(word in message.lower() for word in ("permission", "denied", "403", "auth"))
    assert "phase" not in result["errors"][0]  # the site refused: its fault


@pytest.mark.parametrize("endpoint", ["local-gsi-root", "local-gsi-https"])
def test_a_proxy_from_an_unknown_ca_is_refused_as_auth(lab: Lab, endpoint: str) -> None:
    rogue = lab.write_proxy(rogue=True)
    result = probe(url(lab, endpoint), f"--proxy={rogue}", f"--ca-dir={lab.ca_dir()}")
    error_class, message = failure(result)
    assert error_class == "auth", message


def test_an_expired_proxy_fails_before_any_client(lab: Lab) -> None:
    expired = lab.write_proxy(expired=True)
    result = probe(url(lab, "local-gsi-root"), f"--proxy={expired}", f"--ca-dir={lab.ca_dir()}")
    error_class, message = failure(result)
    assert (error_class, result["clients"]) == ("auth", [])
    assert "X.509 proxy expired at" in message


@pytest.mark.parametrize("endpoint", ["local-roots", "local-https", "local-gsi-https"])
def test_a_server_certificate_from_an_unknown_ca_is_class_tls(
    lab: Lab, token_file: Path, endpoint: str
) -> None:
    credential = (
        f"--proxy={lab.write_proxy()}" if "gsi" in endpoint else f"--token-file={token_file}"
    )
    result = probe(url(lab, endpoint), credential, f"--ca-dir={lab.rogue_ca_dir()}")
    error_class, message = failure(result)
    assert error_class == "tls", message
    assert "unknown CA" in message


@pytest.mark.parametrize("endpoint", ["local-roots", "local-https"])
def test_a_host_name_the_certificate_does_not_name_is_class_tls(
    lab: Lab, token_file: Path, endpoint: str
) -> None:
    result = probe(
        url(lab, endpoint, host="127.0.0.2"),
        f"--token-file={token_file}",
        f"--ca-dir={lab.ca_dir()}",
    )
    error_class, message = failure(result)
    assert error_class == "tls", message
    assert "name mismatch" in message


def test_a_token_is_never_sent_over_plain_http(lab: Lab, token_file: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workers.engine",
            url(lab, "local-http"),
            f"--token-file={token_file}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "never sent over plain http" in done.stderr
