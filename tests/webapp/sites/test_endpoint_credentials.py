"""Endpoint credentials: each kind validated in one place (form, API, admin), shown only as
what may be shown of it, replaceable over the API, and never rendered anywhere."""

from __future__ import annotations

import importlib
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from rest_framework.test import APIClient

from tests.webapp.factories import (
    EndpointFactory,
    SiteFactory,
    TestFileFactory,
    jwt,
    oauth_client,
    proxy_key,
    proxy_pem,
)
from webapp.accounts.services import api_token_create
from webapp.sites.credentials import ca_dir_merge, credential_change, expiry_note
from webapp.sites.models import Endpoint

pytestmark = pytest.mark.django_db

IN_A_DAY = int((datetime.now(UTC) + timedelta(days=1)).timestamp())
TOKEN = jwt(
    iss="https://iam.example.org/",
    sub="probe-robot",
    aud="https://wlcg.cern.ch/jwt/v1/any",
    scope="storage.read:/data storage.stage:/data",
    exp=IN_A_DAY,
)
PROXY = proxy_pem(subject="fedprobe probe")
CLIENT = oauth_client(secret="cl1ent-s3cret-v4lue")


def secrets_of(token: str = TOKEN, proxy: str = PROXY) -> list[str]:
    """What must never appear: each part of the token, the proxy's key, the client secret."""
    return [*token.split("."), proxy_key(proxy), CLIENT["client_secret"]]


def assert_no_secret(text: str) -> None:
    for secret in secrets_of():
        assert secret not in text


def endpoint_with(kind: str, credential: str, **fields: Any) -> Endpoint:
    endpoint: Endpoint = TestFileFactory(
        endpoint__protocol=fields.pop("protocol", "https"),
        endpoint__base_url=fields.pop("base_url", "https://se.example.org:443/"),
        **{f"endpoint__{k}": v for k, v in fields.items()},
    ).endpoint
    endpoint.credential_kind, endpoint.credential = kind, credential
    endpoint.full_clean()
    endpoint.save()
    return endpoint


def state() -> list[dict[str, Any]]:
    return [
        {**row, "credential": e.credential}
        for e, row in zip(
            Endpoint.objects.order_by("pk"), Endpoint.objects.order_by("pk").values(), strict=True
        )
    ]


# -- the rule, in one place --------------------------------------------------------------------


def unsaved_endpoint(kind: str, credential: str, protocol: str) -> Endpoint:
    return Endpoint(
        site=SiteFactory(),
        name="e",
        protocol=protocol,
        base_url=f"{protocol}://se.example.org:1094/",
        credential_kind=kind,
        credential=credential,
    )


@pytest.mark.parametrize(
    ("kind", "credential", "protocol"),
    [
        ("none", "", "root"),
        ("token", TOKEN, "https"),
        ("token", "an-opaque-t0ken", "roots"),
        ("token", f"  {TOKEN}\n", "davs"),
        ("x509-proxy", PROXY, "root"),
        ("x509-proxy", PROXY.replace("\n", "\r\n"), "https"),
        ("x509-proxy", PROXY, "gsiftp"),
        ("oauth-client", json.dumps(CLIENT), "https"),
    ],
)
def test_each_kind_takes_its_credential(kind: str, credential: str, protocol: str) -> None:
    endpoint = unsaved_endpoint(kind, credential, protocol)
    endpoint.full_clean()
    assert endpoint.credential_info()["kind"] == kind
    assert "problem" not in endpoint.credential_info()


