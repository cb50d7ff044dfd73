"""`manage.py downtimes import gocdb` and the beat's refresh: GOCDB's get_downtime (one element
per service) and get_downtime_nested_services XML, mapped to the endpoints here, idempotent
by PRIMARY_KEY, and a downtime gone from the feed stops covering (docs/topology.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tests.webapp.sites.registry_server import FIXTURES, Registry, registry  # noqa: F401
from tests.webapp.test_production_settings import PRODUCTION_ENV, run_django
from tests.webapp.watch.nights import measure, series, watch
from webapp.sites.downtime_import import downtimes_apply, downtimes_plan, downtimes_read
from webapp.sites.models import Downtime, Endpoint
from webapp.sites.registry_formats import gocdb_downtimes, gocdb_root
from webapp.watch.models import Regression
from webapp.watch.tasks import downtimes_refresh

pytestmark = [pytest.mark.django_db]

FLAT = str(FIXTURES / "gocdb_get_downtime.xml")
NESTED = str(FIXTURES / "gocdb_get_downtime_nested_services.xml")
XROOTD = "LAB-GOCDB-XRootD-xrootd.lab.example.org"
WEBDAV = "LAB-GOCDB-webdav-webdav.lab.example.org"
GRIDFTP = "LAB-GOCDB-globus-GRIDFTP-gridftp.lab.example.org"


@pytest.fixture
def imported(db: None) -> dict[str, Endpoint]:
    """The fixtures' topology, imported from GOCDB."""
    sites, services = FIXTURES / "gocdb_get_site.xml", FIXTURES / "gocdb_get_service_endpoint.xml"
    call_command("topology", "import", "gocdb", str(sites), str(services), stdout=StringIO())
    return {endpoint.name: endpoint for endpoint in Endpoint.objects.all()}


def downtimes(*locations: str) -> str:
    output = StringIO()
    call_command("downtimes", "import", "gocdb", *locations, stdout=output)
    return output.getvalue()


def covered() -> set[tuple[str, str]]:
    return {(d.external_id, d.endpoint.name) for d in Downtime.objects.select_related("endpoint")}


def test_gocdb_downtimes_gather_their_services_by_primary_key() -> None:
    read = gocdb_downtimes([gocdb_root(Path(p).read_bytes(), source=p) for p in (FLAT, NESTED)])
    upgrade = read["4401G0"]
    assert [s.hostname for s in upgrade.services] == [
        "xrootd.lab.example.org",
        "webdav.lab.example.org",
    ]
    assert (upgrade.severity, upgrade.scheduled) == ("outage", True)
    assert upgrade.start == datetime(2026, 10, 1, tzinfo=UTC)
    assert (read["4402G0"].severity, read["4402G0"].scheduled) == ("warning", False)
    assert read["4404G0"].services[0].primary_key == "2202G0"


@pytest.mark.sqlite
def test_import_covers_each_service_s_endpoints_and_a_second_import_changes_nothing(
    imported: dict[str, Endpoint],
) -> None:
    mine = Downtime.objects.create(
        endpoint=imported[XROOTD],
        start=datetime(2026, 9, 1, tzinfo=UTC),
        end=datetime(2026, 12, 1, tzinfo=UTC),
        severity="warning",
        scheduled=True,
        description="declared here",
    )
    output = downtimes(FLAT, NESTED)
    assert (
        f"create    downtime 4402G0 of endpoint {GRIDFTP}: warning, unscheduled, "
        "2026-10-01 08:00 - 2026-10-01 12:00 UTC"
    ) in output
    assert "skip      1 downtimes of services that are no endpoint here" in output
    assert covered() == {
        ("", XROOTD),
        ("4401G0", XROOTD),
        ("4401G0", WEBDAV),
        ("4401G0", f"{WEBDAV}-atlas-davs"),
        ("4402G0", GRIDFTP),
        ("4404G0", WEBDAV),
        ("4404G0", f"{WEBDAV}-atlas-davs"),
    }
    before = list(Downtime.objects.order_by("pk").values_list())
    assert downtimes(FLAT, NESTED).rstrip().endswith("nothing to change")
    assert list(Downtime.objects.order_by("pk").values_list()) == before
    mine.refresh_from_db()
    assert (mine.description, mine.source) == ("declared here", "")


def test_a_downtime_gocdb_changed_is_updated(imported: dict[str, Endpoint], tmp_path: Path) -> None:
    downtimes(FLAT)
    text = Path(FLAT).read_text()
    end = int(datetime(2026, 10, 1, 12, tzinfo=UTC).timestamp())
    later = int(datetime(2026, 10, 1, 15, tzinfo=UTC).timestamp())
    changed = tmp_path / "downtimes.xml"
    changed.write_text(text.replace(f"<END_DATE>{end}</END_DATE>", f"<END_DATE>{later}</END_DATE>"))
    output = downtimes(str(changed))
    assert f"update    downtime 4402G0 of endpoint {GRIDFTP}: end now warning" in output
    assert Downtime.objects.get(external_id="4402G0").end == datetime(2026, 10, 1, 15, tzinfo=UTC)


