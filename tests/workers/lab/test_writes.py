"""Writes to the lab's scratch folders (anonymous, token and GSI doors; root:// and https),
what refuses them (a read-only token, a path outside scratch), and the lab's address families
(every site on ::1 too; a server of one family only)."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import uuid
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from workers.lab import Lab, LabError
from workers.lab.issuer import DEFAULT_SCOPE, READ_SCOPE, WRITE_SCOPE, decode_claims
from workers.lab.lab import TokenKind
from workers.lab.one_family import one_family_server

pytestmark = pytest.mark.lab

SITES = ("local", "near", "far")
WRITABLE = (
    *(f"{site}-{kind}" for site in SITES for kind in ("root", "http", "roots", "https")),
    *(f"{site}-gsi-{kind}" for site in SITES for kind in ("root", "https")),
    "local-davs",
)
_CLIENT_SETTINGS = ("XRD_", "X509_", "BEARER_TOKEN", "XrdSec")
# A refused connection is retried 5 x 120 s by default.
_QUICK = {"XRD_CONNECTIONRETRY": "1", "XRD_REQUESTTIMEOUT": "10", "XRD_STREAMTIMEOUT": "10"}


def xrd(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """xrdcp or xrdfs in a child with `env`'s credentials only (XrdCl reads them once)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(_CLIENT_SETTINGS)}
    return subprocess.run(
        argv,
        env=base | _QUICK | (env or {}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def token_env(lab: Lab, kind: TokenKind) -> dict[str, str]:
    return {
        "BEARER_TOKEN_FILE": str(lab.token_file(kind)),
        "X509_CERT_DIR": str(lab.ca_dir()),
        "XrdSecPROTOCOL": "ztn",
    }


def bearer(lab: Lab, kind: TokenKind) -> dict[str, str]:
    return {"Authorization": f"Bearer {lab.token_file(kind).read_text().strip()}"}


def https(lab: Lab, client_cert: Path | None = None) -> httpx.Client:
    context = ssl.create_default_context(cafile=str(lab.ca_file()))
    if client_cert is not None:
        context.load_cert_chain(client_cert)
    return httpx.Client(verify=context, timeout=10)


def scratch_url(lab: Lab, endpoint: str, name: str) -> str:
    found = lab.endpoint(endpoint)
    assert found.scratch_path is not None
    return found.file_url(found.scratch_path + name)


def on_disk(lab: Lab, endpoint: str, name: str) -> Path:
    found = lab.endpoint(endpoint)
    assert found.scratch_path is not None
    return lab.data_dir(found.site) / found.scratch_path.strip("/") / name


def path_of(url: str) -> str:
    return "/" + urlsplit(url).path.lstrip("/")


def host_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def adler32(data: bytes) -> str:
    return f"{zlib.adler32(data):08x}"


@pytest.fixture
def payload(tmp_path: Path) -> tuple[Path, bytes]:
    data = os.urandom(300_000)
    source = tmp_path / "payload"
    source.write_bytes(data)
    return source, data


def fresh_name() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


# -- what status says ------------------------------------------------------------------------


def test_every_door_of_a_site_writes_to_its_scratch_and_the_rest_to_none(lab: Lab) -> None:
    endpoints = {e.name: e for e in lab.endpoints()}
    for name in WRITABLE:
        site = endpoints[name].site
        assert endpoints[name].scratch_path == f"/scratch/{site}/", name
    for name in set(endpoints) - set(WRITABLE):
        assert endpoints[name].scratch_path is None, name
    assert all(endpoints[name].families == ("4", "6") for name in WRITABLE)
    assert endpoints["local-ftp"].families == ("4",)
    assert endpoints["local-file"].families == ()
    for site in SITES:
        folder = lab.data_dir(site) / "scratch" / site
        assert folder.is_dir()
        if os.geteuid() == 0:
            assert folder.owner() == "nobody"


def test_the_ready_made_tokens_carry_the_read_and_write_scopes(lab: Lab) -> None:
    kinds: tuple[tuple[TokenKind, str], ...] = (("read", READ_SCOPE), ("write", WRITE_SCOPE))
    for kind, scope in kinds:
        path = lab.token_file(kind)
        assert path.stat().st_mode & 0o777 == 0o600
        claims = decode_claims(path.read_text().strip())
        assert claims["scope"] == scope
        assert claims["iss"] == lab.issuer_url()
    with pytest.raises(LabError, match="no 'admin' token"):
        lab.token_file("admin")  # type: ignore[arg-type]


# -- writes ----------------------------------------------------------------------------------


def test_the_write_token_creates_overwrites_and_deletes_over_roots(
    lab: Lab, payload: tuple[Path, bytes]
) -> None:
    source, data = payload
    name = fresh_name()
    url = scratch_url(lab, "near-roots", name)
    env = token_env(lab, "write")
    created = xrd("xrdcp", "-s", str(source), url, env=env)
    assert created.returncode == 0, created.stderr
    assert on_disk(lab, "near-roots", name).read_bytes() == data
    again = xrd("xrdcp", "-s", str(source), url, env=env)
    assert again.returncode != 0 and "file exists" in again.stderr  # xrdcp without -f
    overwritten = xrd("xrdcp", "-s", "-f", str(source), url, env=env)
    assert overwritten.returncode == 0, overwritten.stderr
    checksum = xrd("xrdfs", host_of(url), "query", "checksum", path_of(url), env=env)
    assert checksum.stdout.split() == ["adler32", adler32(data)]
    removed = xrd("xrdfs", host_of(url), "rm", path_of(url), env=env)
    assert removed.returncode == 0, removed.stderr
    assert not on_disk(lab, "near-roots", name).exists()


def test_the_write_token_creates_overwrites_and_deletes_over_https(
    lab: Lab, payload: tuple[Path, bytes]
) -> None:
    _, data = payload
    name = fresh_name()
    url = scratch_url(lab, "far-https", name)
    with https(lab) as client:
        for _ in ("create", "overwrite"):
            put = client.put(url, content=data, headers=bearer(lab, "write"))
            assert put.status_code in (200, 201), put.text
        assert on_disk(lab, "far-https", name).read_bytes() == data
        head = client.head(url, headers=bearer(lab, "write") | {"Want-Digest": "adler32"})
        assert head.headers["Digest"] == f"adler32={adler32(data)}"
        assert client.delete(url, headers=bearer(lab, "write")).status_code == 200
        assert client.head(url, headers=bearer(lab, "write")).status_code == 404


def test_the_anonymous_doors_write_over_root_and_http(
    lab: Lab, payload: tuple[Path, bytes]
) -> None:
    source, data = payload
    root, http = fresh_name(), fresh_name()
    url = scratch_url(lab, "local-root", root)
    assert xrd("xrdcp", "-s", str(source), url).returncode == 0
    assert on_disk(lab, "local-root", root).read_bytes() == data
    assert xrd("xrdfs", host_of(url), "rm", path_of(url)).returncode == 0
    with httpx.Client(timeout=10) as client:
        assert client.put(scratch_url(lab, "near-http", http), content=data).status_code == 200
        assert on_disk(lab, "near-http", http).read_bytes() == data
        assert client.delete(scratch_url(lab, "near-http", http)).status_code == 200
    assert not on_disk(lab, "near-http", http).exists()


def test_the_proxy_writes_at_the_gsi_doors(
    lab: Lab, payload: tuple[Path, bytes], tmp_path: Path
) -> None:
    source, data = payload
    proxy = lab.write_proxy(tmp_path / "proxy")
    env = {
        "X509_USER_PROXY": str(proxy),
        "X509_CERT_DIR": str(lab.ca_dir()),
        "XrdSecPROTOCOL": "gsi",
    }
    name = fresh_name()
    url = scratch_url(lab, "local-gsi-root", name)
    written = xrd("xrdcp", "-s", "-f", str(source), url, env=env)
    assert written.returncode == 0, written.stderr
    assert xrd("xrdfs", host_of(url), "rm", path_of(url), env=env).returncode == 0
    with https(lab, proxy) as client:
        url = scratch_url(lab, "local-gsi-https", name)
        assert client.put(url, content=data).status_code == 200
        assert on_disk(lab, "local-gsi-https", name).read_bytes() == data
        assert client.delete(url).status_code == 200


def granted_token(lab: Lab, client: dict[str, str]) -> str:
    """A token from the issuer for `client`, asked with the scope and audience it holds (as
    fedprobe's oauth-client credential asks)."""
    form = {"grant_type": "client_credentials", "scope": client["scope"]}
    form["audience"] = client["audience"]
    with https(lab) as http:
        answer = http.post(
            client["token_url"], data=form, auth=(client["client_id"], client["client_secret"])
        )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def test_a_client_asked_for_a_sites_scratch_writes_there_and_nowhere_else(
    lab: Lab, payload: tuple[Path, bytes]
) -> None:
    """What `lab register` gives the near site's token doors: reads the test files, writes
    and deletes in /scratch/near; the far site's scratch (where a copy's other side writes)
    refuses it. The client without a scratch path stays read-only."""
    _, data = payload
    near = lab.endpoint("near-https")
    client = lab.oauth_client(scratch_path=near.scratch_path)
    scope = "storage.read:/scratch/near storage.create:/scratch/near storage.modify:/scratch/near"
    assert client["scope"] == f"{DEFAULT_SCOPE} {scope}"
    assert lab.oauth_client()["scope"] == DEFAULT_SCOPE
    token = granted_token(lab, client)
    assert decode_claims(token)["scope"] == client["scope"]
    auth = {"Authorization": f"Bearer {token}"}
    name = fresh_name()
    with https(lab) as http:
        assert http.head(near.file_url("/fedprobe/file-1M"), headers=auth).status_code == 200
        url = scratch_url(lab, "near-https", name)
        assert http.put(url, content=data, headers=auth).status_code == 200
        head = http.head(url, headers=auth | {"Want-Digest": "adler32"})
        assert head.headers["Digest"] == f"adler32={adler32(data)}"
        assert http.delete(url, headers=auth).status_code == 200
        far = scratch_url(lab, "far-https", name)
        assert http.put(far, content=data, headers=auth).status_code == 403
        read_only = {"Authorization": f"Bearer {granted_token(lab, lab.oauth_client())}"}
        assert http.put(url, content=data, headers=read_only).status_code == 403
    assert not on_disk(lab, "near-https", name).exists()
    assert not on_disk(lab, "far-https", name).exists()


# -- refusals --------------------------------------------------------------------------------


def test_the_read_token_cannot_write_or_delete(lab: Lab, payload: tuple[Path, bytes]) -> None:
    source, data = payload
    name = fresh_name()
    refused = xrd(
        "xrdcp", "-s", str(source), scratch_url(lab, "near-roots", name), env=token_env(lab, "read")
    )
    assert refused.returncode != 0 and "permission denied" in refused.stderr, refused.stderr
    assert not on_disk(lab, "near-roots", name).exists()
    url = scratch_url(lab, "near-https", name)
    # A connection of its own for each request: XrdHttp closes the connection after refusing
    # a PUT whose body it did not read, and a request sent on it meanwhile is cut.
    with https(lab) as client:
        put = client.put(url, content=data, headers=bearer(lab, "read"))
        assert put.status_code == 403, put.text
    with https(lab) as client:
        put = client.put(url, content=data, headers=bearer(lab, "write"))
        assert put.status_code == 200, put.text
    with https(lab) as client:
        delete = client.delete(url, headers=bearer(lab, "read"))
        assert delete.status_code == 403, delete.text
    assert on_disk(lab, "near-https", name).exists()
    with https(lab) as client:
        delete = client.delete(url, headers=bearer(lab, "write"))
        assert delete.status_code == 200, delete.text


def test_nothing_is_written_outside_scratch(lab: Lab, payload: tuple[Path, bytes]) -> None:
    source, data = payload
    name = fresh_name()
    roots = lab.endpoint("local-roots").file_url(f"/fedprobe/{name}")
    by_token = xrd("xrdcp", "-s", str(source), roots, env=token_env(lab, "write"))
    assert by_token.returncode != 0 and "permission denied" in by_token.stderr, by_token.stderr
    root = lab.endpoint("local-root").file_url(f"/fedprobe/{name}")
    anonymous = xrd("xrdcp", "-s", str(source), root)
    assert anonymous.returncode != 0 and "read/only" in anonymous.stderr, anonymous.stderr
    # Each site's doors write only to their own site's scratch folder.
    elsewhere = lab.endpoint("local-root").file_url(f"/scratch/near/{name}")
    assert xrd("xrdcp", "-s", str(source), elsewhere).returncode != 0
    with httpx.Client(timeout=10) as client:
        elsewhere = lab.endpoint("local-http").file_url(f"/scratch/near/{name}")
        assert client.put(elsewhere, content=data).status_code == 403
    with https(lab) as client:
        url = lab.endpoint("local-https").file_url(f"/fedprobe/{name}")
        assert client.put(url, content=data, headers=bearer(lab, "write")).status_code == 403
        test_file = lab.endpoint("local-https").file_url("/fedprobe/file-1M")
        assert client.delete(test_file, headers=bearer(lab, "write")).status_code == 403
    assert not (lab.data_dir("local") / "fedprobe" / name).exists()
    assert not on_disk(lab, "near-root", name).exists()
    assert (lab.data_dir("local") / "fedprobe" / "file-1M").exists()


# -- address families ------------------------------------------------------------------------


def v6(url: str) -> str:
    """The same URL on ::1."""
    parts = urlsplit(url)
    return url.replace(parts.netloc, f"[::1]:{parts.port}", 1)


@pytest.mark.parametrize("endpoint", ["local-root", "near-root", "far-http"])
def test_a_site_answers_on_the_ipv6_loopback(lab: Lab, endpoint: str) -> None:
    """Directly (local: no relay) and through the relays of near and far."""
    found = lab.endpoint(endpoint)
    url = v6(found.file_url("/fedprobe/file-1M"))
    if found.protocol == "root":
        stat = xrd("xrdfs", host_of(url), "stat", path_of(url))
        assert stat.returncode == 0 and f"Size:   {2**20}" in stat.stdout, stat.stderr
    else:
        with httpx.Client(timeout=10) as client:
            assert client.head(url).headers["Content-Length"] == str(2**20)


def test_the_token_door_answers_on_the_ipv6_loopback(lab: Lab) -> None:
    url = v6(lab.endpoint("far-https").file_url("/fedprobe/file-1M"))
    with https(lab) as client:  # the host certificate names IP ::1
        assert client.head(url, headers=bearer(lab, "read")).status_code == 200


def test_a_one_family_server_answers_on_ipv4_only(lab: Lab) -> None:
    with one_family_server(lab, "4") as endpoint:
        assert endpoint.families == ("4",)
        port = urlsplit(endpoint.url).port
        assert port is not None
        url = endpoint.file_url("/fedprobe/file-1M")
        assert xrd("xrdfs", host_of(url), "stat", path_of(url)).returncode == 0
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("::1", port), timeout=5)
        refused = xrd("xrdfs", host_of(v6(url)), "stat", path_of(url))
        assert refused.returncode != 0
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_a_one_family_server_takes_only_ipv4(lab: Lab) -> None:
    with pytest.raises(LabError, match="family must be one of 4"), one_family_server(lab, "6"):
        pass
