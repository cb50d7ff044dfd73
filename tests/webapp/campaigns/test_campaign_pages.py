"""Campaign pages: list, detail, the form with its preview and bounds, launch and clone, roles."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import DjangoAssertNumQueries, Settings

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
)
from webapp.accounts.services import user_set_role
from webapp.campaigns.models import Campaign, Run
from webapp.sites.models import VantagePoint
from webapp.sites.services import endpoint_set_enabled

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024


def login(client: Client, role: str, username: str | None = None) -> User:
    user = User.objects.create_user(username or role)
    user_set_role(user=user, role=role)
    client.force_login(user)
    return user


def form_data(**changes: Any) -> dict[str, Any]:
    """A valid campaign form on a fresh endpoint with a 16 MiB test file: 2 x 2 = 4 runs."""
    endpoint = changes.pop("endpoint", None) or TestFileFactory(size=16 * MiB).endpoint
    data: dict[str, Any] = {
        "name": "nightly",
        "description": "",
        "endpoints": [endpoint.pk],
        "methods": "direct",
        "patterns": "random",
        "read_sizes": "4k, 1M",
        "fractions": "0.5",
        "clients": "1, 2",
        "files": "1",
        "depth": "64",
        "vector_size": "256",
        "skip": "3",
        "readahead": "0",
        "streams": "1",
        "repetitions": "1",
        "deadline_s": "",
        "schedule": "",
    }
    data.update(changes)
    return data


def field_errors(html: str) -> list[str]:
    """The form's error lines ("field: message"), as the page shows them."""
    return re.findall(r'<p class="error" id="id_\w+_error">([^<]*)</p>', html)


# -- viewers read, and cannot write ------------------------------------------------------


def test_a_viewer_sees_the_list_and_the_detail_without_write_buttons(client: Client) -> None:
    campaign = CampaignFactory(name="probe-all", endpoints=[TestFileFactory().endpoint])
    login(client, "viewer")
    listed = client.get("/campaigns/").content.decode()
    assert "probe-all" in listed
    assert f'href="/campaigns/{campaign.pk}/"' in listed
    assert "/campaigns/new/" not in listed
    detail = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "probe-all" in detail
    for action in ("launch", "clone", "edit"):
        assert f"/campaigns/{campaign.pk}/{action}/" not in detail


@pytest.mark.parametrize("action", ["launch", "clone"])
def test_a_viewer_cannot_launch_or_clone(client: Client, action: str) -> None:
    campaign = CampaignFactory(endpoints=[TestFileFactory().endpoint])
    login(client, "viewer")
    assert client.post(f"/campaigns/{campaign.pk}/{action}/").status_code == 403
    assert Campaign.objects.count() == 1
    assert not Run.objects.exists()


def test_a_viewer_cannot_create_or_edit(client: Client) -> None:
    campaign = CampaignFactory(name="before", endpoints=[TestFileFactory().endpoint])
    login(client, "viewer")
    assert client.get("/campaigns/new/").status_code == 403
    assert client.post("/campaigns/new/", form_data()).status_code == 403
    assert client.get(f"/campaigns/{campaign.pk}/edit/").status_code == 403
    assert (
        client.post(f"/campaigns/{campaign.pk}/edit/", form_data(name="after")).status_code == 403
    )
    assert list(Campaign.objects.values_list("name", flat=True)) == ["before"]


def test_anonymous_users_are_sent_to_log_in(client: Client) -> None:
    campaign = CampaignFactory()
    for path in (f"/campaigns/{campaign.pk}/", f"/campaigns/{campaign.pk}/edit/"):
        assert client.get(path).status_code == 302
    assert client.post(f"/campaigns/{campaign.pk}/launch/").status_code == 302
    assert not Run.objects.exists()


# -- the list ------------------------------------------------------------------------------


