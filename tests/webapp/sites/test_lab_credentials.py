"""The lab's authenticated endpoints, registered and measured with their credentials: the
oauth client's token from the lab issuer, the lab proxy, the lab CA merged with the host's."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from webapp.campaigns.forms import CampaignForm
from webapp.campaigns.models import Run
from webapp.demo.services import lab_register
from webapp.sites.credentials import TOKEN_CACHE, endpoint_run_credential
from webapp.sites.models import Endpoint
from webapp.sites.services import endpoint_test_connection, local_ca_dir
from workers.engine.credentials import SYSTEM_CA_DIR, CredentialKind
from workers.engine.egress import EgressPolicy
from workers.engine.errors import ErrorClass, ProbeError
from workers.engine.oauth import OAuthClient

pytestmark = pytest.mark.django_db


def lab_endpoint(name: str) -> Endpoint:
    return Endpoint.objects.get(name=name)


def test_lab_register_gives_each_authenticated_endpoint_its_kind_of_credential(
    registered: Any,
) -> None:
    kinds = {e.name: e.credential_kind for e in Endpoint.objects.all()}
    for lab_endpoint_ in registered.endpoints():
        expected = {"none": "none", "token": "oauth-client", "x509": "x509-proxy"}
        assert kinds[lab_endpoint_.name] == expected[lab_endpoint_.auth]
    client = OAuthClient.from_json(lab_endpoint("near-roots").credential)
    lab_client = registered.oauth_client(scratch_path="/scratch/near/")
    assert client.public_json() == {k: v for k, v in lab_client.items() if k != "client_secret"}
    proxy = lab_endpoint("near-gsi-root").credential_info()
    assert proxy["kind"] == "x509-proxy" and proxy["subject"]
    assert lab_endpoint("near-root").credential == ""


def test_the_token_doors_client_writes_under_its_own_sites_scratch_only(registered: Any) -> None:
    """So that write and copy campaigns on the lab's token doors pass the scope check at save;
    the lab's read-only client (and token) is refused there, naming the endpoint."""
    user = User.objects.create_superuser("ada")
    for name in ("near-https", "far-roots", "local-davs"):
        endpoint = lab_endpoint(name)
        site = name.split("-")[0]
        scopes = endpoint.credential_info()["scopes"]
        assert f"storage.modify:/scratch/{site}" in scopes and "storage.read:/fedprobe" in scopes
        assert not [s for s in scopes if s.endswith(":/scratch")], scopes  # not every site's
        assert campaign_form_errors(endpoint, ["write"], user) == {}
    near, far = lab_endpoint("near-https"), lab_endpoint("far-https")
    copy = {"destination_endpoint": far.pk}
    assert campaign_form_errors(near, ["tpc-pull", "tpc-push"], user, **copy) == {}
    far.credential = OAuthClient.from_json(json.dumps(registered.oauth_client())).to_json()
    far.save()
    refused = campaign_form_errors(near, ["tpc-pull"], user, **copy)
    assert "far-https" in refused["destination_endpoint"][0]
    assert "storage.modify:/scratch/far" in refused["destination_endpoint"][0]
    near.credential_kind = "token"
    near.credential = registered.token_file("read").read_text().strip()
    near.save()
    refused = campaign_form_errors(near, ["write"], user)
    assert "near-https" in refused["operations"][0]


def campaign_form_errors(
    endpoint: Endpoint, operations: list[str], user: User, **fields: Any
) -> dict[str, list[str]]:
    data = {
        "name": "lab writes",
        "endpoints": [endpoint.pk],
        "operations": operations,
        "methods": "direct",
        "patterns": "sequential",
        "read_sizes": "256k",
        "fractions": "1",
        "clients": "1",
        **fields,
    }
    form = CampaignForm(data=data, user=user)
    form.is_valid()
    return {name: [str(m) for m in messages] for name, messages in form.errors.items()}


def test_lab_register_is_idempotent_and_keeps_the_credentials(registered: Any) -> None:
    before = {e.name: (e.pk, e.credential_kind) for e in Endpoint.objects.all()}
    lab_register(lab=registered, ca_dir=local_ca_dir())
    assert {e.name: (e.pk, e.credential_kind) for e in Endpoint.objects.all()} == before


def test_the_merged_ca_folder_holds_the_hosts_and_the_labs_cas(registered: Any) -> None:
    merged = local_ca_dir()
    names = {entry.name for entry in merged.iterdir()}
    lab_names = {e.name for e in registered.ca_dir().iterdir() if e.name.endswith(".0")}
    assert lab_names <= names
    host = {e.name for e in Path(SYSTEM_CA_DIR).iterdir() if e.name.endswith(".0")}
    assert host and host <= names
    assert all(os.path.exists(merged / name) for name in names)  # no dangling link
    lab_register(lab=registered, ca_dir=merged)  # again: the same entries
    assert {entry.name for entry in merged.iterdir()} == names