@pytest.mark.parametrize(
    ("kind", "credential", "protocol", "field", "words"),
    [
        ("none", TOKEN, "https", "credential", "none takes no credential"),
        ("token", "", "https", "credential", "needs its credential"),
        ("token", "two words", "https", "credential", "one line"),
        ("token", "eyJub3Qi.anNvbg.x", "https", "credential", "does not decode"),
        ("token", TOKEN, "http", "credential_kind", "plain http"),
        ("oauth-client", json.dumps(CLIENT), "http", "credential_kind", "plain http"),
        ("token", TOKEN, "ftp", "credential_kind", "takes no bearer token"),
        ("x509-proxy", "not a pem", "https", "credential", "no PEM certificate"),
        ("x509-proxy", PROXY.split("-----BEGIN EC")[0], "https", "credential", "no private key"),
        ("x509-proxy", PROXY, "http", "credential_kind", "takes no X.509 proxy"),
        ("oauth-client", "{", "https", "credential", "JSON object"),
        ("oauth-client", json.dumps({**CLIENT, "token_url": "http://i/t"}), "https", "credential",
         "https://"),
        ("oauth-client", json.dumps({**CLIENT, "client_secret": ""}), "https", "credential",
         "client_secret is missing"),
        ("oauth-client", json.dumps({**CLIENT, "extra": "x"}), "https", "credential", "unknown"),
        ("kerberos", "x", "https", "credential_kind", "not one of"),
    ],
)  # fmt: skip
def test_a_credential_that_does_not_fit_its_kind_or_protocol_names_the_field(
    kind: str, credential: str, protocol: str, field: str, words: str
) -> None:
    endpoint = unsaved_endpoint(kind, credential, protocol)
    with pytest.raises(ValidationError) as refused:
        endpoint.full_clean()
    errors = refused.value.message_dict
    assert field in errors and any(words in message for message in errors[field])
    for secret in secrets_of():
        assert secret not in json.dumps(errors)


def test_root_and_roots_paths_get_the_double_slash() -> None:
    for protocol in ("root", "roots"):
        endpoint = Endpoint(protocol=protocol, base_url=f"{protocol}://se.example.org:1094/")
        assert endpoint.file_url("/data/f") == f"{protocol}://se.example.org:1094//data/f"
    https = Endpoint(protocol="https", base_url="https://se.example.org/")
    assert https.file_url("/data/f") == "https://se.example.org/data/f"


def test_a_kind_alone_keeps_a_credential_of_that_kind_and_none_drops_it() -> None:
    def change(kind: str | None, text: str | None) -> tuple[str, str]:
        return credential_change(stored_kind="token", stored="t", kind=kind, text=text)

    assert change(None, None) == ("token", "t")
    assert change("token", None) == ("token", "t")
    assert change(None, "new") == ("token", "new")
    assert change("none", None) == ("none", "")
    assert change("x509-proxy", None) == ("x509-proxy", "")  # refused: no proxy given
    assert change("x509-proxy", "pem") == ("x509-proxy", "pem")


def test_credentials_stored_before_kinds_become_tokens() -> None:
    migration = importlib.import_module("webapp.sites.migrations.0004_endpoint_credential_kind")
    with_one = EndpointFactory(credential="an-old-t0ken")
    without = EndpointFactory()
    migration.stored_credentials_are_tokens(apps, None)
    with_one.refresh_from_db()
    without.refresh_from_db()
    assert (with_one.credential_kind, with_one.credential) == ("token", "an-old-t0ken")
    assert without.credential_kind == "none"


# -- what is shown of it -----------------------------------------------------------------------


def test_info_shows_a_tokens_claims_a_proxys_names_and_an_oauth_clients_public_fields() -> None:
    token = endpoint_with("token", TOKEN).credential_info()
    assert token == {
        "kind": "token",
        "issuer": "https://iam.example.org/",
        "subject": "probe-robot",
        "audience": ["https://wlcg.cern.ch/jwt/v1/any"],
        "scopes": ["storage.read:/data", "storage.stage:/data"],
        "expires_at": datetime.fromtimestamp(IN_A_DAY, UTC).isoformat(),
    }
    proxy = endpoint_with("x509-proxy", PROXY).credential_info()
    assert proxy["subject"] == proxy["issuer"] == "CN=fedprobe probe"
    assert proxy["expires_at"]
    client = endpoint_with("oauth-client", json.dumps(CLIENT)).credential_info()
    assert client == {
        "kind": "oauth-client",
        "issuer": "https://iam.example.org",
        "subject": None,
        "audience": [CLIENT["audience"]],
        "scopes": ["storage.read:/"],
        "expires_at": None,
        "token_url": CLIENT["token_url"],
        "client_id": CLIENT["client_id"],
    }
    assert EndpointFactory().credential_info() == {"kind": "none"}