def test_the_list_shows_endpoints_matrix_size_schedule_and_run_statuses(client: Client) -> None:
    endpoints = [TestFileFactory().endpoint, TestFileFactory().endpoint, EndpointFactory()]
    campaign = CampaignFactory(
        endpoints=endpoints, clients=[1, 2, 4], patterns=["random", "async"], schedule="0 2 * * *"
    )
    test_file = endpoints[0].default_file
    for status in ("succeeded", "succeeded", "failed"):
        RunFactory(campaign=campaign, test_file=test_file, status=status)
    login(client, "viewer")
    html = client.get("/campaigns/").content.decode()
    row = re.search(r"<tr>\s*<td><a href=\"/campaigns/\d+/\">.*?</tr>", html, re.S).group(0)
    cells = re.findall(r'<td class="num">(\d+)</td>', row)
    # 3 endpoints, 2 with a test file: 2 files x 1 vantage point x 2 patterns x 3 clients
    assert cells == ["3", "12"] == ["3", str(campaign.matrix_size())]
    assert "<code>0 2 * * *</code>" in row
    assert f'?campaign={campaign.pk}&amp;status=succeeded">2 succeeded' in row
    assert "1 failed" in row


def test_the_list_costs_the_same_queries_for_many_campaigns(
    client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    login(client, "viewer")
    for _ in range(10):
        campaign = CampaignFactory(endpoints=[TestFileFactory().endpoint])
        RunFactory(campaign=campaign, test_file=campaign.endpoints.get().default_file)
    with django_assert_max_num_queries(10):
        assert client.get("/campaigns/").status_code == 200


# -- the form ------------------------------------------------------------------------------


def test_an_operator_creates_a_campaign_owned_by_them_on_the_local_vantage_point(
    client: Client,
) -> None:
    alice = login(client, "operator", "alice")
    data = form_data(read_sizes="4k, 1M", readahead="64k", deadline_s="120")
    response = client.post("/campaigns/new/", data)
    campaign = Campaign.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/campaigns/{campaign.pk}/"
    assert campaign.owner == alice
    assert campaign.read_sizes == [4096, MiB]
    assert (campaign.readahead, campaign.deadline_s) == (65536, 120)
    assert campaign.clients == [1, 2]
    assert [vp.name for vp in campaign.vantage_points.all()] == ["local"]
    assert campaign.matrix_size() == 4


def test_the_form_offers_enabled_endpoints_grouped_by_site(client: Client) -> None:
    shown = TestFileFactory().endpoint
    hidden = EndpointFactory(enabled=False)
    login(client, "operator")
    html = client.get("/campaigns/new/").content.decode()
    assert f'<optgroup label="{shown.site.name}">' in html
    assert shown.name in html
    assert hidden.name not in html


def test_the_edit_form_shows_sizes_with_units_and_saves_changes(client: Client) -> None:
    operator = login(client, "operator")
    campaign = CampaignFactory(
        owner=operator, endpoints=[TestFileFactory().endpoint], read_sizes=[4096, MiB, 1000]
    )
    html = client.get(f"/campaigns/{campaign.pk}/edit/").content.decode()
    assert 'value="4k, 1M, 1000"' in html
    data = form_data(endpoint=campaign.endpoints.get(), name="renamed", clients="8")
    assert client.post(f"/campaigns/{campaign.pk}/edit/", data).status_code == 302
    campaign.refresh_from_db()
    assert (campaign.name, campaign.clients, campaign.owner) == ("renamed", [8], operator)


def test_editing_keeps_an_endpoint_disabled_meanwhile_and_a_new_campaign_cannot_pick_it(
    client: Client,
) -> None:
    operator = login(client, "operator")
    kept, disabled = TestFileFactory().endpoint, TestFileFactory().endpoint
    campaign = CampaignFactory(owner=operator, endpoints=[kept, disabled])
    endpoint_set_enabled(endpoint=disabled, enabled=False)
    html = client.get(f"/campaigns/{campaign.pk}/edit/").content.decode()
    assert f"selected>{disabled.name} (root, data server) - disabled: not read</option>" in html
    data = form_data(endpoint=kept, endpoints=[kept.pk, disabled.pk], name="same")
    assert client.post(f"/campaigns/{campaign.pk}/edit/", data).status_code == 302
    assert set(campaign.endpoints.all()) == {kept, disabled}
    response = client.post("/campaigns/new/", form_data(endpoints=[disabled.pk]))
    assert field_errors(response.content.decode())[0].startswith("endpoints: Select a valid")
    assert Campaign.objects.count() == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"clients": "0"}, "clients"),
        ({"clients": "300"}, "clients"),
        ({"clients": "1, two"}, "clients"),
        ({"read_sizes": "0"}, "read_sizes"),
        ({"read_sizes": "65M"}, "read_sizes"),
        ({"read_sizes": "4 parsecs"}, "read_sizes"),
        ({"fractions": "1.5"}, "fractions"),
        ({"fractions": "0"}, "fractions"),
        ({"fractions": "nan"}, "fractions"),
        ({"methods": "teleport"}, "methods"),
        ({"patterns": "zigzag"}, "patterns"),
        ({"depth": "0"}, "depth"),
        ({"vector_size": "1025"}, "vector_size"),
        ({"readahead": "2G"}, "readahead"),
        ({"deadline_s": str(6 * 3600 + 1)}, "deadline_s"),
        ({"endpoints": []}, "endpoints"),
        ({"endpoints": [999999]}, "endpoints"),
        ({"name": ""}, "name"),
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"clients": ", ".join(["1"] * 33)}, "clients"),
    ],
)
def test_bad_input_re_renders_naming_the_field_and_creates_nothing(
    client: Client, changes: dict[str, Any], field: str
) -> None:
    login(client, "operator")
    response = client.post("/campaigns/new/", form_data(**changes))
    assert response.status_code == 200
    errors = field_errors(response.content.decode())
    assert errors and all(e.startswith(f"{field}: ") for e in errors), errors
    assert not Campaign.objects.exists()


