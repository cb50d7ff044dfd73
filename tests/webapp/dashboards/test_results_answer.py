"""The answer at the top of the results page: which questions a campaign asks, and the open
time of each door in words (the advice's statements are tested in tests/webapp/advice and,
on the lab, by tests/browser/test_example_campaigns.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.webapp.advice.test_advice_selectors import MIB, modelled_runs
from tests.webapp.dashboards.test_results_views import page_client, results_url
from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    RunFactory,
    TestFileFactory,
    VantagePointFactory,
)
from webapp.campaigns.models import Campaign, Run
from webapp.dashboards.selectors.results_answer import (
    campaign_questions,
    doors_answer,
    results_answer,
)
from webapp.sites.models import Endpoint

pytestmark = pytest.mark.django_db


def test_a_campaign_asks_the_questions_of_what_it_measures() -> None:
    data, cache = Endpoint(role="data"), Endpoint(role="cache")
    plain = Campaign(methods=["direct"], patterns=["random"], clients=[1], readahead=0)
    assert campaign_questions(plain, [data]) == []
    assert campaign_questions(plain, [data, cache]) == ["cache"]
    every = Campaign(
        methods=["direct", "copy"], patterns=["random", "vector"], clients=[1, 8], readahead=65536
    )
    assert campaign_questions(every, [Endpoint(role="redirector")]) == [
        "crossover",
        "knee",
        "latency-hiding",
        "read-ahead",
        "redirector",
    ]


def cell(endpoint: Endpoint, open_s: float | None, runs: int = 1) -> dict[str, Any]:
    return {"endpoint": endpoint.pk, "open_s": open_s, "runs": runs}


def test_the_doors_answer_says_each_doors_open_time_cheapest_first() -> None:
    plain = EndpointFactory(name="near-root", protocol="root")
    token = EndpointFactory(name="near-roots", protocol="roots", credential_kind="oauth-client")
    doors = {e.pk: e for e in (plain, token)}
    campaign = CampaignFactory(endpoints=[plain, token])
    cells = [cell(token, 0.030), cell(token, 0.050, runs=2), cell(plain, 0.004), cell(plain, None)]
    line = doors_answer(cells=cells, endpoints=doors, campaign=campaign)
    assert line is not None and line.runs == 4  # the runs of the cells with an open time
    assert line.text == (
        "Opening a file costs 4 ms at near-root and 40 ms at near-roots, 36 ms more. Per door: "
        "near-root (root, anonymous) 4 ms, near-roots (roots, a token) 40 ms."
    )
    assert doors_answer(cells=cells[:2], endpoints=doors, campaign=campaign) is None


def test_a_campaign_asking_no_question_says_so_above_its_charts() -> None:
    campaign = CampaignFactory(methods=["direct"], clients=[1])
    RunFactory(campaign=campaign, status=Run.Status.SUCCEEDED, wall_s=1.0, open_s=0.01)
    client = page_client("viewer")
    page = client.get(results_url(campaign)).content.decode()
    answer_url = f"{results_url(campaign)}answer/"
    assert f'data-url="{answer_url}"' in page  # the page's script fetches its answer
    html = client.get(answer_url).content.decode()
    assert "This campaign asks none of the papers' questions" in html
    assert 'class="answer-line' not in html


def test_where_the_model_disagrees_the_answer_and_the_endpoint_page_mark_it() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    # Direct reads four times as slow as the model of their link says: the runs' crossover
    # is far below the model's.
    modelled_runs(test_file, local, read_size=1024, slower=4.0)
    campaign = CampaignFactory(
        methods=["direct", "copy"], endpoints=[test_file.endpoint], vantage_points=[local]
    )
    Run.objects.update(campaign=campaign)
    client = page_client("viewer")
    answer = client.get(reverse("dashboards:campaign-results-answer", args=[campaign.pk]))
    assert 'class="badge status-partial model-disagrees"' in answer.content.decode()
    page = client.get(reverse("sites:endpoint-detail", args=[test_file.endpoint.pk]))
    assert 'class="badge status-partial model-disagrees"' in page.content.decode()
    # The same runs as the model says: no mark.
    Run.objects.all().delete()
    modelled_runs(test_file, local, read_size=1024)
    Run.objects.update(campaign=campaign)
    answer = client.get(reverse("dashboards:campaign-results-answer", args=[campaign.pk]))
    assert "model-disagrees" not in answer.content.decode()
    assert "The model predicts" in answer.content.decode()


def test_a_campaign_beyond_reads_asks_of_what_it_measures_and_its_operations_knee() -> None:
    data = Endpoint(role="data")
    copies = Campaign(operations=["tpc-pull", "tpc-push"], clients=[1], address_family="6")
    assert campaign_questions(copies, [data]) == ["tpc-direction", "address-family"]
    endpoint = EndpointFactory(scratch_path="/scratch/fedprobe")
    test_file = TestFileFactory(endpoint=endpoint, size=MIB)
    local = VantagePointFactory()
    sweep = CampaignFactory(endpoints=[endpoint], operations=["write"], clients=[1, 2, 4])
    sweep.vantage_points.set([local])
    for clients in (1, 2, 4):
        RunFactory(
            campaign=sweep,
            test_file=test_file,
            vantage_point=local,
            status=Run.Status.SUCCEEDED,
            operation="write",
            clients=clients,
            wall_s=1.0,
            throughput_mbps=min(10.0 * clients, 20.0),
        )
    lines = results_answer(campaign=sweep, cells=[])
    # The knee of its writes; not a reads' knee, too thin, which it never asked.
    assert [(line.question, line.verdict) for line in lines] == [("knee", "knee")]
    assert lines[0].text.startswith("Writes stop scaling at 2 clients")


def test_a_campaign_pinned_to_one_family_is_answered_from_the_other_familys_runs() -> None:
    test_file = TestFileFactory(size=MIB)
    local = VantagePointFactory()
    over6 = CampaignFactory(endpoints=[test_file.endpoint], address_family="6", clients=[1])
    over6.vantage_points.set([local])
    for family, walls in (("4", (1.0, 1.1)), ("6", (2.0, 2.1))):
        for repetition, wall in enumerate(walls):
            RunFactory(
                campaign=over6 if family == "6" else CampaignFactory(),
                test_file=test_file,
                vantage_point=local,
                status=Run.Status.SUCCEEDED,
                address_family=family,
                repetition=repetition,
                clients=1,
                wall_s=wall,
                result={"address_family": family},
            )
    [line] = results_answer(campaign=over6, cells=[])
    assert (line.question, line.verdict) == ("address-family", "ipv6-slower")
    assert line.from_all_runs and line.runs == 4