def test_expiry_is_marked_expired_or_close() -> None:
    now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    assert expiry_note((now - timedelta(seconds=1)).isoformat(), now=now) == "expired"
    assert expiry_note((now + timedelta(minutes=42, seconds=5)).isoformat(), now=now) == (
        "expires in 42 min"
    )
    assert expiry_note((now + timedelta(days=3)).isoformat(), now=now) == ""
    assert expiry_note(None, now=now) == ""


def test_the_endpoint_page_shows_the_credential_info_and_never_the_credential(
    viewer: Client,
) -> None:
    soon = jwt(iss="https://iam.example.org/", sub="probe-robot", scope="storage.read:/",
               exp=int((datetime.now(UTC) + timedelta(minutes=30)).timestamp()))  # fmt: skip
    expired = jwt(iss="https://iam.example.org/", exp=int(datetime.now(UTC).timestamp()) - 60)
    pages = {
        "token": endpoint_with("token", TOKEN),
        "soon": endpoint_with("token", soon),
        "expired": endpoint_with("token", expired),
        "proxy": endpoint_with("x509-proxy", PROXY),
        "client": endpoint_with("oauth-client", json.dumps(CLIENT)),
    }
    text = {name: viewer.get(f"/endpoints/{e.pk}/").content.decode() for name, e in pages.items()}
    for page in text.values():
        assert_no_secret(page)
        assert soon.split(".")[1] not in page and expired.split(".")[1] not in page
    assert "probe-robot" in text["token"] and "storage.stage:/data" in text["token"]
    assert "https://wlcg.cern.ch/jwt/v1/any" in text["token"]
    assert re.search(r"expires in (29|30) min", text["soon"])
    assert ">expired<" in text["expired"]
    assert "CN=fedprobe probe" in text["proxy"]
    assert CLIENT["client_id"] in text["client"] and CLIENT["token_url"] in text["client"]


# -- the form ----------------------------------------------------------------------------------


def form_data(endpoint: Endpoint | None = None, **fields: str) -> dict[str, str]:
    data = {
        "site": str(endpoint.site_id if endpoint else SiteFactory().pk),
        "name": endpoint.name if endpoint else "new-https",
        "protocol": endpoint.protocol if endpoint else "https",
        "base_url": endpoint.base_url if endpoint else "https://se.example.org:443/",
        "role": "data",
        "enabled": "on",
        "credential_kind": endpoint.credential_kind if endpoint else "none",
        "credential": "",
    }
    data.update(fields)
    return data