def test_a_gridftp_endpoint_refuses_direct_reads_naming_methods(client: Client) -> None:
    gridftp = EndpointFactory(protocol="gsiftp", base_url="gsiftp://127.0.0.1:2811/")
    TestFileFactory(endpoint=gridftp)
    login(client, "operator")
    response = client.post("/campaigns/new/", form_data(endpoint=gridftp))
    assert field_errors(response.content.decode()) == [
        "methods: GridFTP endpoints are copy-only: use copy or stage"
    ]
    assert not Campaign.objects.exists()


def test_a_matrix_over_the_cap_is_refused_naming_the_matrix_and_creates_nothing(
    client: Client, settings: Settings
) -> None:
    settings.FEDPROBE_MAX_MATRIX = 3
    login(client, "operator")
    response = client.post("/campaigns/new/", form_data())
    html = response.content.decode()
    assert response.status_code == 200
    assert "matrix: 4 runs exceed the limit of 3 per launch" in html
    assert not Campaign.objects.exists()


def test_preview_shows_runs_and_planned_bytes_and_saves_nothing(client: Client) -> None:
    login(client, "operator")
    data = form_data(clients="1, 2, 4", repetitions="2", preview="1")
    response = client.post("/campaigns/new/", data)
    html = response.content.decode()
    assert response.status_code == 200
    # 1 file x 1 vantage point x 2 read sizes x 3 client counts x 2 repetitions
    assert '<strong class="preview-runs">12</strong>' in html
    # Each run reads half of 16 MiB per client: 2 x 2 x (1 + 2 + 4) x 8 MiB = 224 MiB.
    assert "224 MiB" in html
    assert "Nothing was saved" in html
    assert not Campaign.objects.exists()
    assert VantagePoint.objects.filter(name="local").count() == 0  # no row made to preview


def test_preview_over_the_cap_shows_the_refusal(client: Client, settings: Settings) -> None:
    settings.FEDPROBE_MAX_MATRIX = 3
    login(client, "operator")
    html = client.post("/campaigns/new/", form_data(preview="1")).content.decode()
    assert '<strong class="preview-runs">4</strong>' in html
    assert "Refused: 4 runs exceed the limit of 3 per launch" in html
    assert not Campaign.objects.exists()


def test_preview_of_an_edit_counts_the_form_not_the_saved_campaign(client: Client) -> None:
    operator = login(client, "operator")
    campaign = CampaignFactory(owner=operator, endpoints=[TestFileFactory().endpoint])
    vantage_points = [VantagePointFactory(name="a"), VantagePointFactory(name="b")]
    data = form_data(
        endpoint=campaign.endpoints.get(),
        vantage_points=[vp.pk for vp in vantage_points],
        clients="1",
        preview="1",
    )
    html = client.post(f"/campaigns/{campaign.pk}/edit/", data).content.decode()
    assert '<strong class="preview-runs">4</strong>' in html  # 2 vantage points x 2 sizes
    campaign.refresh_from_db()
    assert campaign.clients == [2]
    assert [vp.name for vp in campaign.vantage_points.all()] == ["local"]


