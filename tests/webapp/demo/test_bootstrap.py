"""`manage.py bootstrap` makes a fresh installation usable, and is safe to run again."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from webapp.campaigns.models import Campaign
from webapp.demo.management.commands.bootstrap import AUTH_EXAMPLE, EXAMPLE
from webapp.sites.models import Endpoint, VantagePoint

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
    assert set(examples) == {EXAMPLE, AUTH_EXAMPLE}
    assert all(campaign.matrix_size() > 0 for campaign in examples.values())
    doors = examples[AUTH_EXAMPLE].endpoints.all()
    assert {(e.protocol, e.credential_kind) for e in doors} == {
        ("root", "none"),
        ("http", "none"),
        ("roots", "oauth-client"),
        ("https", "oauth-client"),
        ("root", "x509-proxy"),
        ("https", "x509-proxy"),
    }
    assert Endpoint.objects.filter(name="near-root", files__is_default=True).exists()
    assert VantagePoint.objects.filter(name="local").exists()

    again = io.StringIO()
    call_command("bootstrap", stdout=again)
    assert password not in again.getvalue()
    assert User.objects.get(username="admin").check_password(password)
    assert Campaign.objects.count() == 2
