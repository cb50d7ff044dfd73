"""Disabled endpoints are skipped: a launch creates no runs on them, the preview counts none."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from tests.webapp.factories import CampaignFactory, TestFileFactory
from webapp.campaigns.models import Run
from webapp.campaigns.services import campaign_launch, campaign_preview
from webapp.sites.services import endpoint_set_enabled

pytestmark = pytest.mark.django_db


def test_launch_skips_the_cells_of_disabled_endpoints() -> None:
    enabled, disabled = TestFileFactory().endpoint, TestFileFactory().endpoint
    endpoint_set_enabled(endpoint=disabled, enabled=False)
    campaign = CampaignFactory(endpoints=[enabled, disabled], clients=[1, 2])
    assert campaign_preview(campaign=campaign).runs == 2
    runs = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    assert {run.endpoint_id for run in runs} == {enabled.pk}
    assert Run.objects.filter(endpoint=disabled).count() == 0


def test_chosen_test_files_of_a_disabled_endpoint_are_skipped() -> None:
    kept, skipped = TestFileFactory(), TestFileFactory()
    endpoint_set_enabled(endpoint=skipped.endpoint, enabled=False)
    campaign = CampaignFactory(endpoints=[kept.endpoint, skipped.endpoint])
    campaign.test_files.set([kept, skipped])
    runs = campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    assert [run.test_file_id for run in runs] == [kept.pk]


def test_a_campaign_whose_endpoints_are_all_disabled_launches_nothing() -> None:
    endpoint = TestFileFactory().endpoint
    endpoint_set_enabled(endpoint=endpoint, enabled=False)
    campaign = CampaignFactory(endpoints=[endpoint])
    with pytest.raises(ValidationError) as caught:
        campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)
    assert "matrix" in caught.value.message_dict
    assert Run.objects.count() == 0


def test_enabling_it_again_brings_its_cells_back() -> None:
    endpoint = TestFileFactory().endpoint
    endpoint_set_enabled(endpoint=endpoint, enabled=False)
    endpoint_set_enabled(endpoint=endpoint, enabled=True)
    campaign = CampaignFactory(endpoints=[endpoint])
    assert len(campaign_launch(campaign=campaign, trigger=Run.Trigger.MANUAL)) == 1
