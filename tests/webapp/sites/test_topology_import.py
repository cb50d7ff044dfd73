"""`manage.py topology import gocdb|cric`: GOCDB's get_site and get_service_endpoint XML and
CRIC's storage services JSON (fixtures in their real shape, tests/webapp/sites/fixtures), a
plan printed first, one transaction, nothing made here ever changed (docs/topology.md)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.webapp.factories import EndpointFactory, SiteFactory, proxy_pem
from tests.webapp.sites.registry_server import FIXTURES, Registry, registry  # noqa: F401
from webapp.sites.models import Endpoint, Site
from webapp.sites.registry_formats import (
    RegistryRefused,
    cric_topology,
    gocdb_root,
    gocdb_topology,
)

pytestmark = [pytest.mark.django_db]

SITES = str(FIXTURES / "gocdb_get_site.xml")
SERVICES = str(FIXTURES / "gocdb_get_service_endpoint.xml")
CRIC = str(FIXTURES / "cric_storage_services.json")
XROOTD = "LAB-GOCDB-XRootD-xrootd.lab.example.org"
WEBDAV = "LAB-GOCDB-webdav-webdav.lab.example.org"
GRIDFTP = "LAB-GOCDB-globus-GRIDFTP-gridftp.lab.example.org"


def topology(*args: str) -> str:
    output = StringIO()
    call_command("topology", "import", *args, stdout=output)
    return output.getvalue()


def rows() -> list[tuple[object, ...]]:
    """Everything an import may change, to compare before and after."""
    sites = list(Site.objects.order_by("name").values_list())
    endpoints = list(Endpoint.objects.order_by("name").values_list())
    return sites + endpoints


def edited(tmp_path: Path, source: str, *replacements: tuple[str, str]) -> str:
    text = Path(source).read_text()
    for old, new in replacements:
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / Path(source).name
    path.write_text(text)
    return str(path)


def test_gocdb_answers_give_sites_doors_and_what_is_skipped() -> None:
    roots = [gocdb_root(Path(p).read_bytes(), source=p) for p in (SITES, SERVICES)]
    read = gocdb_topology(roots)
    lab = read.sites["LAB-GOCDB"]
    assert (lab.tier, lab.location) == ("T2", "Switzerland")
    doors = {door.name: door for door in read.doors}
    assert doors[XROOTD].base_url == "root://xrootd.lab.example.org:1094/"
    assert doors[f"{WEBDAV}-atlas-davs"].external_id == "2202G0/31"
    assert doors[f"{WEBDAV}-atlas-davs"].protocol == "davs"
    assert not doors[GRIDFTP].in_production
    assert {door.door_auth for door in read.doors} == {"x509"}
    assert sorted(s.record.split(" (")[0] for s in read.skipped) == [
        "SERVICE_ENDPOINT 2204G0",  # SRM
        "SERVICE_ENDPOINT 2205G0",  # a compute element
    ]


def test_cric_storage_services_give_doors_with_their_paths_and_token_support() -> None:
    read = cric_topology(Path(CRIC).read_bytes(), source=CRIC)
    assert read.sites["LAB-CRIC"].storage_system == "dCache"
    doors = {door.external_id: door for door in read.doors}
    assert (
        doors["6601"].base_url == "root://xrootd.cric.example.org:1094/pnfs/cric.example.org/data"
    )
    assert (doors["6601"].door_auth, doors["6602"].door_auth) == ("x509", "x509+token")
    assert not doors["6603"].in_production  # state DISABLED
    assert "6604" not in doors and "SRM" in read.skipped[0].why


@pytest.mark.sqlite
def test_import_prints_its_plan_applies_it_and_leaves_a_site_made_here_alone() -> None:
    mine = SiteFactory(name="HAND-MADE", tier="T3", location="Frankfurt", storage_system="dCache")
    mine_before = Site.objects.filter(pk=mine.pk).values_list().get()
    output = topology("gocdb", SITES, SERVICES)
    assert "create    site LAB-GOCDB (tier T2, location Switzerland)" in output
    assert "keep      site HAND-MADE: made here, not changed; its doors not imported" in output
    assert f"create    endpoint {XROOTD} root://xrootd.lab.example.org:1094/" in output
    assert "skip      SERVICE_ENDPOINT 2204G0 (SRM on srm.lab.example.org)" in output
    assert output.rstrip().endswith("applied")
    assert Site.objects.filter(pk=mine.pk).values_list().get() == mine_before
    assert not mine.endpoints.exists()
    lab = Site.objects.get(name="LAB-GOCDB")
    assert (lab.source, lab.external_id, lab.tier) == ("gocdb", "LAB-GOCDB", "T2")
    imported = {e.name: e for e in lab.endpoints.all()}
    assert sorted(imported) == sorted([XROOTD, WEBDAV, f"{WEBDAV}-atlas-davs", GRIDFTP])
    assert not imported[GRIDFTP].enabled and imported[XROOTD].enabled
    assert imported[XROOTD].credential_kind == "none"  # the door's kind, never a credential
    assert imported[XROOTD].door_auth == "x509"

    before = rows()
    again = topology("gocdb", SITES, SERVICES)
    assert "plan: 5 unchanged, 1 keep, 2 skip" in again
    assert again.rstrip().endswith("nothing to change")
    assert rows() == before


def test_a_changed_registry_updates_its_rows_and_disables_a_door_that_is_gone(
    tmp_path: Path,
) -> None:
    topology("gocdb", SITES, SERVICES)
    lab = Site.objects.get(name="LAB-GOCDB")
    typed = EndpointFactory(site=lab, name="typed-here", base_url="root://typed.example.org/")
    services = Path(SERVICES).read_text()
    webdav_start = services.index('<SERVICE_ENDPOINT PRIMARY_KEY="2202G0">')
    webdav_end = services.index("</SERVICE_ENDPOINT>", webdav_start) + len("</SERVICE_ENDPOINT>")
    services = services[:webdav_start] + services[webdav_end:]  # the webdav service is gone
    services = services.replace(
        "root://xrootd.lab.example.org:1094/", "roots://xrootd.lab.example.org:1095/"
    )
    (tmp_path / "services.xml").write_text(services)
    sites = edited(tmp_path, SITES, ("<TIER>2</TIER>", "<TIER>1</TIER>"))

    output = topology("gocdb", sites, str(tmp_path / "services.xml"))
    assert "update    site LAB-GOCDB: tier 'T2' -> 'T1'" in output
    assert (
        f"update    endpoint {XROOTD}: protocol 'root' -> 'roots', base_url "
        "'root://xrootd.lab.example.org:1094/' -> 'roots://xrootd.lab.example.org:1095/'"
    ) in output
    assert f"disable   endpoint {WEBDAV}: no longer in gocdb (kept, with its runs)" in output
    endpoints = {e.name: e for e in Endpoint.objects.all()}
    assert endpoints[XROOTD].base_url == "roots://xrootd.lab.example.org:1095/"
    assert not endpoints[WEBDAV].enabled and not endpoints[f"{WEBDAV}-atlas-davs"].enabled
    assert (
        endpoints["typed-here"].enabled and endpoints["typed-here"].updated_at == typed.updated_at
    )


def test_dry_run_prints_the_plan_and_changes_nothing() -> None:
    SiteFactory(name="HAND-MADE")
    before = rows()
    output = topology("gocdb", SITES, SERVICES, "--dry-run")
    assert "create    site LAB-GOCDB" in output
    assert output.rstrip().endswith("dry run: nothing changed")
    assert rows() == before


@pytest.mark.parametrize(
    ("replacement", "named"),
    [
        (
            ("root://xrootd.lab.example.org:1094/", "root://169.254.169.254:1094/"),
            "SERVICE_ENDPOINT 2201G0 (XRootD on xrootd.lab.example.org): base_url: refused by "
            "egress policy",
        ),
        (
            ("https://webdav.lab.example.org:2880/data", "ftp://webdav.lab.example.org/data"),
            "SERVICE_ENDPOINT 2202G0 (webdav on webdav.lab.example.org): URL: scheme 'ftp'",
        ),
        (("</results>", "</result>"), "gocdb_get_service_endpoint.xml: XML: not well-formed"),
    ],
    ids=["metadata-address", "unknown-scheme", "malformed-xml"],
)
def test_one_bad_record_is_named_and_nothing_changes(
    tmp_path: Path, replacement: tuple[str, str], named: str
) -> None:
    before = rows()
    bad = edited(tmp_path, SERVICES, replacement)
    with pytest.raises(CommandError) as refused:
        topology("gocdb", SITES, bad)
    assert named in str(refused.value) and "nothing changed" in str(refused.value)
    assert rows() == before


def test_entities_in_a_registry_answer_are_refused() -> None:
    bomb = b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaa">]><results>&a;</results>'
    with pytest.raises(RegistryRefused, match="XML"):
        gocdb_root(bomb, source="answer")


def test_cric_adds_its_doors_to_a_site_gocdb_made_and_changes_nothing_of_it() -> None:
    topology("gocdb", SITES, SERVICES)
    lab_before = Site.objects.filter(name="LAB-GOCDB").values_list().get()
    output = topology("cric", CRIC)
    assert "keep      site LAB-GOCDB: imported from gocdb, its doors added" in output
    assert "create    site LAB-CRIC (location Italy, storage_system dCache)" in output
    assert Site.objects.filter(name="LAB-GOCDB").values_list().get() == lab_before
    eos = Endpoint.objects.get(external_id="6605")
    assert (eos.site.name, eos.source, eos.door_auth) == ("LAB-GOCDB", "cric", "x509+token")
    assert eos.base_url == "root://eos.lab.example.org:1094/eos/lab"
    assert "nothing to change" in topology("cric", CRIC)


def test_import_fetches_a_url_within_the_egress_policy_and_follows_its_pages(
    registry: Registry,  # noqa: F811
) -> None:
    services = Path(SERVICES).read_text()
    split = services.index('<SERVICE_ENDPOINT PRIMARY_KEY="2203G0">')
    page_2 = "/gocdbpi/public/?method=get_service_endpoint&page=2"
    registry.documents["/gocdbpi/public/"] = (
        services[:split]
        + f'<meta><link rel="self" href="/gocdbpi/public/?method=get_service_endpoint"/>'
        f'<link rel="next" href="{page_2.replace("&", "&amp;")}"/><count>3</count></meta>'
        + "</results>"
    ).encode()
    registry.documents[page_2] = (
        services[: services.index("<SERVICE_ENDPOINT")] + services[split:]
    ).encode()
    output = topology("gocdb", f"{registry.url}/gocdbpi/public/?method=get_service_endpoint")
    assert f"create    endpoint {XROOTD}" in output and f"create    endpoint {GRIDFTP}" in output
    assert Endpoint.objects.filter(source="gocdb").count() == 5  # HAND-MADE's door too
    assert registry.asked[-2:] == ["/gocdbpi/public/?method=get_service_endpoint", page_2]


def test_a_url_outside_the_egress_policy_is_refused_and_nothing_changes(
    registry: Registry,  # noqa: F811
    settings: Any,
) -> None:
    settings.FEDPROBE_EGRESS_ALLOW = []  # loopback no longer allowed
    registry.documents["/gocdbpi/public/"] = Path(SERVICES).read_bytes()
    asked = len(registry.asked)
    with pytest.raises(CommandError, match="egress"):
        topology("gocdb", f"{registry.url}/gocdbpi/public/?method=get_service_endpoint")
    assert len(registry.asked) == asked and not Endpoint.objects.exists()


def test_the_endpoint_page_and_the_api_say_where_an_imported_door_came_from(admin: Any) -> None:
    topology("cric", CRIC)
    webdav = Endpoint.objects.get(external_id="6602")
    page = admin.get(f"/endpoints/{webdav.pk}/").content.decode()
    assert "Imported from</dt><dd>CRIC <code>6602</code>" in page
    assert "X.509 proxy or bearer token" in page
    api = admin.get(f"/api/v1/endpoints/{webdav.pk}/").json()
    assert (api["source"], api["external_id"], api["door_auth"]) == ("cric", "6602", "x509+token")
    assert api["credential_kind"] == "none" and not api["has_credential"]


def test_a_client_certificate_that_does_not_load_is_named_without_its_contents(
    registry: Registry,  # noqa: F811
    tmp_path: Path,
) -> None:
    cert = tmp_path / "gocdb.pem"
    cert.write_text("-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n")
    cert.chmod(0o600)
    with pytest.raises(CommandError) as refused:
        topology("gocdb", f"{registry.url}/gocdbpi/private/?method=get_site", "--cert", str(cert))
    assert "client certificate: --cert: cannot load it" in str(refused.value)
    assert "c2VjcmV0" not in str(refused.value) and str(cert) not in str(refused.value)


def test_a_cert_given_with_its_key_is_not_paired_with_the_settings_key(
    registry: Registry,  # noqa: F811
    tmp_path: Path,
    settings: Any,
) -> None:
    """--cert FILE holding its key (docs/topology.md) must not be loaded with the refresh's
    FEDPROBE_REGISTRY_KEY, another certificate's key: the pair would not load."""
    other = tmp_path / "refresh.pem"
    other.write_text(proxy_pem())
    settings.FEDPROBE_REGISTRY_KEY = str(other)
    cert = tmp_path / "mine.pem"
    cert.write_text(proxy_pem())
    registry.documents["/gocdbpi/private/"] = Path(SITES).read_bytes()
    output = topology(
        "gocdb", f"{registry.url}/gocdbpi/private/?method=get_site", "--cert", str(cert)
    )
    assert "applied" in output
