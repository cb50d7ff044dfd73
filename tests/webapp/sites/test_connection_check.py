"""Test connection: one small read through the engine from the web host, against the real lab."""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client

from tests.redirecting_server import LogWatch, redirecting_xrootd
from tests.webapp.factories import EndpointFactory, TestFileFactory
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint
from webapp.sites.services import endpoint_test_connection
from workers.engine.urls import GRIDFTP_SCHEMES

pytestmark = pytest.mark.django_db


def lab_endpoint(lab: Any, name: str) -> Endpoint:
    lab_register(lab=lab)
    return Endpoint.objects.get(name=name)


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("name", ["local-root", "near-http", "local-ftp"])
def test_connection_to_a_lab_endpoint_succeeds(lab: Any, name: str) -> None:
    endpoint = lab_endpoint(lab, name)
    check = endpoint_test_connection(endpoint=endpoint)
    assert check.ok, check
    assert (check.error_class, check.message) == ("", "")
    assert check.url.startswith(endpoint.base_url.rstrip("/"))
    # GridFTP is tested by a copy, whose tool opens the file out of sight: no open time
    # (docs/engine.md), rather than the local copy's tens of microseconds.
    assert (check.open_s is None) == (endpoint.protocol in GRIDFTP_SCHEMES), check.open_s
    assert check.served_by


def test_through_a_redirector_the_data_server_that_served_is_named(lab: Any) -> None:
    endpoint = lab_endpoint(lab, "redirector-root")
    check = endpoint_test_connection(endpoint=endpoint)
    assert check.ok, check
    redirector = urlsplit(endpoint.base_url).netloc
    assert check.served_by and redirector not in check.served_by


def test_the_endpoint_page_shows_the_outcome(lab: Any, operator: Client) -> None:
    endpoint = lab_endpoint(lab, "local-root")
    response = operator.post(f"/endpoints/{endpoint.pk}/test/", follow=True)
    assert response.status_code == 200
    text = response.content.decode()
    assert "Connection test: ok" in text
    assert endpoint.default_file is not None
    assert endpoint.default_file.url in text
    served_by = endpoint_test_connection(endpoint=endpoint).served_by[0]
    assert served_by in text


def test_a_closed_port_fails_as_refused(operator: Client) -> None:
    endpoint = TestFileFactory(endpoint__base_url=f"root://127.0.0.1:{closed_port()}/").endpoint
    check = endpoint_test_connection(endpoint=endpoint)
    assert not check.ok
    assert check.error_class == "refused"
    assert check.message
    text = operator.post(f"/endpoints/{endpoint.pk}/test/", follow=True).content.decode()
    assert "Connection test: failed" in text
    assert ">refused<" in text


def test_the_test_redirects_to_the_endpoint_page_which_keeps_the_outcome_on_reload(
    operator: Client, viewer: Client
) -> None:
    endpoint = TestFileFactory(endpoint__base_url=f"root://127.0.0.1:{closed_port()}/").endpoint
    page = f"/endpoints/{endpoint.pk}/"
    answer = operator.post(f"{page}test/")
    assert (answer.status_code, answer["Location"]) == (302, page)
    for _reload in range(2):
        text = operator.get(page).content.decode()
        assert "Connection test: failed" in text and ">refused<" in text
        assert "Tested at " in text
    # The test's own address, reloaded from an old tab, is the endpoint page.
    assert operator.get(f"{page}test/")["Location"] == page
    # The outcome is the session's: another user's page does not show it.
    assert "Connection test" not in viewer.get(page).content.decode()


def test_a_closed_http_port_fails_as_refused() -> None:
    endpoint = TestFileFactory(
        endpoint__protocol="http", endpoint__base_url=f"http://127.0.0.1:{closed_port()}/"
    ).endpoint
    check = endpoint_test_connection(endpoint=endpoint)
    assert (check.ok, check.error_class) == (False, "refused")


def test_an_endpoint_without_a_test_file_says_so(operator: Client) -> None:
    endpoint = EndpointFactory()
    check = endpoint_test_connection(endpoint=endpoint)
    assert (check.ok, check.error_class) == (False, "no-test-file")
    text = operator.post(f"/endpoints/{endpoint.pk}/test/", follow=True).content.decode()
    assert "has no test file" in text


def test_a_file_outside_the_allowed_roots_is_refused_before_connecting(settings: Any) -> None:
    settings.FEDPROBE_FILE_ROOTS = ["/srv/fedprobe-data"]
    endpoint = TestFileFactory(
        endpoint__protocol="file", endpoint__base_url="file:///etc", path="/passwd", size=100
    ).endpoint
    check = endpoint_test_connection(endpoint=endpoint)
    assert (check.ok, check.error_class) == (False, "invalid")
    assert "allowed file roots" in check.message


def test_a_metadata_address_is_refused_by_the_egress_policy_before_connecting() -> None:
    # The form refuses such a base URL; a row written another way still never gets connected.
    endpoint = TestFileFactory(endpoint__base_url="root://169.254.169.254:1094/").endpoint
    check = endpoint_test_connection(endpoint=endpoint)
    assert (check.ok, check.error_class) == (False, "egress")
    assert "169.254.169.254" in check.message


def test_test_connection_keeps_a_token_from_a_server_the_endpoint_redirects_to(
    registered: Any,
) -> None:
    """The audit's set-up through the web process: a TLS token endpoint at 127.0.0.1 that
    redirects its files to the lab's token site under another name (localhost). Test
    connection fails with class egress naming that server, which logs no login."""
    lab = registered
    source = Endpoint.objects.get(name="local-roots")
    second = urlsplit(source.base_url).port
    test_file = source.files.get(path="/fedprobe/file-1M")
    watch = LogWatch(lab.paths.server_log("local-token", "xrootd"))
    with redirecting_xrootd(lab, f"localhost:{second}", token=True) as first:
        endpoint = EndpointFactory(
            site=source.site,
            protocol=Endpoint.Protocol.ROOTS,
            base_url=f"roots://127.0.0.1:{first.port}/",
            credential_kind=source.credential_kind,
            credential=source.credential,
        )
        TestFileFactory(
            endpoint=endpoint, path=test_file.path, size=test_file.size, adler32=test_file.adler32
        )
        check = endpoint_test_connection(endpoint=endpoint)
        endpoint.credential_hosts = ["localhost"]
        listed = endpoint_test_connection(endpoint=endpoint)
    assert not check.ok
    assert check.error_class == "egress", check
    assert f":{second} (localhost)" in check.message
    assert "carrying the run's credential" in check.message
    assert listed.ok, listed  # listed, the same redirection is followed, and logged
    logins = watch.logins()
    assert len(logins) >= 1
    assert all(urlsplit(f"//{served}").port == second for served in listed.served_by)
