"""Credentials: what may be shown of them, when they are refused, and where they live."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from workers.engine.credentials import (
    Access,
    AuthMethod,
    Credential,
    CredentialKind,
    discover_credential,
    remove_stale_run_dirs,
    run_secrets,
    scope_covers,
)
from workers.engine.errors import ErrorClass, InvalidParams, ProbeError
from workers.engine.httpclient import token_may_go
from workers.engine.params import RunParams
from workers.engine.urls import check_credential_hosts

NOW = datetime.now(UTC)


def jwt(**claims: object) -> str:
    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'ES256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def proxy_pem(not_after: datetime) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lab user")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(7)
        .not_valid_before(NOW - timedelta(hours=3))
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return (cert.public_bytes(serialization.Encoding.PEM) + key_pem).decode()


def test_jwt_claims_are_shown_without_the_token() -> None:
    token = jwt(
        iss="https://iam.example.org/",
        sub="probe",
        aud=["https://eos.example.org", "any"],
        scope="storage.read:/atlas openid",
        exp=int((NOW + timedelta(hours=1)).timestamp()),
    )
    credential = Credential.token(token + "\n")
    info = credential.info()
    assert (info.issuer, info.subject) == ("https://iam.example.org/", "probe")
    assert info.audience == ("https://eos.example.org", "any")
    assert info.scopes == ("storage.read:/atlas", "openid")
    assert info.expires_at is not None and info.expires_at > NOW
    assert token not in repr(credential)
    assert token not in json.dumps(info.to_json())


def test_an_opaque_token_has_no_claims_and_a_malformed_one_is_refused() -> None:
    assert Credential.token("opaque-0123456789").info().issuer is None
    with pytest.raises(InvalidParams) as refused:
        Credential.token("two words")
    assert refused.value.field == "credential"
    with pytest.raises(InvalidParams):
        Credential.token("eyJub3Q.anlzb24.x")


def test_an_expired_token_or_one_ending_before_the_deadline_is_refused_naming_when() -> None:
    ended = NOW - timedelta(minutes=5)
    expired = Credential.token(jwt(exp=int(ended.timestamp())))
    with pytest.raises(ProbeError) as refused:
        expired.check_valid(until=NOW)
    assert refused.value.error_class is ErrorClass.AUTH
    assert ended.isoformat(timespec="seconds") in refused.value.message
    short = Credential.token(jwt(exp=int((NOW + timedelta(minutes=1)).timestamp())))
    short.check_valid(until=NOW)
    with pytest.raises(ProbeError) as late:
        short.check_valid(until=NOW + timedelta(minutes=10), why="the run's deadline")
    assert "before the run's deadline" in late.value.message


def test_proxy_subject_and_expiry_are_read_and_an_expired_proxy_refused() -> None:
    proxy = Credential.x509_proxy(proxy_pem(NOW - timedelta(hours=1)))
    assert proxy.info().subject == "CN=lab user"
    with pytest.raises(ProbeError) as refused:
        proxy.check_valid(until=NOW)
    assert refused.value.error_class is ErrorClass.AUTH
    assert "X.509 proxy expired" in refused.value.message
    with pytest.raises(InvalidParams, match="no private key"):
        Credential.x509_proxy(proxy_pem(NOW).split("-----BEGIN EC")[0])


@pytest.mark.parametrize(
    ("scopes", "path", "covered"),
    [
        (("storage.read:/fedprobe",), "/fedprobe/file-1M", True),
        (("storage.read:/fedprobe",), "/fedprobe", True),
        (("storage.read:/fedprobe",), "/fedprobeX/file", False),
        (("storage.read:/",), "/anything/at/all", True),
        (("storage.create:/fedprobe", "openid"), "/fedprobe/file-1M", False),
        (("storage.modify:/fed",), "/fed/a-4M", True),
    ],
)
def test_scope_covers_the_path_below_it(scopes: tuple[str, ...], path: str, covered: bool) -> None:
    assert scope_covers(scopes, path) is covered


def test_a_token_is_never_sent_over_plain_http_and_a_proxy_never_to_a_file() -> None:
    token = Credential.token("opaque-token")
    with pytest.raises(InvalidParams, match="plain http"):
        RunParams(urls=("http://127.0.0.1:1/f",), credential=token).validate()
    assert token.auth_method("roots") is AuthMethod.TOKEN
    proxy = Credential.x509_proxy(proxy_pem(NOW + timedelta(days=1)))
    assert proxy.auth_method("root") is AuthMethod.GSI
    assert proxy.auth_method("davs") is AuthMethod.X509
    with pytest.raises(InvalidParams):
        RunParams(urls=("file:///tmp/f",), credential=proxy).validate()


@pytest.mark.parametrize(
    ("target", "hosts", "allowed"),
    [
        ("https://door.example.org:8443/f", (), True),  # its own origin
        ("https://door.example.org:2880/f", (), False),  # another port: another service
        ("https://pool7.example.org/f", (), False),  # by default, nowhere else
        ("https://pool7.example.org/f", ("pool7.example.org",), True),
        ("https://pool7.example.org/f", (".example.org",), True),
        ("https://pool7.dc.example.org/f", (".example.org",), True),
        ("https://pool8.example.org/f", ("pool7.example.org",), False),
        ("http://pool7.example.org/f", (".example.org",), False),  # never in clear
        ("https://example.org.evil.com/f", (".example.org",), False),
        ("https://evil.com/f", (".example.org",), False),
        ("https://10.0.0.1/f", ("10.0.0.1",), True),
        ("https://10.0.0.2/f", ("10.0.0.1",), False),
    ],
)
def test_the_token_follows_redirects_to_its_origin_and_the_listed_hosts_over_https(
    target: str, hosts: tuple[str, ...], allowed: bool
) -> None:
    origin = httpx.URL("https://door.example.org:8443/data/f")
    assert token_may_go(origin, httpx.URL(target), check_credential_hosts(hosts)) is allowed


def test_a_token_of_se_ac_uk_never_goes_to_attacker_ac_uk() -> None:
    """The audit's case: the rule before gave a token to any host of the endpoint host's
    parent domain, and ac.uk is a public suffix."""
    origin = httpx.URL("https://se.ac.uk/data/f")
    assert not token_may_go(origin, httpx.URL("https://attacker.ac.uk/f"))
    with pytest.raises(InvalidParams, match="public suffix"):
        check_credential_hosts([".ac.uk"])
    assert token_may_go(
        origin, httpx.URL("https://pool.se.ac.uk/f"), check_credential_hosts([".se.ac.uk"])
    )


@pytest.mark.parametrize(
    ("given", "written"),
    [
        (["Pool7.Example.ORG", " .example.org "], ("pool7.example.org", ".example.org")),
        (["bücher.example", "[::1]", "10.0.0.1"], ("xn--bcher-kva.example", "::1", "10.0.0.1")),
    ],
)
def test_credential_hosts_are_written_as_they_are_matched(
    given: list[str], written: tuple[str, ...]
) -> None:
    assert check_credential_hosts(given) == written


@pytest.mark.parametrize(
    "bad", [".org", ".github.io", ".co.uk", "https://se.example.org", "se.example.org:443", "a b"]
)
def test_a_public_suffix_or_anything_but_a_host_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(InvalidParams) as refused:
        check_credential_hosts([bad])
    assert refused.value.field == "credential_hosts"


def test_a_token_for_an_address_goes_only_to_that_address() -> None:
    origin = httpx.URL("https://127.0.0.1:1094/f")
    assert not token_may_go(origin, httpx.URL("https://127.0.0.1:2094/f"))
    assert not token_may_go(origin, httpx.URL("https://127.0.0.2:1094/f"))
    assert token_may_go(origin, httpx.URL("https://127.0.0.1:1094/g"))


def test_run_secrets_are_private_and_removed_when_the_run_ends(tmp_path: Path) -> None:
    base = tmp_path / "secrets"
    with run_secrets(
        Credential.token("opaque-token"), scheme="https", ca_dir=None, base=base
    ) as access:
        assert access.token_file is not None
        token_file = Path(access.token_file)
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        assert access.bearer_token() == "opaque-token"
    assert not token_file.exists()
    assert list(base.iterdir()) == []


def test_the_folder_of_a_killed_process_is_removed_at_the_next_start(tmp_path: Path) -> None:
    base = tmp_path / "secrets"
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from workers.engine.credentials import Credential, run_secrets\n"
        "with run_secrets(Credential.token('t0k3n'), scheme='roots', ca_dir=None,"
        f" base=Path({str(base)!r})) as access:\n"
        "    print(access.token_file, flush=True)\n"
        "    os.kill(os.getpid(), 9)\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    left = Path(killed.stdout.strip())
    assert killed.returncode == -9 and left.exists()
    with run_secrets(Credential.token("mine"), scheme="roots", ca_dir=None, base=base) as mine:
        assert remove_stale_run_dirs(base) == [left.parent]
        assert mine.token_file is not None and Path(mine.token_file).exists()
    assert not left.parent.exists()


def test_a_client_without_credential_presents_nothing_found_on_the_host() -> None:
    env = {"BEARER_TOKEN": "ambient", "X509_USER_PROXY": "/tmp/x509up_u0", "PATH": "/bin"}
    Access(ca_dir="/grid/ca").apply_environment(env)
    assert "BEARER_TOKEN" not in env and "X509_USER_PROXY" not in env
    assert env["BEARER_TOKEN_FILE"] == os.devnull
    assert env["X509_CERT_DIR"] == "/grid/ca"
    Access(AuthMethod.TOKEN, token_file="/run/t", ca_dir=None).apply_environment(env)
    assert (env["BEARER_TOKEN_FILE"], env["XrdSecPROTOCOL"]) == ("/run/t", "ztn")


def test_discovery_follows_the_wlcg_order(tmp_path: Path) -> None:
    token_file = tmp_path / "bt"
    token_file.write_text("from-file\n")
    env = {"BEARER_TOKEN_FILE": str(token_file), "X509_USER_PROXY": str(tmp_path / "none")}
    found = discover_credential("roots", env)
    assert found is not None and (found.kind, found.secret) == (CredentialKind.TOKEN, "from-file")
    env["BEARER_TOKEN"] = "from-env"
    found = discover_credential("davs", env)
    assert found is not None and found.secret == "from-env"
    assert discover_credential("http", env) is None
    proxy = tmp_path / "x509up"
    proxy.write_text(proxy_pem(NOW + timedelta(days=1)))
    found = discover_credential("gsiftp", {"X509_USER_PROXY": str(proxy)})
    assert found is not None and found.kind is CredentialKind.X509_PROXY


def test_a_live_run_of_another_instance_keeps_its_folder_whatever_its_process_id(
    tmp_path: Path,
) -> None:
    """Instances sharing the base folder (two workers of one user, containers sharing /tmp
    whose process ids are their own) never remove each other's live run folders: the run's
    lock says whose a folder is, not the process id in its name."""
    base = tmp_path / "secrets"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from workers.engine.credentials import Credential, run_secrets\n"
        "with run_secrets(Credential.token('t0k3n'), scheme='roots', ca_dir=None,"
        f" base=Path({str(base)!r})) as access:\n"
        "    print(access.token_file, flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None
        theirs = Path(other.stdout.readline().strip()).parent
        # As another pid namespace shows it: a process id that is nobody's here.
        elsewhere = theirs.with_name(f"run-{2**22 + 17}-{theirs.name.rsplit('-', 1)[1]}")
        theirs.rename(elsewhere)
        assert remove_stale_run_dirs(base) == []
        assert (elsewhere / "token").read_text() == "t0k3n"
    finally:
        assert other.stdin is not None
        other.stdin.write("\n")
        other.stdin.flush()
        other.wait(30)
    assert not elsewhere.exists() or remove_stale_run_dirs(base) == [elsewhere]
    assert list(base.iterdir()) == []
