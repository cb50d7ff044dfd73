"""Test connection: one small read through the engine from the web host, against the real lab."""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client

from tests.webapp.factories import EndpointFactory, TestFileFactory
from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint
from webapp.sites.services import endpoint_test_connection

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
    assert check.open_s is not None
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
