"""Configuration as code: campaigns with their sites, endpoints and vantage points exported as
YAML and imported again: byte-identical round trips, idempotent imports, every error at its
line and field with nothing changed, dry runs, selectors, and no credential ever written."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.webapp.factories import (
    CampaignFactory,
    EndpointFactory,
    SiteFactory,
    TestFileFactory,
    VantagePointFactory,
    user,
)
from webapp.campaigns.configuration.export import configuration_export
from webapp.campaigns.configuration.importing import configuration_import
from webapp.campaigns.models import Campaign
from webapp.sites.models import Endpoint, Site, TestFile, VantagePoint

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

SECRET = "opaque-b3arer-s3cret-of-the-endpoint"
MODELS = (Site, Endpoint, TestFile, VantagePoint, Campaign)


@pytest.fixture
def nightly() -> Campaign:
    """A campaign over two sites' endpoints (one with a credential), two vantage points, a
    chosen test file, sizes, a schedule in a zone with a slip."""
    cern, desy = SiteFactory(name="CERN-LAB", location="Geneva"), SiteFactory(name="DESY-LAB")
    root = EndpointFactory(site=cern, name="cern-root", credential_hosts=[".cern.ch"])
    https = EndpointFactory(
        site=desy,
        name="desy-https",
        protocol="https",
        base_url="https://desy.example.org:443/",
        credential_kind="token",
        credential=SECRET,
    )
    chosen = TestFileFactory(endpoint=root, path="/data/file-1G", size=2**30, adler32="0a1b2c3d")
    TestFileFactory(endpoint=root, path="/data/file-16M", is_default=False)
    TestFileFactory(endpoint=https, path="/data/f", size=1000)
    remote = VantagePointFactory(name="cern-vp", location="Geneva", max_parallel_runs=4)
    campaign = CampaignFactory(
        name="nightly",
        description="Reads at CERN and DESY, «every» night",
        endpoints=[root, https],
        vantage_points=[VantagePointFactory(), remote],
        methods=["direct", "copy"],
        patterns=["sequential", "random"],
        read_sizes=[65536, 1048576, 1000],
        fractions=[0.25, 1.0],
        clients=[1, 4],
        readahead=1048576,
        deadline_s=600,
        schedule="30 2 * * *",
        schedule_tz="Europe/Zurich",
        schedule_slip_s=300,
    )
    campaign.test_files.set([chosen, https.files.get()])
    return campaign


def _counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


def _forget_everything() -> None:
    Campaign.objects.all().delete()
    Site.objects.all().delete()  # their endpoints and test files with them
    VantagePoint.objects.all().delete()


def test_export_then_import_into_an_empty_database_then_export_gives_the_same_bytes(
    nightly: Campaign,
) -> None:
    first = configuration_export(campaigns=[nightly])
    _forget_everything()
    assert sum(_counts().values()) == 0
    outcome = configuration_import(text=first, as_user=None, dry_run=False)
    assert outcome.errors == []
    assert outcome.applied
    assert outcome.counts() == {"create": 10, "update": 0, "unchanged": 0}
    assert configuration_export(campaigns=Campaign.objects.all()) == first
    assert configuration_export() == first  # nothing else is in the database
    imported = Campaign.objects.get()
    assert imported.matrix_size() == 2 * 2 * 2 * 2 * 3 * 2 * 2  # files x vps x axes
    assert imported.owner is None  # the command line's: an admin's


def test_an_import_of_the_same_file_again_changes_nothing(nightly: Campaign) -> None:
    text = configuration_export(campaigns=[nightly])
    first = configuration_import(text=text, as_user=None, dry_run=False)
    assert {step.action for step in first.plan} == {"unchanged"}
    updated_at = Campaign.objects.get().updated_at
    second = configuration_import(text=text, as_user=None, dry_run=False)
    assert [step.text() for step in second.plan] == [step.text() for step in first.plan]
    assert len(second.plan) == 10
    assert Campaign.objects.get().updated_at == updated_at


def test_an_import_updates_what_changed_and_names_the_fields(nightly: Campaign) -> None:
    text = configuration_export(campaigns=[nightly])
    changed = text.replace("- 4\n", "- 8\n").replace("30 2 * * *", "0 3 * * *")
    outcome = configuration_import(text=changed, as_user=None, dry_run=False)
    updates = [step.text() for step in outcome.plan if step.action != "unchanged"]
    assert updates == ["update campaign nightly (clients, schedule)"]
    campaign = Campaign.objects.get()
    assert (campaign.clients, campaign.schedule) == ([1, 8], "0 3 * * *")


BROKEN = textwrap.dedent(
    """\
    version: 1
    vantage_points:
    - name: far-away
      max_parallel_runs: 99
    sites:
    - name: LAB
      endpoints:
      - name: lab-root
        protocol: root
        base_url: root://127.0.0.1:1094/
        test_files:
        - path: /data/f
          size: 1024
    campaigns:
    - name: broken
      endpoints: [lab-root]
      parameters:
        methods: [direct]
        patterns: [random]
        read_sizes: [64k, huge]
        fractions: [1]
        clients: [1]
        colour: blue
    """
)


def test_every_error_is_named_by_line_and_field_and_nothing_changes(nightly: Campaign) -> None:
    before = _counts()
    outcome = configuration_import(text=BROKEN, as_user=None, dry_run=False)
    assert not outcome.applied
    assert [error.text("broken.yaml") for error in outcome.errors] == [
        "broken.yaml:4: vantage_points[0].max_parallel_runs: "
        "Ensure this value is less than or equal to 32.",
        "broken.yaml:20: campaigns[0].parameters.read_sizes[1]: "
        "'huge' is not a size (examples: 4096, 4k, 1M, 1G)",
        "broken.yaml:23: campaigns[0].parameters.colour: unknown field (known: operations, "
        "methods, patterns, read_sizes, fractions, clients, files, depth, vector_size, skip, "
        "readahead, streams, file_size, ops_per_client, rate, address_family, replay_timing, "
        "repetitions, deadline_s)",
    ]
    assert _counts() == before
    assert not Site.objects.filter(name="LAB").exists()


def test_a_dry_run_shows_the_plan_and_changes_nothing(nightly: Campaign) -> None:
    text = configuration_export(campaigns=[nightly]).replace("nightly", "weekly")
    before = _counts()
    outcome = configuration_import(text=text, as_user=None, dry_run=True)
    assert outcome.errors == []
    assert not outcome.applied
    assert [step.text() for step in outcome.plan if step.action != "unchanged"] == [
        "create campaign weekly"
    ]
    assert _counts() == before
    assert not Campaign.objects.filter(name="weekly").exists()


def test_a_selector_picks_the_enabled_endpoints_and_the_export_names_them(
    nightly: Campaign,
) -> None:
    EndpointFactory(site=Site.objects.get(name="CERN-LAB"), name="cern-off", enabled=False)
    text = textwrap.dedent(
        """\
        version: 1
        campaigns:
        - name: by-site
          endpoints:
          - {site: CERN-LAB, protocol: root}
          - {site: NOWHERE}
          parameters: {methods: [direct], patterns: [random], read_sizes: [1M], fractions: [1],
                       clients: [1]}
        """
    )
    refused = configuration_import(text=text, as_user=None, dry_run=False)
    assert [error.text("f") for error in refused.errors] == [
        "f:6: campaigns[0].endpoints[1]: selects no enabled endpoint (site NOWHERE)"
    ]
    outcome = configuration_import(
        text=text.replace("  - {site: NOWHERE}\n", ""), as_user=None, dry_run=False
    )
    assert outcome.errors == []
    campaign = Campaign.objects.get(name="by-site")
    assert [endpoint.name for endpoint in campaign.endpoints.all()] == ["cern-root"]
    # Said otherwise than export says it (a selector, defaults left out): still unchanged.
    again = configuration_import(
        text=text.replace("  - {site: NOWHERE}\n", ""), as_user=None, dry_run=False
    )
    assert [step.text() for step in again.plan] == ["unchanged campaign by-site"]
    assert "  endpoints:\n  - cern-root\n" in configuration_export(campaigns=[campaign])


def test_no_credential_is_exported_and_an_import_keeps_the_stored_one(nightly: Campaign) -> None:
    text = configuration_export()
    assert SECRET not in text
    assert "credential_kind" not in text and "token" not in text
    outcome = configuration_import(
        text=text.replace("https://desy.example.org:443/", "https://desy2.example.org:443/"),
        as_user=None,
        dry_run=False,
    )
    assert outcome.errors == []
    endpoint = Endpoint.objects.get(name="desy-https")
    assert (endpoint.base_url, endpoint.credential_kind) == (
        "https://desy2.example.org:443/",
        "token",
    )
    assert endpoint.credential == SECRET


def test_the_command_prints_the_plan_or_each_error_and_exits_nonzero(
    nightly: Campaign, tmp_path: object
) -> None:
    out = io.StringIO()
    call_command("campaigns", "export", "nightly", stdout=out)
    exported = out.getvalue()
    assert exported == configuration_export(campaigns=[nightly])
    path = f"{tmp_path}/broken.yaml"
    with open(path, "w", encoding="utf-8") as file:
        file.write(BROKEN)
    err = io.StringIO()
    with pytest.raises(CommandError, match="3 errors: nothing changed"):
        call_command("campaigns", "import", path, stdout=io.StringIO(), stderr=err)
    assert f"{path}:20: campaigns[0].parameters.read_sizes[1]: 'huge'" in err.getvalue()
    with open(path, "w", encoding="utf-8") as file:
        file.write(exported)
    out = io.StringIO()
    call_command("campaigns", "import", path, "--dry-run", stdout=out)
    assert out.getvalue().endswith("dry run, nothing changed: 0 create, 0 update, 10 unchanged\n")


def test_yaml_that_does_not_parse_is_reported_at_its_line() -> None:
    outcome = configuration_import(
        text="version: 1\nsites:\n- name: [x\n", as_user=None, dry_run=False
    )
    assert [(error.line, error.message.split(":")[0]) for error in outcome.errors] == [
        (4, "not valid YAML")
    ]
    wrong = configuration_import(text="version: 2\n", as_user=None, dry_run=True)
    assert [error.text("f") for error in wrong.errors] == [
        "f:1: version: unknown version 2: this fedprobe reads version 1"
    ]


def test_the_command_imports_with_a_users_rights_when_asked(nightly: Campaign) -> None:
    user("vera", role="viewer")
    plain = CampaignFactory(name="plain", endpoints=[Endpoint.objects.get(name="cern-root")])
    text = configuration_export(campaigns=[plain]).replace("name: plain", "name: weekly")
    outcome = configuration_import(text=text, as_user=None, dry_run=True)
    assert outcome.errors == []
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 errors: nothing changed"):
        call_command(
            "campaigns",
            "import",
            "-",
            "--as",
            "vera",
            stdin=io.StringIO(text),
            stderr=err,
            stdout=io.StringIO(),
        )
    assert "campaign weekly: creating campaigns needs the operator role" in err.getvalue()


def test_test_files_are_imported_as_written_without_asking_their_server(
    tmp_path: Path, settings: Any
) -> None:
    """The file states the size and adler32 wanted: an import asks no server (a federation's
    files would each wait on theirs inside the transaction), so a blank adler32 stays blank
    and the round trip holds, although this endpoint's server would answer otherwise."""
    (tmp_path / "f").write_bytes(b"fedprobe" * 100)
    settings.FEDPROBE_FILE_ROOTS = [str(tmp_path)]
    local = EndpointFactory(
        site=SiteFactory(name="LOCAL"),
        name="local-file",
        protocol="file",
        base_url=f"file://{tmp_path}",
    )
    TestFileFactory(endpoint=local, path="/f", size=4096, adler32="")
    campaign = CampaignFactory(name="local", endpoints=[local])
    first = configuration_export(campaigns=[campaign])
    _forget_everything()
    outcome = configuration_import(text=first, as_user=None, dry_run=False)
    assert outcome.errors == []
    stored = TestFile.objects.get()
    assert (stored.size, stored.adler32) == (4096, "")
    assert configuration_export(campaigns=Campaign.objects.all()) == first
