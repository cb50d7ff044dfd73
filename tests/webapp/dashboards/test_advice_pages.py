"""The advice on the endpoint and site pages, from runs the advice reads: each statement with
its interval, the model beside it, its runs and when they ran, stale when old; too thin, the
campaign that would collect what is missing, created (not launched) by an operator's POST."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from tests.webapp.factories import (
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
    page_for,
    user,
)
from webapp.advice import model
from webapp.advice.model import Link
from webapp.advice.selectors import endpoint_advice
from webapp.campaigns.models import Campaign, Run
from webapp.dashboards.templatetags.advice_format import advice_value
from webapp.sites.models import Endpoint, TestFile, VantagePoint

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024
# The near site of the papers: 26 ms, 100 Mbit/s, a copy tool that takes 50 ms to start.
NEAR = Link(rtt_s=0.026, bandwidth_bps=12.5e6, overhead_s=0.0, copy_setup_s=0.05)


def crossover_runs(test_file: TestFile, vantage_point: VantagePoint, *, days_ago: int) -> None:
    """Direct reads of 1 kB and copies at three fractions, two repetitions each, timed as the
    model says: enough for the crossover (its runs finished `days_ago` days ago)."""
    finished = timezone.now() - timedelta(days=days_ago)
    for fraction in (0.001, 0.01, 0.1):
        for repetition, jitter in enumerate((0.98, 1.02)):
            direct = model.direct_read_s(NEAR, file_size=MIB, read_size=1024, fraction=fraction)
            for method, wall in (("direct", direct), ("copy", model.copy_s(NEAR, file_size=MIB))):
                RunFactory(
                    test_file=test_file,
                    vantage_point=vantage_point,
                    status=Run.Status.SUCCEEDED,
                    finished_at=finished,
                    result={"preflight_rtt_ms": 26.0},
                    method=method,
                    read_size=1024,
                    fraction=fraction,
                    clients=1,
                    repetition=repetition,
                    wall_s=wall * jitter,
                    latency_p50_us=NEAR.read_s(1024) * 1e6 if method == "direct" else None,
                    bytes_read=int(fraction * MIB),
                )


def statement_item(html: str, question: str) -> str:
    """The page's list item of one question's statement."""
    start = html.index(f'data-question="{question}"')
    return html[start : html.index("</li>", start)]


def test_the_endpoint_page_shows_the_crossover_with_interval_model_runs_and_when() -> None:
    test_file = TestFileFactory(size=MIB)
    cern = VantagePointFactory(name="cern")
    crossover_runs(test_file, cern, days_ago=1)
    [crossover] = [s for s in endpoint_advice(test_file.endpoint) if s.question == "crossover"]
    assert crossover.interval is not None and crossover.model_prediction is not None

    html = page_for(user("vera", "viewer")).get(f"/endpoints/{test_file.endpoint_id}/").text

    item = statement_item(html, "crossover")
    assert "Copy the file first when reading more than" in item
    low, high = crossover.interval
    assert f"{low * 100:.2g}% to {high * 100:.2g}%" in item  # the interval, in percent
    assert f'class="advice-prediction">{crossover.model_prediction * 100:.2g}%<' in item
    assert crossover.model_text in item
    for run_pk in crossover.evidence[:6]:
        assert f'href="/runs/{run_pk}/"' in item
    assert f"/runs/?endpoint={test_file.endpoint_id}&amp;vantage_point=cern" in item
    assert f"{crossover.measured_at:%Y-%m-%d %H:%M} UTC" in item
    assert "stale" not in item
    assert "from cern" in html


@override_settings(FEDPROBE_ADVICE_MAX_AGE_DAYS=3)
def test_advice_older_than_the_configured_age_says_it_is_stale() -> None:
    test_file = TestFileFactory(size=MIB)
    crossover_runs(test_file, VantagePointFactory(name="cern"), days_ago=5)

    html = page_for(user("vera", "viewer")).get(f"/endpoints/{test_file.endpoint_id}/").text

    item = statement_item(html, "crossover")
    assert "Last measured more than 3 days ago" in item


def test_too_thin_advice_offers_its_campaign_with_cost_and_a_button_for_operators() -> None:
    test_file = TestFileFactory(size=MIB)
    VantagePointFactory(name="cern")
    operator_html = page_for(user("olga")).get(f"/endpoints/{test_file.endpoint_id}/").text
    viewer_html = page_for(user("vera", "viewer")).get(f"/endpoints/{test_file.endpoint_id}/").text

    [knee] = [s for s in endpoint_advice(test_file.endpoint) if s.question == "knee"]
    suggested = knee.suggested_campaign
    assert suggested is not None
    item = statement_item(operator_html, "knee")
    assert "too thin to advise" in item
    assert f'class="offer-runs">{suggested["runs"]}<' in item
    assert f'class="offer-duration">{suggested["estimated_duration"]}<' in item
    assert 'class="offer-bytes">about ' in item
    assert 'class="offer-clients">1, 2, 4, 8, 16, 32<' in item  # what it would measure
    assert "Create this campaign" in item and "csrfmiddlewaretoken" in item
    viewer_item = statement_item(viewer_html, "knee")
    assert "Create this campaign" not in viewer_item
    assert f'class="offer-runs">{suggested["runs"]}<' in viewer_item
    assert "An operator or admin can create it" in viewer_item
    assert not Campaign.objects.exists()  # showing the offer creates nothing


def offer_post(vantage_point: VantagePoint, /, **fields: Any) -> dict[str, Any]:
    return {"question": "knee", "vantage_point": vantage_point.pk} | fields


def test_the_offer_creates_the_campaign_not_launched_and_opens_its_page() -> None:
    test_file = TestFileFactory(size=MIB)
    cern = VantagePointFactory(name="cern")
    page = page_for(user("olga"))

    url = f"/endpoints/{test_file.endpoint_id}/advice/campaign/"
    response = page.post(url, offer_post(cern))

    campaign = Campaign.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/campaigns/{campaign.pk}/"
    assert campaign.owner.username == "olga"
    assert campaign.clients == [1, 2, 4, 8, 16, 32]
    assert list(campaign.endpoints.all()) == [test_file.endpoint]
    assert list(campaign.vantage_points.all()) == [cern]
    assert not Run.objects.exists()
    landed = page.get(response["Location"]).text
    assert "not launched" in landed and "Launch" in landed
    # The address again from history: the endpoint page's advice, nothing created.
    again = page.get(url)
    assert again["Location"] == f"/endpoints/{test_file.endpoint_id}/#advice"
    assert Campaign.objects.count() == 1


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"question": "weather"}, "Question: "),
        ({"question": "cache"}, "Question: not asked of"),  # a data server, not a cache
        ({"vantage_point": 999999}, "Vantage point: "),
    ],
)
def test_a_bad_offer_names_its_field_and_creates_nothing(
    fields: dict[str, Any], named: str
) -> None:
    test_file = TestFileFactory(size=MIB)
    post = offer_post(VantagePointFactory(name="cern"), **fields)

    url = f"/endpoints/{test_file.endpoint_id}/advice/campaign/"
    response = page_for(user("olga")).post(url, post)

    assert response.status_code == 400
    assert named in response.text
    assert not Campaign.objects.exists()


def test_a_viewer_may_not_create_the_offered_campaign() -> None:
    test_file = TestFileFactory(size=MIB)
    post = offer_post(VantagePointFactory(name="cern"))

    url = f"/endpoints/{test_file.endpoint_id}/advice/campaign/"
    response = page_for(user("vera", "viewer")).post(url, post)

    assert response.status_code == 403
    assert "Creating campaigns needs the operator role: you are a viewer" in response.text
    assert not Campaign.objects.exists()


def test_the_site_page_gives_a_verdict_per_protocol_and_vantage_point() -> None:
    test_file = TestFileFactory(size=MIB)
    site = test_file.endpoint.site
    TestFileFactory(
        endpoint=EndpointFactory(site=site, protocol=Endpoint.Protocol.HTTPS, name="door-https"),
        size=MIB,
    )
    crossover_runs(test_file, VantagePointFactory(name="cern"), days_ago=1)
    crossover_runs(test_file, VantagePointFactory(name="ral"), days_ago=1)

    html = page_for(user("vera", "viewer")).get(f"/sites/{site.pk}/").text

    headings = [line.strip() for line in html.splitlines() if line.strip().startswith("<h3>")]
    advice_headings = [h for h in headings if " · from " in h]
    # Endpoints by name; one never measured is answered from this host's vantage point.
    assert advice_headings == [
        "<h3>https · from local</h3>",
        "<h3>root · from cern</h3>",
        "<h3>root · from ral</h3>",
    ]
    assert html.count("Copy the file first when reading more than") == 2
    assert 'href="/endpoints/' in statement_item(html, "crossover")


@pytest.mark.parametrize(
    ("value", "unit", "written"),
    [
        (0.008, "fraction", "0.8%"),
        (0.25, "fraction", "25%"),
        (16, "clients", "16 clients"),
        (4.0, "x", "4\N{MULTIPLICATION SIGN}"),
        (0.85, "time ratio", "85% of the time"),
        (0.05, "s", "50.0 ms"),
        (None, "s", "—"),
    ],
)
def test_a_statements_value_is_written_in_its_unit(
    value: float | None, unit: str, written: str
) -> None:
    assert advice_value(value, unit) == written


def test_the_endpoint_page_shows_the_knee_of_writes_and_offers_a_write_sweep() -> None:
    endpoint = EndpointFactory(scratch_path="/scratch/fedprobe")
    test_file = TestFileFactory(endpoint=endpoint, size=MIB)
    cern = VantagePointFactory(name="cern")
    for clients in (1, 2):
        RunFactory(
            test_file=test_file,
            vantage_point=cern,
            status=Run.Status.SUCCEEDED,
            operation="write",
            clients=clients,
            wall_s=1.0,
            throughput_mbps=10.0 * clients,
        )
    page = page_for(user("olga"))
    html = page.get(f"/endpoints/{endpoint.pk}/").text

    start = html.index('data-operation="write"')
    item = html[start : html.index("</li>", start)]
    assert "writes of one size at three client counts or more" in item
    assert 'class="offer-operations">write<' in item
    assert '<input type="hidden" name="operation" value="write">' in item
    response = page.post(
        f"/endpoints/{endpoint.pk}/advice/campaign/",
        {"question": "knee", "vantage_point": cern.pk, "operation": "write"},
    )
    assert response.status_code == 302
    assert Campaign.objects.get(name__startswith="Advice: knee of write").operations == ["write"]


def test_the_endpoint_page_shows_which_way_copies_are_faster() -> None:
    source = EndpointFactory(protocol=Endpoint.Protocol.HTTPS, base_url="https://a.example/")
    destination = EndpointFactory(protocol=Endpoint.Protocol.HTTPS, base_url="https://b.example/")
    test_file = TestFileFactory(endpoint=source, size=MIB)
    cern = VantagePointFactory(name="cern")
    for operation, walls in (("tpc-pull", (2.0, 2.2)), ("tpc-push", (1.0, 1.1))):
        for repetition, wall in enumerate(walls):
            RunFactory(
                test_file=test_file,
                vantage_point=cern,
                status=Run.Status.SUCCEEDED,
                finished_at=timezone.now(),
                operation=operation,
                destination_endpoint=destination,
                repetition=repetition,
                clients=1,
                wall_s=wall,
            )
    html = page_for(user("vera", "viewer")).get(f"/endpoints/{source.pk}/").text

    item = statement_item(html, "tpc-direction")
    assert 'data-verdict="push-faster"' in item
    assert ">push faster<" in item
    assert "Let the source push: 1 MiB copies pushed take 50% of the time pulled" in item
    assert "200% of the time" in item  # pull's time over push's, and its interval
