"""Endpoints whose host is written as an address workers never connect to are refused at
write time (the API and the forms share the model's validator); names are left to workers."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from tests.webapp.factories import RunFactory, SiteFactory
from webapp.accounts.services import api_token_create
from webapp.sites.forms import EndpointForm
from webapp.sites.models import Endpoint, Site
from workers.engine.params import RunParams

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator() -> APIClient:
    user = User.objects.create_user("operator-user", password="x")
    user.groups.add(Group.objects.get(name="operator"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)}")
    return client


def own_site() -> Site:
    """A site of the operator's: only its owner (or an admin) adds endpoints to it."""
    return SiteFactory(owner=User.objects.get(username="operator-user"))


@pytest.mark.parametrize(
    ("protocol", "base_url"),
    [
        ("root", "root://169.254.169.254:1094"),
        ("http", "http://169.254.169.254/"),
        ("http", "http://2852039166/"),  # 169.254.169.254 as one number
        ("https", "https://[::ffff:169.254.169.254]/"),
        ("https", "https://[fd00:ec2::254]/"),
        ("root", "root://100.100.100.200:1094/"),
        ("davs", "davs://[fe80::1]:443/"),
    ],
)
def test_an_endpoint_at_a_forbidden_address_is_refused_naming_base_url(
    operator: APIClient, protocol: str, base_url: str
) -> None:
    site = own_site()
    body = {"site": site.pk, "name": "meta", "protocol": protocol, "base_url": base_url}
    answer = operator.post("/api/v1/endpoints/", body, format="json")
    assert answer.status_code == 400
    assert "refused by egress policy" in answer.json()["base_url"][0]
    assert not Endpoint.objects.exists()


def test_changing_an_endpoint_to_a_forbidden_address_is_refused(operator: APIClient) -> None:
    body = {"site": own_site().pk, "name": "e1", "protocol": "http", "base_url": "http://se"}
    created = operator.post("/api/v1/endpoints/", body, format="json").json()
    answer = operator.patch(
        f"/api/v1/endpoints/{created['id']}/",
        {"base_url": "http://169.254.169.254/"},
        format="json",
    )
    assert answer.status_code == 400
    assert "base_url" in answer.json()
    assert Endpoint.objects.get(pk=created["id"]).base_url == "http://se"


@pytest.mark.parametrize(
    "base_url",
    [
        "root://10.0.0.5:1094",  # private: a worker may be allowed to reach it
        "root://127.0.0.1:1094",
        "root://metadata.google.internal:1094",  # a name: resolved and judged on the worker
    ],
)
def test_private_addresses_and_names_are_left_to_the_workers_policy(
    operator: APIClient, base_url: str
) -> None:
    site = own_site()
    body = {"site": site.pk, "name": "e1", "protocol": "root", "base_url": base_url}
    answer = operator.post("/api/v1/endpoints/", body, format="json")
    assert answer.status_code == 201, answer.json()


def test_the_endpoint_form_refuses_a_forbidden_address_on_base_url() -> None:
    site = SiteFactory()
    form = EndpointForm(
        data={
            "site": site.pk,
            "name": "meta",
            "protocol": "http",
            "base_url": "http://169.254.169.254/",
            "role": "data",
            "enabled": True,
        }
    )
    assert not form.is_valid()
    assert "refused by egress policy" in form.errors["base_url"][0]


def test_a_malformed_ipv6_base_url_is_refused_not_a_crash(operator: APIClient) -> None:
    site = own_site()
    body = {"site": site.pk, "name": "e1", "protocol": "http", "base_url": "http://[::1"}
    answer = operator.post("/api/v1/endpoints/", body, format="json")
    assert answer.status_code == 400
    assert "base_url" in answer.json()


def test_runs_carry_the_configured_egress_policy(settings: object) -> None:
    run = RunFactory()
    policy = run.engine_params().egress
    assert policy is not None
    assert [str(n) for n in policy.allowed] == ["127.0.0.0/8", "::1/128"]