def test_an_oauth_client_gets_a_token_from_the_lab_issuer_and_reuses_it(registered: Any) -> None:
    endpoint = lab_endpoint("near-https")
    egress = EgressPolicy.allowing(["127.0.0.0/8"])
    ca_dir = str(local_ca_dir())
    first = endpoint_run_credential(endpoint, egress=egress, ca_dir=ca_dir)
    assert first is not None and first.kind == CredentialKind.TOKEN
    info = first.info()
    assert info.issuer == registered.issuer_url()
    assert info.expires_at is not None
    again = endpoint_run_credential(endpoint, egress=egress, ca_dir=ca_dir)
    assert again is first  # cached, not asked again
    # Asked to outlive the token (20 minutes), the cache asks the issuer for a fresh one.
    longer = endpoint_run_credential(endpoint, egress=egress, ca_dir=ca_dir, valid_for_s=3600)
    assert longer is not None and longer.secret != first.secret


def probe_run(endpoint: Endpoint, pk: int) -> Run:
    return Run(
        pk=pk,
        endpoint=endpoint,
        test_file=endpoint.default_file,
        method="direct",
        pattern="random",
        read_size=4096,
        fraction=0.01,
        clients=1,
        deadline_s=60,
    )


def test_run_params_give_the_engine_the_credential_and_the_ca_folder(registered: Any) -> None:
    proxy_endpoint = lab_endpoint("near-gsi-https")
    params = probe_run(proxy_endpoint, 1).engine_params()
    assert params.ca_dir == str(local_ca_dir())
    assert params.credential is not None
    assert params.credential.kind == CredentialKind.X509_PROXY
    assert params.credential.secret == proxy_endpoint.credential
    token_params = probe_run(lab_endpoint("near-roots"), 2).engine_params()
    assert token_params.credential is not None
    assert token_params.credential.kind == CredentialKind.TOKEN
    assert token_params.credential.info().issuer == registered.issuer_url()
    # What travels to the client processes and into the run JSON holds no credential.
    shown = json.dumps(token_params.to_json())
    assert token_params.credential.secret not in shown
    assert params.credential.secret.splitlines()[1] not in json.dumps(params.to_json())
    assert probe_run(lab_endpoint("near-root"), 3).engine_params().credential is None


@pytest.mark.parametrize(
    ("name", "auth"),
    [
        ("near-roots", "token"),
        ("near-https", "token"),
        ("local-davs", "token"),
        ("near-gsi-root", "gsi"),
        ("near-gsi-https", "x509"),
    ],
)
def test_connection_to_an_authenticated_lab_endpoint_succeeds_with_its_credential(
    registered: Any, name: str, auth: str
) -> None:
    check = endpoint_test_connection(endpoint=lab_endpoint(name))
    assert check.ok, check
    assert check.auth == auth
    assert check.warnings == ()
    if lab_endpoint(name).base_url.startswith(("roots", "https", "davs")):
        assert check.tls_version.startswith("TLS")
    for variable in ("BEARER_TOKEN_FILE", "X509_USER_PROXY", "BEARER_TOKEN"):
        assert variable not in os.environ  # the web process holds nothing of it


def test_the_endpoint_page_shows_what_the_connection_negotiated_and_no_secret(
    registered: Any, admin: Client
) -> None:
    endpoint = lab_endpoint("near-https")
    page = admin.post(f"/endpoints/{endpoint.pk}/test/", follow=True).content.decode()
    assert "Connection test: ok" in page
    assert "<dt>Authentication</dt><dd>token</dd>" in page
    assert re.search(r"<dt>TLS</dt><dd>TLSv1\.[23], \S+", page)
    assert registered.oauth_client()["client_secret"] not in page
    token = TOKEN_CACHE.token(
        OAuthClient.from_json(endpoint.credential), egress=None, ca_dir=str(local_ca_dir())
    )
    for part in token.secret.split("."):
        assert part not in page


def test_a_token_whose_scope_misses_the_file_is_pointed_out_before_trying(
    registered: Any,
) -> None:
    endpoint = lab_endpoint("near-https")
    endpoint.credential_kind = "token"
    endpoint.credential = registered.mint_token(scope="storage.read:/elsewhere")
    endpoint.save()
    check = endpoint_test_connection(endpoint=endpoint)
    path = endpoint.default_file.path
    assert len(check.warnings) == 1
    assert "storage.read:/elsewhere" in check.warnings[0] and path in check.warnings[0]
    assert not check.ok
    assert check.error_class == ErrorClass.AUTH


def test_an_expired_token_fails_the_connection_test_as_auth_naming_its_expiry(
    registered: Any,
) -> None:
    endpoint = lab_endpoint("near-roots")
    endpoint.credential_kind = "token"
    endpoint.credential = registered.mint_token(expired=True)
    endpoint.save()
    expires_at = endpoint.credential_info()["expires_at"]
    assert expires_at
    check = endpoint_test_connection(endpoint=endpoint)
    assert (check.ok, check.error_class) == (False, "auth")
    assert "expired" in check.message and expires_at[:16] in check.message


def test_an_oauth_client_refused_by_the_issuer_fails_the_test_before_any_client(
    registered: Any,
) -> None:
    endpoint = lab_endpoint("near-https")
    wrong = {**registered.oauth_client(), "client_secret": "not-the-secret"}
    endpoint.credential = OAuthClient.from_json(json.dumps(wrong)).to_json()
    endpoint.save()
    with pytest.raises(ProbeError) as refused:
        endpoint_run_credential(endpoint, egress=None, ca_dir=str(local_ca_dir()))
    assert refused.value.error_class == ErrorClass.AUTH
    check = endpoint_test_connection(endpoint=endpoint)
    assert (check.ok, check.error_class) == (False, "auth")
    assert "not-the-secret" not in check.message
