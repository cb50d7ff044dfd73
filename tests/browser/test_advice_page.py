"""The advice in Chromium: the endpoint page's crossover with its interval, the model beside
it and its runs (one opened); the site page's verdicts per protocol and vantage point, and a
too-thin answer's campaign, whose cost is shown before the one click that creates it (not
launched) and lands on its page, which offers to launch as many runs as were announced."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.webapp.dashboards.test_advice_pages import MIB, crossover_runs
from tests.webapp.factories import TestFileFactory, VantagePointFactory
from webapp.campaigns.models import Campaign, Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_advice_on_the_endpoint_and_site_pages_and_its_one_click_campaign(
    browser_page: Callable[..., Any], live_server: Any, screenshot: Callable[..., Any]
) -> None:
    test_file = TestFileFactory(size=MIB, endpoint__name="near-root")
    crossover_runs(test_file, VantagePointFactory(name="cern"), days_ago=1)
    page, watch = browser_page("operator")

    page.goto(f"{live_server.url}/endpoints/{test_file.endpoint_id}/")
    crossover = page.locator("#advice li[data-question=crossover]")
    text = crossover.inner_text()
    assert "Copy the file first when reading more than" in text
    assert re.search(r"95% interval [\d.]+% to [\d.]+%", text)
    assert re.search(r"Model\s+[\d.]+%", text)
    assert "Last measured" in text and "UTC" in text
    screenshot(page, "endpoint-advice")
    first_run = crossover.locator(".advice-evidence a").first
    run_pk = first_run.inner_text()
    first_run.click()
    page.wait_for_url(f"**/runs/{run_pk}/")
    page.go_back()

    page.locator("a", has_text=test_file.endpoint.site.name).first.click()
    page.wait_for_url("**/sites/*/")
    assert page.locator("#advice h3").all_inner_texts() == ["root · from cern"]
    knee = page.locator("#advice li[data-question=knee]")
    assert "too thin to advise" in knee.inner_text()
    offer = knee.locator(".advice-offer")
    runs = int(offer.locator(".offer-runs").inner_text())
    assert runs == 2 * 6  # repetitions x client counts
    assert offer.locator(".offer-bytes").inner_text().startswith("about ")
    assert offer.locator(".offer-duration").inner_text()
    offer.get_by_text("What it measures").click()
    assert offer.locator(".offer-clients").inner_text() == "1, 2, 4, 8, 16, 32"
    screenshot(page, "site-advice")
    offer.get_by_role("button", name="Create this campaign").click()

    page.wait_for_url("**/campaigns/*/")
    campaign = Campaign.objects.get(name__startswith="Advice: knee")
    assert page.url.endswith(f"/campaigns/{campaign.pk}/")
    assert "not launched" in page.locator(".messages").inner_text()
    assert page.get_by_role("button", name=f"Launch {runs} runs").is_enabled()
    assert not Run.objects.filter(campaign=campaign).exists()
    watch.assert_clean()
