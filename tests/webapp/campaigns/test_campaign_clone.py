"""Cloning a campaign: the same experiment under a new name and owner, with nothing launched."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.webapp.factories import CampaignFactory, RunFactory, TestFileFactory
from webapp.campaigns.models import Campaign
from webapp.campaigns.services import campaign_clone

pytestmark = pytest.mark.django_db


def test_a_clone_has_the_same_matrix_a_new_owner_no_runs_and_no_schedule() -> None:
    test_file = TestFileFactory()
    original = CampaignFactory(
        endpoints=[test_file.endpoint], schedule="0 2 * * *", clients=[1, 4], depth=16
    )
    original.test_files.set([test_file])
    RunFactory(campaign=original, test_file=test_file)
    bob = User.objects.create_user("bob")
    copy = campaign_clone(campaign=original, owner=bob)
    assert copy.pk != original.pk
    assert (copy.name, copy.owner, copy.schedule) == (f"{original.name} (copy)", bob, "")
    assert list(copy.endpoints.all()) == [test_file.endpoint]
    assert list(copy.test_files.all()) == [test_file]
    assert list(copy.vantage_points.all()) == list(original.vantage_points.all())
    assert (copy.clients, copy.depth) == ([1, 4], 16)
    assert copy.matrix_size() == original.matrix_size() == 2
    assert not copy.runs.exists()
    assert Campaign.objects.get(pk=original.pk).schedule == "0 2 * * *"


def test_the_clone_of_a_long_name_still_fits() -> None:
    original = CampaignFactory(name="x" * 200)
    copy = campaign_clone(campaign=original, owner=User.objects.create_user("bob"))
    assert copy.name == "x" * 193 + " (copy)"


def test_a_run_reads_its_test_file_first_then_the_endpoints_others_by_path() -> None:
    first = TestFileFactory(path="/data/b")
    for path in ("/data/c", "/data/a"):
        TestFileFactory(endpoint=first.endpoint, path=path)
    assert [f.path for f in RunFactory(test_file=first, files=2).files_to_read()] == [
        "/data/b",
        "/data/a",
    ]
    assert RunFactory(test_file=first, files=1).files_to_read() == [first]