def oauth_fields(client: dict[str, str]) -> dict[str, str]:
    return {f"oauth_{name}": value for name, value in client.items()}


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"credential_kind": "token", "credential": TOKEN}, "token"),
        ({"credential_kind": "x509-proxy", "credential": PROXY.replace("\n", "\r\n")},
         "x509-proxy"),
        ({"credential_kind": "oauth-client", **oauth_fields(CLIENT)}, "oauth-client"),
    ],
)  # fmt: skip
def test_the_form_stores_each_kind(admin: Client, fields: dict[str, str], kind: str) -> None:
    response = admin.post("/endpoints/new/", form_data(**fields))
    assert response.status_code == 302, response.content.decode()
    endpoint = Endpoint.objects.get(name="new-https")
    assert endpoint.credential_kind == kind
    assert "problem" not in endpoint.credential_info()
    if kind == "oauth-client":
        assert json.loads(endpoint.credential) == CLIENT


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"credential_kind": "none", "credential": TOKEN}, "credential"),
        ({"credential_kind": "token", "credential": "not a token"}, "credential"),
        ({"credential_kind": "token"}, "credential"),
        ({"credential_kind": "x509-proxy", "credential": "-----BEGIN CERTIFICATE-----"},
         "credential"),
        ({"credential_kind": "token", "credential": TOKEN, "protocol": "http",
          "base_url": "http://se.example.org/"}, "credential_kind"),
        ({"credential_kind": "oauth-client", **oauth_fields({**CLIENT, "token_url": "http://i/t"})},
         "oauth_token_url"),
        ({"credential_kind": "oauth-client", **oauth_fields({**CLIENT, "client_id": ""})},
         "oauth_client_id"),
        ({"credential_kind": "oauth-client", **oauth_fields({**CLIENT, "client_secret": ""})},
         "oauth_client_secret"),
    ],
)  # fmt: skip
def test_the_form_refuses_a_bad_credential_naming_the_field_and_stores_nothing(
    admin: Client, fields: dict[str, str], field: str
) -> None:
    site = SiteFactory()
    before = state()
    response = admin.post("/endpoints/new/", form_data(site=str(site.pk), **fields))
    assert response.status_code == 200
    page = response.content.decode()
    assert f'id="id_{field}_error"' in page
    assert state() == before
    assert_no_secret(page)


def test_editing_keeps_what_is_not_given_and_never_renders_the_stored_credential(
    admin: Client,
) -> None:
    endpoint = endpoint_with("oauth-client", json.dumps(CLIENT))
    edit = admin.get(f"/endpoints/{endpoint.pk}/edit/").content.decode()
    assert_no_secret(edit)
    assert f'value="{CLIENT["client_id"]}"' in edit  # the public fields, prefilled
    assert f'value="{CLIENT["token_url"]}"' in edit
    assert re.search(r'<input type="password" name="oauth_client_secret"[^>]*>', edit)
    # The secret left empty keeps the stored one; a new scope is taken.
    changed = {**oauth_fields(CLIENT), "oauth_client_secret": "", "oauth_scope": "storage.read:/x"}
    admin.post(f"/endpoints/{endpoint.pk}/edit/", form_data(endpoint, **changed))
    endpoint.refresh_from_db()
    assert json.loads(endpoint.credential) == {**CLIENT, "scope": "storage.read:/x"}
    # A refused edit re-renders without what was typed, and changes nothing.
    before = state()
    refused = admin.post(
        f"/endpoints/{endpoint.pk}/edit/",
        form_data(endpoint, credential_kind="x509-proxy", credential=PROXY, name="bad name"),
    )
    assert refused.status_code == 200
    assert_no_secret(refused.content.decode())
    assert state() == before


def test_a_proxy_replaces_a_token_through_the_form(admin: Client) -> None:
    endpoint = endpoint_with("token", TOKEN, protocol="root", base_url="root://se.example.org/")
    admin.post(
        f"/endpoints/{endpoint.pk}/edit/",
        form_data(endpoint, credential_kind="x509-proxy", credential=PROXY),
    )
    endpoint.refresh_from_db()
    assert (endpoint.credential_kind, endpoint.credential) == ("x509-proxy", PROXY)
    admin.post(f"/endpoints/{endpoint.pk}/edit/", form_data(endpoint, credential_kind="none"))
    endpoint.refresh_from_db()
    assert (endpoint.credential_kind, endpoint.credential) == ("none", "")


# -- the admin ---------------------------------------------------------------------------------


@pytest.fixture
def superuser() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="x"))
    return client


