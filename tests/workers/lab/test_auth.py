"""The lab's authenticated sites against their real servers: bearer tokens over roots:// and
https, X.509 proxies over gsi root:// and https, the issuer's client-credentials grant, and
the credentials the lab hands out."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from workers.lab import Lab, LabError, servers
from workers.lab.issuer import LAB_AUDIENCE, SigningKey, b64url_decode, decode_claims, mint_token
from workers.lab.pki import USER_DN, LabPki, subject_hash
from workers.lab.ports import free_base_port

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[3]
FILE = "/fedprobe/file-1M"
SITES = ("local", "near", "far")
REFUSED_LOGIN = "No protocols left to try"  # XrdCl: no credential the server takes
REFUSED_PATH = "permission denied"  # XrdCl: logged in, but the token does not cover the file
_CLIENT_SETTINGS = ("XRD_", "X509_", "BEARER_TOKEN", "XrdSec")

# XrdCl reads its credentials from the environment once per process: one child per read.
_READ = """
import json, sys
from XRootD import client
with client.File() as remote:
    status, _ = remote.open(sys.argv[1])
    data = remote.read(0, 4096)[1] if status.ok else b""
print(json.dumps({"ok": status.ok, "message": status.message, "data": data.hex()}))
"""


def xrootd_read(url: str, env: dict[str, str]) -> dict[str, Any]:
    """Open `url` and read its first 4 KiB in a child process with `env`'s credentials."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(_CLIENT_SETTINGS)}
    quick = {
        "XRD_CONNECTIONRETRY": "1",
        "XRD_CONNECTIONWINDOW": "5",
        "XRD_REQUESTTIMEOUT": "10",
        "XRD_STREAMTIMEOUT": "10",
        "RES_OPTIONS": "timeout:1 attempts:3",
    }
    done = subprocess.run(
        [sys.executable, "-c", _READ, url],
        env=base | quick | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def first_bytes(lab: Lab) -> bytes:
    return (lab.data_dir("local") / FILE.lstrip("/")).read_bytes()[:4096]


def token_file(folder: Path, token: str) -> Path:
    """A token file as XrdSecztn wants it: readable by its owner only."""
    path = folder / f"token-{len(list(folder.glob('token-*')))}"
    path.touch(mode=0o600)
    path.write_text(token + "\n")
    return path


def token_env(lab: Lab, path: Path) -> dict[str, str]:
    return {
        "BEARER_TOKEN_FILE": str(path),
        "X509_CERT_DIR": str(lab.ca_dir()),
        "XrdSecPROTOCOL": "ztn",
    }


def proxy_env(lab: Lab, proxy: Path, ca_dir: Path | None = None) -> dict[str, str]:
    return {
        "X509_USER_PROXY": str(proxy),
        "X509_CERT_DIR": str(ca_dir or lab.ca_dir()),
        "XrdSecPROTOCOL": "gsi",
    }


def lab_tls(lab: Lab, client_cert: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(lab.ca_file()))
    if client_cert is not None:
        context.load_cert_chain(client_cert)
    return context


def https_get(url: str, tls: ssl.SSLContext, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(verify=tls, timeout=10) as client:
        return client.get(url, headers=headers | {"Range": "bytes=0-4095"})


def run_cli(*args: str, via: str = "module") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "manage.py", "lab"] if via == "manage" else [
        sys.executable, "-m", "workers.lab"
    ]  # fmt: skip
    return subprocess.run(
        [*command, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


# -- tokens ------------------------------------------------------------------------------------


@pytest.mark.parametrize("site", SITES)
def test_a_token_reads_over_roots_at_every_site(lab: Lab, site: str, tmp_path: Path) -> None:
    token = token_file(tmp_path, lab.mint_token())
    answer = xrootd_read(lab.endpoint(f"{site}-roots").file_url(FILE), token_env(lab, token))
    assert answer["ok"], answer["message"]
    assert bytes.fromhex(answer["data"]) == first_bytes(lab)


@pytest.mark.parametrize("site", SITES)
def test_a_token_reads_over_https_at_every_site(lab: Lab, site: str) -> None:
    url = lab.endpoint(f"{site}-https").file_url(FILE)
    response = https_get(url, lab_tls(lab), lab.mint_token())
    assert response.status_code == 206
    assert response.content == first_bytes(lab)


def test_davs_is_webdav_of_the_local_token_site(lab: Lab) -> None:
    davs = lab.endpoint("local-davs")
    assert urlsplit(davs.url).port == port_of(lab.endpoint("local-https").url)
    url = davs.file_url(FILE).replace("davs://", "https://", 1)
    with httpx.Client(verify=lab_tls(lab), timeout=10) as client:
        listed = client.request(
            "PROPFIND",
            url,
            headers={"Depth": "0", "Authorization": f"Bearer {lab.mint_token()}"},
        )
        anonymous = client.request("PROPFIND", url, headers={"Depth": "0"})
    assert listed.status_code == 207
    assert "<lp1:getcontentlength>1048576<" in listed.text
    assert anonymous.status_code == 403


REFUSED_TOKENS = [
    pytest.param(None, REFUSED_LOGIN, id="no-token"),
    pytest.param({"expired": True}, REFUSED_LOGIN, id="expired"),
    pytest.param({"scope": "storage.read:/elsewhere"}, REFUSED_PATH, id="other-path"),
    pytest.param({"audience": "https://elsewhere.example"}, REFUSED_PATH, id="other-audience"),
]


@pytest.mark.parametrize(("token", "refusal"), REFUSED_TOKENS)
def test_roots_refuses_a_token_that_does_not_open_the_file(
    lab: Lab, tmp_path: Path, token: dict[str, Any] | None, refusal: str
) -> None:
    env = token_env(lab, tmp_path / "missing")
    if token is not None:
        env = token_env(lab, token_file(tmp_path, lab.mint_token(**token)))
    answer = xrootd_read(lab.endpoint("near-roots").file_url(FILE), env)
    assert not answer["ok"]
    assert refusal in answer["message"]


@pytest.mark.parametrize(("token", "refusal"), REFUSED_TOKENS)
def test_https_refuses_a_token_that_does_not_open_the_file(
    lab: Lab, token: dict[str, Any] | None, refusal: str
) -> None:
    bearer = None if token is None else lab.mint_token(**token)
    response = https_get(lab.endpoint("near-https").file_url(FILE), lab_tls(lab), bearer)
    assert response.status_code == 403


def test_a_token_signed_by_another_key_is_refused(lab: Lab, tmp_path: Path) -> None:
    forged = mint_token(SigningKey(ec.generate_private_key(ec.SECP256R1())), lab.issuer_url())
    response = https_get(lab.endpoint("local-https").file_url(FILE), lab_tls(lab), forged)
    answer = xrootd_read(
        lab.endpoint("local-roots").file_url(FILE), token_env(lab, token_file(tmp_path, forged))
    )
    assert response.status_code == 403
    assert REFUSED_LOGIN in answer["message"]


# -- X.509 proxies -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def proxy(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lab.write_proxy(tmp_path_factory.mktemp("proxy") / "x509up")


@pytest.mark.parametrize("site", SITES)
def test_the_proxy_reads_over_gsi_root_at_every_site(lab: Lab, site: str, proxy: Path) -> None:
    endpoint = lab.endpoint(f"{site}-gsi-root")
    answer = xrootd_read(endpoint.file_url(FILE), proxy_env(lab, proxy))
    assert answer["ok"], answer["message"]
    assert bytes.fromhex(answer["data"]) == first_bytes(lab)


@pytest.mark.parametrize("site", SITES)
def test_the_proxy_reads_over_gsi_https_at_every_site(lab: Lab, site: str, proxy: Path) -> None:
    response = https_get(lab.endpoint(f"{site}-gsi-https").file_url(FILE), lab_tls(lab, proxy))
    assert response.status_code == 206
    assert response.content == first_bytes(lab)


@pytest.mark.parametrize("kind", ["expired", "rogue"])
def test_gsi_root_refuses_an_expired_proxy_and_one_of_an_unknown_ca(
    lab: Lab, kind: str, tmp_path: Path
) -> None:
    bad = lab.write_proxy(tmp_path / "x509up", **{kind: True})
    answer = xrootd_read(lab.endpoint("near-gsi-root").file_url(FILE), proxy_env(lab, bad))
    assert not answer["ok"]
    assert REFUSED_LOGIN in answer["message"]


@pytest.mark.parametrize(
    ("kind", "alert"), [("expired", "CERTIFICATE_EXPIRED"), ("rogue", "UNKNOWN_CA")]
)
def test_gsi_https_refuses_an_expired_proxy_and_one_of_an_unknown_ca(
    lab: Lab, kind: str, alert: str, tmp_path: Path
) -> None:
    bad = lab.write_proxy(tmp_path / "x509up", **{kind: True})
    # The server ends the TLS handshake with an alert, which the client reads at its first
    # read under TLS 1.3 (a ReadError, not a ConnectError).
    with pytest.raises(httpx.TransportError, match=f"ALERT_{alert}"):
        https_get(lab.endpoint("near-gsi-https").file_url(FILE), lab_tls(lab, bad))


def test_gsi_https_gives_nothing_without_a_client_certificate(lab: Lab) -> None:
    response = https_get(lab.endpoint("local-gsi-https").file_url(FILE), lab_tls(lab))
    assert response.status_code == 403


def test_gsi_root_needs_the_host_name_the_server_certificate_names(lab: Lab, proxy: Path) -> None:
    # The gsi client compares the certificate's CN (localhost) with the URL's host.
    url = lab.endpoint("local-gsi-root").file_url(FILE).replace("localhost", "127.0.0.1")
    answer = xrootd_read(url, proxy_env(lab, proxy))
    assert not answer["ok"]
    assert "server certificate CN 'localhost' does not match" in answer["message"]


# -- trusting the right CA ---------------------------------------------------------------------


def test_clients_that_trust_only_the_rogue_ca_refuse_the_lab_servers(
    lab: Lab, tmp_path: Path
) -> None:
    env = token_env(lab, token_file(tmp_path, lab.mint_token()))
    answer = xrootd_read(
        lab.endpoint("local-roots").file_url(FILE), env | {"X509_CERT_DIR": str(lab.rogue_ca_dir())}
    )
    assert not answer["ok"]
    assert "TLS error" in answer["message"]
    rogue = ssl.create_default_context(capath=str(lab.rogue_ca_dir()))
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        https_get(lab.endpoint("local-https").file_url(FILE), rogue, lab.mint_token())


@pytest.fixture
def rogue_server(lab: Lab) -> Iterator[int]:
    """An https server presenting the rogue CA's certificate for localhost."""
    pki = LabPki(lab.state_dir / "pki", lab.state_dir / "certs")

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hello)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.rogue.host_cert, pki.rogue.host_key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_lab_ca_refuses_a_server_certificate_of_the_rogue_ca(
    lab: Lab, rogue_server: int
) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        https_get(f"https://localhost:{rogue_server}/", lab_tls(lab))
    trusting = ssl.create_default_context(capath=str(lab.rogue_ca_dir()))
    assert https_get(f"https://localhost:{rogue_server}/", trusting).status_code == 200


# -- the issuer --------------------------------------------------------------------------------


def test_the_issuer_publishes_its_configuration_and_keys(lab: Lab) -> None:
    issuer = lab.issuer_url()
    with httpx.Client(verify=lab_tls(lab), timeout=10) as client:
        configuration = client.get(f"{issuer}/.well-known/openid-configuration").json()
        jwks = client.get(configuration["jwks_uri"]).json()
    assert configuration["issuer"] == issuer
    assert configuration["token_endpoint"] == lab.oauth_client()["token_url"]
    (jwk,) = jwks["keys"]
    assert (jwk["kty"], jwk["crv"], jwk["alg"]) == ("EC", "P-256", "ES256")
    token = lab.mint_token()
    header = json.loads(b64url_decode(token.split(".")[0]))
    assert header == {"alg": "ES256", "typ": "JWT", "kid": jwk["kid"]}
    verify_es256(token, jwk)


def verify_es256(token: str, jwk: dict[str, str]) -> None:
    """Check the signature with the published key: raw r||s over header.payload."""
    public = ec.EllipticCurvePublicNumbers(
        int.from_bytes(b64url_decode(jwk["x"]), "big"),
        int.from_bytes(b64url_decode(jwk["y"]), "big"),
        ec.SECP256R1(),
    ).public_key()
    signing_input, _, signature = token.rpartition(".")
    raw = b64url_decode(signature)
    assert len(raw) == 64
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, signing_input.encode(), ec.ECDSA(hashes.SHA256()))


def test_tokens_carry_the_wlcg_profile_claims(lab: Lab) -> None:
    claims = decode_claims(lab.mint_token(scope="storage.read:/fedprobe", lifetime_s=600))
    assert claims["wlcg.ver"] == "1.0"
    assert (claims["iss"], claims["aud"]) == (lab.issuer_url(), LAB_AUDIENCE)
    assert claims["scope"] == "storage.read:/fedprobe"
    assert claims["exp"] - claims["iat"] == 600
    assert claims["nbf"] == claims["iat"]
    assert {"sub", "jti"} <= set(claims)
    expired = decode_claims(lab.mint_token(expired=True))
    assert expired["exp"] - expired["iat"] == 3600
    assert expired["exp"] < claims["iat"]


def grant(lab: Lab, data: dict[str, str], auth: tuple[str, str] | None) -> httpx.Response:
    with httpx.Client(verify=lab_tls(lab), timeout=10) as client:
        return client.post(lab.oauth_client()["token_url"], data=data, auth=auth)


def test_the_client_credentials_grant_gives_a_token_the_token_site_accepts(
    lab: Lab, tmp_path: Path
) -> None:
    client = lab.oauth_client()
    response = grant(
        lab, {"grant_type": "client_credentials"}, (client["client_id"], client["client_secret"])
    )
    assert response.status_code == 200
    answer = response.json()
    assert (answer["token_type"], answer["expires_in"]) == ("Bearer", 20 * 60)
    assert answer["scope"] == client["scope"] == "storage.read:/fedprobe"
    token = answer["access_token"]
    assert decode_claims(token)["sub"] == client["client_id"]
    assert https_get(lab.endpoint("far-https").file_url(FILE), lab_tls(lab), token).is_success
    read = xrootd_read(
        lab.endpoint("local-roots").file_url(FILE), token_env(lab, token_file(tmp_path, token))
    )
    assert read["ok"], read["message"]


def test_the_short_client_sends_its_secret_in_the_form_and_gets_30_second_tokens(
    lab: Lab,
) -> None:
    client = lab.oauth_client(short=True)
    scope = "storage.read:/fedprobe storage.stat:/fedprobe"
    response = grant(
        lab,
        {
            "grant_type": "client_credentials",
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
            "scope": scope,
            "audience": client["audience"],
        },
        None,
    )
    assert response.status_code == 200
    assert (response.json()["expires_in"], response.json()["scope"]) == (30, scope)
    claims = decode_claims(response.json()["access_token"])
    assert claims["exp"] - claims["iat"] == 30
    assert (claims["aud"], claims["scope"]) == (LAB_AUDIENCE, scope)


def test_a_wrong_secret_gets_401_invalid_client(lab: Lab) -> None:
    client = lab.oauth_client()
    wrong = grant(lab, {"grant_type": "client_credentials"}, (client["client_id"], "nope"))
    unknown = grant(lab, {"grant_type": "client_credentials"}, ("stranger", "nope"))
    for response in (wrong, unknown):
        assert response.status_code == 401
        assert response.json()["error"] == "invalid_client"
        assert response.headers["WWW-Authenticate"].startswith("Basic")


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"grant_type": "password", "username": "u", "password": "p"}, "unsupported_grant_type"),
        ({}, "invalid_request"),
        ({"grant_type": "client_credentials", "scope": "openid admin"}, "invalid_scope"),
    ],
)
def test_a_grant_the_issuer_does_not_make_gets_400(
    lab: Lab, data: dict[str, str], error: str
) -> None:
    client = lab.oauth_client()
    response = grant(lab, data, (client["client_id"], client["client_secret"]))
    assert response.status_code == 400
    assert response.json()["error"] == error


