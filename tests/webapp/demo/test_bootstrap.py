"""`manage.py bootstrap` makes a fresh installation usable, and is safe to run again."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from tests.webapp.factories import CampaignFactory, RunFactory
from webapp.campaigns.models import Campaign
from webapp.campaigns.traces import Trace
from webapp.demo.examples import EXAMPLES, FORMER_EXAMPLES
from webapp.sites.models import Endpoint, VantagePoint
from workers.lab.files import MiB

pytestmark = pytest.mark.django_db


def test_bootstrap_registers_the_lab_an_admin_and_the_example_campaigns(
    lab: Any, settings: Any, tmp_path: Any
) -> None:
    settings.FEDPROBE_LAB_DIR = lab.state_dir
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("bootstrap", stdout=out)
    password = (tmp_path / "admin-password").read_text().strip()
    assert password in out.getvalue()
    assert (tmp_path / "admin-password").stat().st_mode & 0o077 == 0
    assert User.objects.get(username="admin").check_password(password)
    examples = {c.name: c for c in Campaign.objects.all()}
    assert set(examples) == {example.name for example in EXAMPLES}
    assert all(campaign.matrix_size() > 0 for campaign in examples.values())
    # Each says what it answers and how many runs it takes, not a placeholder.
    for campaign in examples.values():
        assert f"{campaign.matrix_size()} runs" in campaign.description, campaign.name
        assert "question on the lab: ..." not in campaign.description
        # A small file both labs hold, never the endpoint's default (256 MiB on bin/run's).
        assert {f.size for f in campaign.test_files.all()} <= {1 * MiB, 16 * MiB}
        assert campaign.test_files.count() == campaign.endpoints.count()
    doors = examples["Lab example: what TLS and each authentication cost per door"].endpoints.all()
    assert {(e.protocol, e.credential_kind) for e in doors} == {
        ("root", "none"),
        ("http", "none"),
        ("roots", "oauth-client"),
        ("https", "oauth-client"),
        ("root", "x509-proxy"),
        ("https", "x509-proxy"),
    }
    # Issue 20's operations: a write, a metadata storm, a copy between two token doors and a
    # replay of the recorded job it uploads (tests/webapp/demo/test_example_operations.py
    # launches them).
    by_operations = {tuple(c.operations): c for c in examples.values()}
    assert by_operations[("write",)].file_size == 4 * MiB
    copy = by_operations[("tpc-pull", "tpc-push")]
    assert copy.destination_endpoint == Endpoint.objects.get(name="far-https")
    replay = by_operations[("replay",)]
    assert replay.trace is not None and replay.trace.files == [
        "/fedprobe/file-16M",
        "/fedprobe/file-1M",
    ]
    assert Endpoint.objects.filter(name="near-root", files__is_default=True).exists()
    assert VantagePoint.objects.filter(name="local").exists()

    again = io.StringIO()
    call_command("bootstrap", stdout=again)
    assert password not in again.getvalue()
    assert User.objects.get(username="admin").check_password(password)
    assert Campaign.objects.count() == len(EXAMPLES)
    assert Trace.objects.count() == 1


def test_bootstrap_replaces_former_examples_never_launched_and_keeps_launched_ones(
    lab: Any, settings: Any, tmp_path: Any
) -> None:
    """An installation from before issue 19 has the two former examples: one nobody launched
    goes (the new examples answer its question), one with runs stays with its results."""
    settings.FEDPROBE_LAB_DIR = lab.state_dir
    settings.VAR_DIR = tmp_path
    unlaunched, launched = (CampaignFactory(name=name) for name in FORMER_EXAMPLES)
    RunFactory(campaign=launched)
    out = io.StringIO()
    call_command("bootstrap", stdout=out)
    names = set(Campaign.objects.values_list("name", flat=True))
    assert names == {launched.name, *(example.name for example in EXAMPLES)}
    assert f"removed the former example campaign {unlaunched.name!r}" in out.getvalue()
    assert launched.runs.count() == 1