def test_a_downtime_gone_from_gocdb_ends_now_or_before_it_began_is_removed(
    imported: dict[str, Endpoint],
) -> None:
    now = datetime(2026, 10, 1, 10, tzinfo=UTC)  # 4401G0 and 4402G0 ongoing, 4404G0 to come
    downtimes_apply(downtimes_plan(downtimes=downtimes_read(locations=[FLAT, NESTED]), now=now))
    only_4402 = {k: v for k, v in downtimes_read(locations=[FLAT]).items() if k == "4402G0"}
    plan = downtimes_plan(downtimes=only_4402, now=now)
    assert f"end       downtime 4401G0 of endpoint {XROOTD}: no longer in GOCDB, ends now" in (
        "\n".join(plan.lines)
    )
    assert f"remove    downtime 4404G0 of endpoint {WEBDAV}: no longer in GOCDB" in (
        "\n".join(plan.lines)
    )
    downtimes_apply(plan)
    assert {d.end for d in Downtime.objects.filter(external_id="4401G0")} == {now}
    assert not Downtime.objects.filter(external_id="4404G0").exists()
    a_minute_later = now + timedelta(minutes=1)
    still = Downtime.objects.filter(start__lt=a_minute_later, end__gt=a_minute_later)
    assert {d.external_id for d in still} == {"4402G0"}


def feed(*downtimes: tuple[str, datetime, datetime]) -> bytes:
    """A get_downtime answer of XRootD downtimes on the lab's xrootd host."""
    elements = "".join(
        f'<DOWNTIME ID="{key[:-2]}" PRIMARY_KEY="{key}" CLASSIFICATION="SCHEDULED">'
        f"<PRIMARY_KEY>{key}</PRIMARY_KEY><HOSTNAME>xrootd.lab.example.org</HOSTNAME>"
        "<SERVICE_TYPE>XRootD</SERVICE_TYPE><HOSTED_BY>LAB-GOCDB</HOSTED_BY>"
        "<SEVERITY>OUTAGE</SEVERITY><DESCRIPTION>upgrade</DESCRIPTION>"
        f"<START_DATE>{int(start.timestamp())}</START_DATE>"
        f"<END_DATE>{int(end.timestamp())}</END_DATE></DOWNTIME>"
        for key, start, end in downtimes
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<results>{elements}</results>'.encode()


def test_the_refresh_task_imports_the_feed_and_drops_a_cancelled_downtime(
    imported: dict[str, Endpoint],
    registry: Registry,  # noqa: F811
    settings: Any,
) -> None:
    settings.FEDPROBE_GOCDB_DOWNTIME_URL = ""
    assert downtimes_refresh() == 0  # no feed, no refresh
    settings.FEDPROBE_GOCDB_DOWNTIME_URL = f"{registry.url}/gocdbpi/public/?method=get_downtime"
    tomorrow = timezone.now() + timedelta(days=1)
    registry.documents["/gocdbpi/public/"] = feed(
        ("7701G0", tomorrow, tomorrow + timedelta(hours=4))
    )
    assert downtimes_refresh() == 1
    assert covered() == {("7701G0", XROOTD)}
    assert f"/gocdbpi/public/?method=get_downtime&windowstart={timezone.now():%Y-%m-%d}" in (
        registry.asked
    )
    registry.documents["/gocdbpi/public/"] = feed()  # cancelled in GOCDB
    downtimes_refresh()
    assert not Downtime.objects.exists()


def test_an_imported_downtime_silences_the_watch_for_the_endpoint_it_covers(
    imported: dict[str, Endpoint],
) -> None:
    downtimes(FLAT)  # 4401G0: an outage of the xrootd door, 2026-10-01 00:00 to 10-03 12:00
    covered_door = series(endpoint=imported[XROOTD])
    uncovered_door = series(endpoint=imported["HAND-MADE-XRootD-xrootd.hand.example.org"])
    for night in (0, 1):
        measure(covered_door, night, "timeout")
        measure(uncovered_door, night, "timeout")
        watch(night)
    assert not Regression.objects.filter(endpoint=covered_door.endpoint).exists()
    assert Regression.objects.filter(endpoint=uncovered_door.endpoint, state="open").exists()


def test_beat_refreshes_downtimes_only_when_a_feed_is_set(settings: Any) -> None:
    assert "downtimes-refresh" not in settings.CELERY_BEAT_SCHEDULE  # the tests set no feed
    code = (
        "import django, json; django.setup(); from django.conf import settings; "
        "print(json.dumps(settings.CELERY_BEAT_SCHEDULE.get('downtimes-refresh')))"
    )
    feed_url = "https://goc.egi.eu/gocdbpi/public/?method=get_downtime&scope=wlcg"
    env = {**PRODUCTION_ENV, "FEDPROBE_GOCDB_DOWNTIME_URL": feed_url}
    entry = json.loads(run_django(["-c", code], env).stdout)
    assert (entry["task"], entry["schedule"]) == ("fedprobe.downtimes_refresh", 900.0)


def test_a_malformed_downtime_is_named_and_nothing_changes(
    imported: dict[str, Endpoint], tmp_path: Path
) -> None:
    bad = tmp_path / "downtimes.xml"
    bad.write_text(Path(FLAT).read_text().replace("<SEVERITY>WARNING", "<SEVERITY>AT_RISK"))
    with pytest.raises(CommandError, match=r"DOWNTIME 4402G0: SEVERITY: 'at_risk' is not"):
        downtimes(str(bad))
    assert not Downtime.objects.exists()