def test_the_admin_never_renders_the_credential(superuser: Client) -> None:
    endpoints = [
        endpoint_with("token", TOKEN),
        endpoint_with("x509-proxy", PROXY),
        endpoint_with("oauth-client", json.dumps(CLIENT)),
    ]
    listed = superuser.get("/admin/sites/endpoint/").content.decode()
    assert_no_secret(listed)
    for endpoint in endpoints:
        page = superuser.get(f"/admin/sites/endpoint/{endpoint.pk}/change/")
        assert page.status_code == 200
        text = page.content.decode()
        assert_no_secret(text)
        assert 'name="credential"' not in text and 'name="credential_kind"' not in text
        assert endpoint.get_credential_kind_display() in text  # type: ignore[attr-defined]
    assert (
        "probe-robot"
        in superuser.get(f"/admin/sites/endpoint/{endpoints[0].pk}/change/").content.decode()
    )


def test_the_admin_refuses_a_protocol_the_stored_credential_cannot_go_over(
    superuser: Client,
) -> None:
    endpoint = endpoint_with("token", TOKEN)
    response = superuser.post(
        f"/admin/sites/endpoint/{endpoint.pk}/change/",
        {
            "site": endpoint.site_id,
            "name": endpoint.name,
            "protocol": "http",
            "base_url": "http://se.example.org/",
            "role": "data",
            "enabled": "on",
            "files-TOTAL_FORMS": "0",
            "files-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert "credential_kind: a token is never sent over plain http://" in text
    assert_no_secret(text)
    endpoint.refresh_from_db()
    assert endpoint.protocol == "https"


# -- the API -----------------------------------------------------------------------------------


@pytest.fixture
def api(operator: Client) -> APIClient:
    """The operator's API client (token auth)."""
    client = APIClient()
    key = api_token_create(user=operator.user)  # type: ignore[attr-defined]
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def api_body(**fields: Any) -> dict[str, Any]:
    return {
        # The operator's own: only a site's owner (or an admin) adds endpoints to it.
        "site": SiteFactory(owner=User.objects.get(username="operator")).pk,
        "name": "api-https",
        "protocol": "https",
        "base_url": "https://se.example.org:443/",
        **fields,
    }


@pytest.mark.parametrize(
    ("kind", "credential"),
    [("token", TOKEN), ("x509-proxy", PROXY), ("oauth-client", json.dumps(CLIENT))],
)
def test_the_api_takes_each_kind_and_shows_its_info_never_the_credential(
    api: APIClient, kind: str, credential: str
) -> None:
    created = api.post(
        "/api/v1/endpoints/", api_body(credential_kind=kind, credential=credential), format="json"
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["credential_kind"], body["has_credential"]) == (kind, True)
    assert body["credential_info"]["kind"] == kind
    assert "credential" not in body
    for response in (
        created,
        api.get("/api/v1/endpoints/"),
        api.get(f"/api/v1/endpoints/{body['id']}/"),
    ):
        assert_no_secret(response.content.decode())


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"credential": TOKEN}, "credential"),  # kind none
        ({"credential_kind": "token"}, "credential"),
        ({"credential_kind": "token", "credential": "a b"}, "credential"),
        ({"credential_kind": "x509-proxy", "credential": TOKEN}, "credential"),
        ({"credential_kind": "oauth-client", "credential": TOKEN}, "credential"),
        ({"credential_kind": "token", "credential": TOKEN, "protocol": "http",
          "base_url": "http://se.example.org/"}, "credential_kind"),
        ({"credential_kind": "ssh-key", "credential": TOKEN}, "credential_kind"),
    ],
)  # fmt: skip
def test_the_api_refuses_a_bad_credential_naming_the_field_and_changes_nothing(
    api: APIClient, fields: dict[str, Any], field: str
) -> None:
    before = state()
    refused = api.post("/api/v1/endpoints/", api_body(**fields), format="json")
    assert refused.status_code == 400
    assert field in refused.json()
    assert_no_secret(refused.content.decode())
    assert (
        state()[: len(before)] == before and Endpoint.objects.filter(name="api-https").count() == 0
    )