# -- what the lab hands out --------------------------------------------------------------------


def test_lab_token_prints_a_token_and_nothing_else(lab: Lab) -> None:
    options = ["--scope", "storage.stat:/fedprobe", "--audience", "https://x.example"]
    done = run_cli("token", "--dir", str(lab.state_dir), *options, "--lifetime", "20m")
    assert done.returncode == 0, done.stderr
    (token,) = done.stdout.splitlines()
    claims = decode_claims(token)
    assert (claims["scope"], claims["aud"]) == ("storage.stat:/fedprobe", "https://x.example")
    assert claims["exp"] - claims["iat"] == 1200
    expired = run_cli("token", "--dir", str(lab.state_dir), "--expired", via="manage")
    assert expired.returncode == 0, expired.stderr
    assert decode_claims(expired.stdout.strip())["exp"] < claims["iat"]


def test_lab_token_refuses_a_lifetime_that_is_not_a_duration(lab: Lab) -> None:
    done = run_cli("token", "--dir", str(lab.state_dir), "--lifetime", "soon")
    assert done.returncode == 2
    assert "argument --lifetime: invalid duration 'soon'" in done.stderr


def test_lab_proxy_writes_a_private_proxy_in_the_lab_dir(lab: Lab) -> None:
    done = run_cli("proxy", "--dir", str(lab.state_dir), via="manage")
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path.parent == lab.state_dir / "pki"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    info = grid_proxy_info(lab, path)
    assert f"identity : {USER_DN}" in info
    assert "RFC 3820 compliant impersonation proxy" in info
    expired = run_cli("proxy", "--dir", str(lab.state_dir), "--expired")
    assert "timeleft : 0:00:00" in grid_proxy_info(lab, Path(expired.stdout.strip()))