# The audit's loose ends (issue 17, item 5): what a client would pass on as it is or read as
# something else, and a host made to look like another.
@pytest.mark.parametrize(
    ("protocol", "base_url", "why"),
    [
        ("root", "root://-oProxyCommand=x:1094/", "starts with '-'"),
        ("https", "https://se.example.org:0/", "port 0"),
        ("root", "root://se.example.org:1094//store?authz=eyJhbGci", "query string"),
        ("https", "https://se.example.org/store?access_token=x", "query string"),
        ("davs", "davs://se.example.org/store#x", "query string or fragment"),
        ("https", "https://\u0430pple.example/", "mixes scripts"),  # a Cyrillic first letter
        ("https", "https://xn--pple-43d.example/", "mixes scripts"),  # the same, as xn--
        ("root", "root://se\u0441ure.example.org:1094/", "mixes scripts"),  # a Cyrillic "s"
    ],
)
def test_a_base_url_a_client_would_misread_is_refused_naming_it(
    operator: APIClient, protocol: str, base_url: str, why: str
) -> None:
    site = own_site()
    body = {"site": site.pk, "name": "e1", "protocol": protocol, "base_url": base_url}
    answer = operator.post("/api/v1/endpoints/", body, format="json")
    assert answer.status_code == 400, answer.json()
    assert why in answer.json()["base_url"][0]
    assert not Endpoint.objects.exists()
    data = {"site": site.pk, "name": "e2", "protocol": protocol, "base_url": base_url}
    form = EndpointForm(data={**data, "role": "data", "enabled": True})
    assert not form.is_valid() and why in form.errors["base_url"][0]


def test_an_international_host_is_kept_and_shown_in_its_ascii_form(operator: APIClient) -> None:
    site = own_site()
    body = {
        "site": site.pk,
        "name": "e1",
        "protocol": "https",
        "base_url": "https://bücher.example/",
    }
    created = operator.post("/api/v1/endpoints/", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["base_url"] == "https://xn--bcher-kva.example/"
    assert Endpoint.objects.get().base_url == "https://xn--bcher-kva.example/"
    changed = operator.patch(
        f"/api/v1/endpoints/{created.json()['id']}/",
        {"base_url": "https://日本語.jp:8443/"},
        format="json",
    )
    assert changed.status_code == 200, changed.json()
    assert Endpoint.objects.get().base_url == "https://xn--wgv71a119e.jp:8443/"


def test_credential_hosts_are_checked_written_as_matched_and_reach_the_runs(
    operator: APIClient,
) -> None:
    site = own_site()
    body = {
        "site": site.pk,
        "name": "door",
        "protocol": "https",
        "base_url": "https://door.example.org/",
        "credential_hosts": ["Pool7.Example.org", ".dc.example.org"],
    }
    created = operator.post("/api/v1/endpoints/", body, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["credential_hosts"] == ["pool7.example.org", ".dc.example.org"]
    endpoint = Endpoint.objects.get()
    params = endpoint.engine_params(RunParams(urls=("https://door.example.org/f",)))
    assert params.credential_hosts == ("pool7.example.org", ".dc.example.org")
    for bad, why in ((".ac.uk", "public suffix"), ("https://x.org", "not a host name")):
        refused = operator.patch(
            f"/api/v1/endpoints/{endpoint.pk}/", {"credential_hosts": [bad]}, format="json"
        )
        assert refused.status_code == 400
        assert why in refused.json()["credential_hosts"][0]
    assert Endpoint.objects.get().credential_hosts == ["pool7.example.org", ".dc.example.org"]
    form = EndpointForm(
        data={
            "site": site.pk,
            "name": "door2",
            "protocol": "https",
            "base_url": "https://door2.example.org/",
            "role": "data",
            "enabled": True,
            "credential_hosts": "pool8.example.org, .org",
        }
    )
    assert not form.is_valid() and "public suffix" in form.errors["credential_hosts"][0]
    form = EndpointForm(data={**form.data, "credential_hosts": "pool8.example.org,  10.0.0.1"})
    assert form.is_valid(), form.errors
    assert form.save().credential_hosts == ["pool8.example.org", "10.0.0.1"]
    assert EndpointForm(instance=Endpoint.objects.get(name="door2")).initial[
        "credential_hosts"
    ] == ("pool8.example.org 10.0.0.1")