def test_a_static_token_is_replaced_over_the_api_without_touching_campaigns(
    api: APIClient, operator: Client
) -> None:
    from tests.webapp.factories import CampaignFactory

    endpoint = endpoint_with("token", TOKEN, site__owner=operator.user)  # type: ignore[attr-defined]
    campaign = CampaignFactory(endpoints=[endpoint])
    fresh = jwt(iss="https://iam.example.org/", sub="rotated", exp=IN_A_DAY)
    replaced = api.patch(
        f"/api/v1/endpoints/{endpoint.pk}/",
        {"credential_kind": "token", "credential": fresh},
        format="json",
    )
    assert replaced.status_code == 200, replaced.json()
    assert replaced.json()["credential_info"]["subject"] == "rotated"
    assert fresh.split(".")[1] not in replaced.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.credential == fresh
    # The credential alone replaces one of the stored kind; a proxy needs its kind.
    again = api.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"credential": TOKEN}, format="json")
    assert again.status_code == 200
    endpoint.refresh_from_db()
    assert endpoint.credential == TOKEN
    wrong = api.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"credential": PROXY}, format="json")
    assert wrong.status_code == 400 and "credential" in wrong.json()
    endpoint.refresh_from_db()
    assert endpoint.credential == TOKEN
    # Other fields leave it alone; kind none removes it.
    api.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"enabled": False}, format="json")
    endpoint.refresh_from_db()
    assert (endpoint.credential_kind, endpoint.credential, endpoint.enabled) == (
        "token",
        TOKEN,
        False,
    )
    removed = api.patch(
        f"/api/v1/endpoints/{endpoint.pk}/", {"credential_kind": "none"}, format="json"
    )
    assert removed.json()["credential_info"] == {"kind": "none"}
    assert list(campaign.endpoints.all()) == [endpoint]


def test_the_openapi_schema_has_the_credential_write_only_and_no_secret(
    api: APIClient,
) -> None:
    endpoint_with("token", TOKEN)
    schema = api.get("/api/schema/?format=json")
    assert schema.status_code == 200
    text = schema.content.decode()
    assert_no_secret(text)
    components = schema.json()["components"]["schemas"]
    assert "credential" not in components["Endpoint"]["properties"]
    assert "credential" in components["EndpointRequest"]["properties"]
    assert components["Endpoint"]["properties"]["credential_info"]["allOf"][0]["$ref"].endswith(
        "CredentialInfo"
    )
    assert components["CredentialKindEnum"]["enum"] == [
        "none",
        "token",
        "oauth-client",
        "x509-proxy",
    ]


# -- the CA folder -----------------------------------------------------------------------------


def test_the_merged_ca_folder_numbers_hash_collisions_and_drops_what_is_gone(
    tmp_path: Path,
) -> None:
    host, lab, target = tmp_path / "host", tmp_path / "lab", tmp_path / "ca"
    for folder, names in [
        (host, ["1234abcd.0", "1234abcd.r0", "1234abcd.signing_policy", "README"]),
        (lab, ["1234abcd.0", "1234abcd.signing_policy", "cafe0001.0", "cafe0001.signing_policy"]),
    ]:
        folder.mkdir()
        for name in names:
            (folder / name).write_text(f"{folder.name} {name}")
    merged = ca_dir_merge(target=target, sources=[host, lab])
    links = {p.name: os.readlink(p) for p in target.iterdir()}
    assert links == {
        "1234abcd.0": str(host / "1234abcd.0"),
        "1234abcd.1": str(lab / "1234abcd.0"),  # same hash: the next number
        "1234abcd.r0": str(host / "1234abcd.r0"),
        "1234abcd.signing_policy": str(host / "1234abcd.signing_policy"),  # the first stays
        "cafe0001.0": str(lab / "cafe0001.0"),
        "cafe0001.signing_policy": str(lab / "cafe0001.signing_policy"),
    }
    assert merged.entries == len(links)
    (lab / "cafe0001.0").unlink()
    (lab / "cafe0001.signing_policy").unlink()
    ca_dir_merge(target=target, sources=[host, lab])
    assert not any(p.name.startswith("cafe0001") for p in target.iterdir())
