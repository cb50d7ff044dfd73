"""Lab endpoints are named as the lab names them (`far-root`, as `lab status` lists them),
in sites named `lab-far`; migration sites.0006 renames the `lab-far-root` of older versions,
keeping their runs (issue 11)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps as current_apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from webapp.demo.services import lab_register
from webapp.sites.models import Endpoint

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("sites", "0005_worker_heartbeat")]


def migrate(target: list[tuple[str, str]] | None = None) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(target or executor.loader.graph.leaf_nodes())


@pytest.fixture
def older_version() -> Iterator[Any]:
    """The database as the version before left it; yields that version's models."""
    migrate(BEFORE)
    try:
        yield MigrationExecutor(connection).loader.project_state(BEFORE).apps
    finally:
        migrate()


def test_the_lab_endpoints_carry_the_labs_names(lab: Any) -> None:
    lab_register(lab=lab)
    names = set(Endpoint.objects.filter(site__tier="lab").values_list("name", flat=True))
    assert names == {endpoint.name for endpoint in lab.endpoints()}
    far = Endpoint.objects.get(name="far-root")
    assert far.site.name == "lab-far"


def test_the_migration_renames_older_lab_endpoints_and_leaves_the_rest(
    older_version: Any,
) -> None:
    Site = older_version.get_model("sites", "Site")
    OldEndpoint = older_version.get_model("sites", "Endpoint")
    lab_site = Site.objects.create(name="lab-far", tier="lab")
    real_site = Site.objects.create(name="CERN", tier="T0")
    for name, site in (
        ("lab-far-root", lab_site),
        ("lab-far-http", lab_site),
        ("far-http", lab_site),  # the new name is taken: left as it is
        ("lab-castor", real_site),  # not a lab site: its name is the operator's
    ):
        OldEndpoint.objects.create(
            name=name, site=site, protocol="root", base_url="root://127.0.0.1:1094/"
        )
    migrate()
    assert set(
        current_apps.get_model("sites", "Endpoint").objects.values_list("name", flat=True)
    ) == {
        "far-root",
        "lab-far-http",
        "far-http",
        "lab-castor",
    }
