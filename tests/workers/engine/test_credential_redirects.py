"""A credential goes only to the endpoint's own server and the hosts listed for it, whatever
an XRootD redirection says (issue 17, item 1; docs/engine.md, "Tokens and redirections").

The outside audit's set-up: a TLS token server at 127.0.0.1 that redirects every open to a
second token server under another name (the lab's own token site, as localhost:PORT). XrdCl
and xrdcp follow the redirection themselves and would log in there with the run's token; the
egress guard refuses the connection before anything is sent, so that server's log shows no
login. Listing the host lets the same run through, and the login is logged: what the
assertions look for is there to be seen."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.redirecting_server import LOOPBACK, LogWatch, port_of, redirecting_xrootd
from workers.engine.credentials import Credential
from workers.engine.driver import run_probe
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass
from workers.engine.params import Method, RunParams
from workers.engine.results import RunResult
from workers.lab import Lab

pytestmark = pytest.mark.lab

FILE = "/fedprobe/file-1M"
KiB = 1024


def run(
    url: str,
    method: Method,
    credential: Credential,
    lab: Lab,
    *,
    hosts: tuple[str, ...] = (),
    egress: EgressPolicy | None = LOOPBACK,
) -> RunResult:
    return run_probe(
        RunParams(
            urls=(url,),
            method=method,
            read_size=64 * KiB,
            clients=2,
            timeout_s=30,
            credential=credential,
            credential_hosts=hosts,
            ca_dir=str(lab.ca_dir()),
            egress=egress,
        )
    )


def assert_refused_at(result: RunResult, port: int) -> None:
    assert result.run_error is None  # the preflight's stat is answered at the endpoint
    assert len(result.clients) == 2
    for client in result.clients:
        assert client.error is not None, client
        assert client.error.error_class == ErrorClass.EGRESS, client.error
        message = client.error.message
        assert f":{port} (localhost)" in message, message
        assert "carrying the run's credential" in message
        assert "nor a host listed in its credential_hosts (none)" in message


@pytest.mark.parametrize(
    ("method", "egress"),
    [
        (Method.DIRECT, LOOPBACK),
        (Method.COPY, LOOPBACK),
        (Method.STAGE, LOOPBACK),
        (Method.DIRECT, None),  # `probe` by hand: no egress policy, the scope still holds
    ],
)
def test_a_token_never_follows_a_redirection_to_another_server(
    lab: Lab, method: Method, egress: EgressPolicy | None
) -> None:
    second = port_of(lab, "local-roots")
    watch = LogWatch(lab.paths.server_log("local-token", "xrootd"))
    with redirecting_xrootd(lab, f"localhost:{second}", token=True) as first:
        token = Credential.token(lab.mint_token())
        result = run(first.url("roots", FILE), method, token, lab, egress=egress)
    assert_refused_at(result, second)
    assert watch.logins() == []


def test_a_listed_host_gets_the_token_and_the_login_is_seen(lab: Lab) -> None:
    second = port_of(lab, "local-roots")
    watch = LogWatch(lab.paths.server_log("local-token", "xrootd"))
    with redirecting_xrootd(lab, f"localhost:{second}", token=True) as first:
        token = Credential.token(lab.mint_token())
        result = run(first.url("roots", FILE), Method.DIRECT, token, lab, hosts=("localhost",))
    assert result.run_error is None
    assert all(client.error is None for client in result.clients), result.clients
    assert any("login as" in line for line in watch.logins())


def test_a_proxy_never_follows_a_redirection_to_another_server(lab: Lab, tmp_path: Path) -> None:
    """An anonymous data server redirecting to the lab's GSI site: the proxy would be
    presented there (gsi) if the connection were made."""
    second = port_of(lab, "local-gsi-root")
    proxy = Credential.x509_proxy(lab.write_proxy(tmp_path / "proxy").read_text())
    watch = LogWatch(lab.paths.server_log("local-gsi", "xrootd"))
    with redirecting_xrootd(lab, f"localhost:{second}", token=False) as first:
        refused = run(first.url("root", FILE), Method.DIRECT, proxy, lab)
        assert watch.logins() == []
        listed = run(first.url("root", FILE), Method.DIRECT, proxy, lab, hosts=("localhost",))
    assert_refused_at(refused, second)
    assert all(client.error is None for client in listed.clients), listed.clients
    assert any("login as" in line for line in watch.logins())


def test_a_redirector_sending_clients_to_an_unlisted_server_is_refused_in_the_preflight(
    lab: Lab,
) -> None:
    """The preflight sees where a redirector (the lab's, anonymous) would send the clients,
    by the names it gives, before anything connects there: the run does not start."""
    url = lab.endpoint("redirector-root").file_url("/fed/a-4M")
    token = Credential.token(lab.mint_token())
    result = run(url, Method.DIRECT, token, lab)
    assert result.run_error is not None
    error_class, message = result.run_error
    assert error_class == ErrorClass.EGRESS
    fed_a = port_of(lab, "fed-a-root")
    assert f"sends clients to 127.0.0.1:{fed_a}: the run's credential may not go there" in message
    assert result.clients == []
    listed = run(url, Method.DIRECT, token, lab, hosts=("127.0.0.1",))
    assert listed.run_error is None
    assert all(client.error is None for client in listed.clients), listed.clients