def grid_proxy_info(lab: Lab, path: Path) -> str:
    done = subprocess.run(
        ["grid-proxy-info", "-f", str(path)],
        env={**os.environ, "X509_CERT_DIR": str(lab.ca_dir())},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout


def test_write_proxy_chains_to_the_lab_ca_and_the_rogue_one_does_not(
    lab: Lab, tmp_path: Path
) -> None:
    for rogue, verdict in ((False, "OK"), (True, "unable to get local issuer certificate")):
        path = lab.write_proxy(tmp_path / f"proxy-{rogue}", rogue=rogue)
        pem = path.read_text()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert (pem.count("BEGIN CERTIFICATE"), pem.count("BEGIN RSA PRIVATE KEY")) == (2, 1)
        user = tmp_path / "user.pem"
        user.write_text(
            "-----BEGIN CERTIFICATE-----" + pem.rsplit("-----BEGIN CERTIFICATE-----", 1)[1]
        )
        done = subprocess.run(
            [
                *("openssl", "verify", "-allow_proxy_certs", "-CApath", str(lab.ca_dir())),
                *("-untrusted", str(user), str(path)),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert verdict in done.stdout + done.stderr


def test_secrets_are_private_and_server_keys_belong_to_the_servers(lab: Lab) -> None:
    pki, certs = lab.state_dir / "pki", lab.state_dir / "certs"
    assert stat.S_IMODE(pki.stat().st_mode) == 0o700
    for secret in [*pki.glob("*key*"), pki / "clients.json", pki / "readiness-token"]:
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
    for host_key in certs.glob("*-hostkey.pem"):
        assert stat.S_IMODE(host_key.stat().st_mode) == 0o400
        if os.geteuid() == 0:
            assert host_key.owner() == "nobody"


def test_the_ca_dirs_hold_hash_links_and_signing_policies(lab: Lab) -> None:
    for ca_dir in (lab.ca_dir(), lab.rogue_ca_dir()):
        (ca,) = ca_dir.glob("*-ca.pem")
        digest = subject_hash(ca)
        assert (ca_dir / f"{digest}.0").resolve() == ca.resolve()
        assert "access_id_CA" in (ca_dir / f"{digest}.signing_policy").read_text()
    assert not set(os.listdir(lab.ca_dir())) & set(os.listdir(lab.rogue_ca_dir()))
    assert json.loads(lab.paths.state.read_text())["ca_dir"] == str(lab.ca_dir())


def test_oauth_client_is_what_a_credential_holds(lab: Lab) -> None:
    default, short = lab.oauth_client(), lab.oauth_client(short=True)
    assert set(default) == {"token_url", "client_id", "client_secret", "scope", "audience"}
    assert default["token_url"] == f"{lab.issuer_url()}/token"
    assert default["client_id"] != short["client_id"]
    assert default["client_secret"] != short["client_secret"]
    assert default["audience"] == LAB_AUDIENCE


def test_status_text_names_the_ca_dir_and_the_issuer(lab: Lab) -> None:
    done = run_cli("status", "--dir", str(lab.state_dir))
    assert done.returncode == 0, done.stderr
    assert f"CA dir (X509_CERT_DIR): {lab.ca_dir()}" in done.stdout
    assert f"token issuer: {lab.issuer_url()}" in done.stdout
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("near-gsi-root ")]
    assert "x509" in line


def test_the_pki_is_made_once_and_kept(tmp_path: Path) -> None:
    pki = LabPki(tmp_path / "pki", tmp_path / "certs")
    assert pki.ensure(None)
    host = pki.lab.host_cert.read_bytes()
    assert not pki.ensure(None)
    assert pki.lab.host_cert.read_bytes() == host
    pki.rogue.user_cert.unlink()
    assert pki.ensure(None)
    assert pki.lab.host_cert.read_bytes() == host  # only the rogue CA was made again


def test_endpoints_that_share_a_port_share_its_relay(lab: Lab) -> None:
    assert lab.relay_of("near-roots") == lab.relay_of("near-https") == "near-token"
    assert lab.relay_of("far-gsi-root") == lab.relay_of("far-gsi-https") == "far-gsi"
    url = lab.endpoint("near-https").file_url(FILE)
    lab.set_relay_mode("near-https", "cut", cut_after=0)
    try:
        with pytest.raises(httpx.TransportError):
            https_get(url, lab_tls(lab), lab.mint_token())
        assert lab.relay_stats()["near-token"]["mode"] == "cut"
    finally:
        lab.set_relay_mode("near-token", "normal")
    assert https_get(url, lab_tls(lab), lab.mint_token()).status_code == 206


def test_a_gsi_site_that_fails_to_start_stops_the_lab_and_shows_its_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any) -> str:
        return real(*args).replace("-cert:", "-cert:/nonexistent")

    real = servers.gsi_server_config
    monkeypatch.setattr(servers, "gsi_server_config", broken)
    folder = Path(tempfile.mkdtemp(prefix="fedprobe-broken-lab-", dir="/tmp"))
    failing = Lab(folder, base_port=free_base_port(), file_sizes=[64 * 1024])
    failing.progress = None
    try:
        with pytest.raises(LabError, match=r"xrootd-(local|near|far)-gsi exited") as caught:
            failing.up()
        assert "/nonexistent" in str(caught.value)
        assert failing.running_processes() == {}
    finally:
        failing.down()
        shutil.rmtree(folder, ignore_errors=True)