# -- editing someone else's campaign ---------------------------------------------------------


def test_only_the_owner_or_an_admin_edits_an_owned_campaign(client: Client) -> None:
    owner = User.objects.create_user("owner")
    user_set_role(user=owner, role="operator")
    campaign = CampaignFactory(owner=owner, name="theirs", endpoints=[TestFileFactory().endpoint])
    login(client, "operator", "other")
    assert client.get(f"/campaigns/{campaign.pk}/edit/").status_code == 403
    data = form_data(endpoint=campaign.endpoints.get(), name="mine")
    assert client.post(f"/campaigns/{campaign.pk}/edit/", data).status_code == 403
    detail = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert f"/campaigns/{campaign.pk}/edit/" not in detail
    assert f"/campaigns/{campaign.pk}/launch/" in detail
    login(client, "admin")
    assert client.post(f"/campaigns/{campaign.pk}/edit/", data).status_code == 302
    assert Campaign.objects.get().name == "mine"


# -- launch and clone ------------------------------------------------------------------------


def test_launch_queues_the_runs_and_goes_to_them(
    client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    campaign = CampaignFactory(endpoints=[TestFileFactory().endpoint], clients=[1, 2, 4])
    login(client, "operator")
    with django_capture_on_commit_callbacks() as enqueued:
        response = client.post(f"/campaigns/{campaign.pk}/launch/", follow=True)
    assert response.redirect_chain == [(f"/runs/?campaign={campaign.pk}", 302)]
    assert Run.objects.filter(campaign=campaign, trigger="manual").count() == 3
    assert len(enqueued) == 1
    assert "3 runs queued" in response.content.decode()


def test_launch_over_the_cap_says_why_and_creates_nothing(
    client: Client, settings: Settings
) -> None:
    settings.FEDPROBE_MAX_MATRIX = 2
    campaign = CampaignFactory(endpoints=[TestFileFactory().endpoint], clients=[1, 2, 4])
    login(client, "operator")
    response = client.post(f"/campaigns/{campaign.pk}/launch/", follow=True)
    assert response.redirect_chain == [(f"/campaigns/{campaign.pk}/", 302)]
    assert "Not launched: matrix: 3 runs exceed the limit of 2" in response.content.decode()
    assert not Run.objects.exists()


def test_clone_makes_a_copy_owned_by_the_user_and_opens_its_form(client: Client) -> None:
    campaign = CampaignFactory(name="original", endpoints=[TestFileFactory().endpoint])
    bob = login(client, "operator", "bob")
    response = client.post(f"/campaigns/{campaign.pk}/clone/")
    copy = Campaign.objects.exclude(pk=campaign.pk).get()
    assert response.status_code == 302
    assert response["Location"] == f"/campaigns/{copy.pk}/edit/"
    assert (copy.name, copy.owner) == ("original (copy)", bob)
    assert client.get(response["Location"]).status_code == 200


def test_get_on_an_action_is_not_allowed(client: Client) -> None:
    campaign = CampaignFactory(endpoints=[TestFileFactory().endpoint])
    login(client, "operator")
    assert client.get(f"/campaigns/{campaign.pk}/launch/").status_code == 405
    assert not Run.objects.exists()


# -- the detail --------------------------------------------------------------------------------


def test_the_detail_shows_parameters_matrix_and_runs(client: Client) -> None:
    test_file = TestFileFactory(size=16 * MiB)
    campaign = CampaignFactory(
        endpoints=[test_file.endpoint], read_sizes=[4096, MiB], clients=[2], fractions=[0.5]
    )
    RunFactory(campaign=campaign, test_file=test_file, status="succeeded")
    login(client, "operator")
    html = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "<dd>4 KiB, 1 MiB</dd>" in html
    assert '<strong class="preview-runs">2</strong>' in html
    assert "32 MiB" in html  # 2 runs x 2 clients x 8 MiB
    assert test_file.url in html
    assert f'href="/runs/?campaign={campaign.pk}"' in html
    assert "1 succeeded" in html
    assert "Launch 2 runs" in html
