"""`manage.py check_watch`: the watch's regressions about a site, endpoint or vantage point
as a monitoring plugin's state, status line and perfdata (docs/monitoring-probes.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from tests.webapp.dashboards.status_runs import RunMaker
from tests.webapp.factories import (
    RegressionFactory,
    SeriesNightFactory,
    SiteFactory,
    VantagePointFactory,
)
from tests.workers.engine.test_plugin import check_plugin_line
from webapp.campaigns.models import Run
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db

State, Severity = Regression.State, Regression.Severity


@dataclass
class Checked:
    code: int
    state: str
    perf: dict[str, str]
    line: str


def check_watch(capsys: pytest.CaptureFixture[str], *args: str) -> Checked:
    with pytest.raises(SystemExit) as exited:
        call_command("check_watch", *args)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # one line
    state, perf = check_plugin_line(out)
    items = {item.split("=")[0].strip("'"): item.split("=", 1)[1] for item in perf}
    assert isinstance(exited.value.code, int)
    return Checked(exited.value.code, state, items, out)


@pytest.fixture
def measured() -> dict[str, Any]:
    """A site with one measured endpoint (a night rolled up, 3 of 4 runs this month up)."""
    make = RunMaker()
    site = SiteFactory(name="nagios-site")
    endpoint = make.endpoint("nagios-ep", site=site)
    point = VantagePointFactory(name="nagios-vp")
    SeriesNightFactory(endpoint=endpoint, vantage_point=point)
    now = timezone.now()
    for status in (Run.Status.SUCCEEDED,) * 3 + (Run.Status.FAILED,):
        make.add(endpoint, point, status, now - timedelta(minutes=5))
    return {"site": site, "endpoint": endpoint, "vantage_point": point}


def regression(measured: dict[str, Any], **fields: Any) -> Regression:
    found: Regression = RegressionFactory(
        endpoint=measured["endpoint"], vantage_point=measured["vantage_point"], **fields
    )
    return found


def test_a_measured_site_without_regressions_is_ok_with_its_availability(
    capsys: pytest.CaptureFixture[str], measured: dict[str, Any]
) -> None:
    found = check_watch(capsys, "--site", "nagios-site", "--warning", "70:")
    assert (found.code, found.state) == (0, "OK"), found.line
    assert found.perf["availability"] == "75%;70:;;0;100"
    assert found.perf["critical"] == "0;;;0"
    assert "live regressions: none" in found.line


def test_an_open_critical_regression_is_critical_naming_it_with_its_link(
    capsys: pytest.CaptureFixture[str], measured: dict[str, Any]
) -> None:
    regression(measured, severity=Severity.WARNING, summary="slower by 40%")
    worst = regression(measured, severity=Severity.CRITICAL, summary="every read fails: auth")
    for target in (["--site", "nagios-site"], ["--endpoint", str(measured["endpoint"].pk)]):
        found = check_watch(capsys, *target)
        assert (found.code, found.state) == (2, "CRITICAL"), found.line
        assert "every read fails: auth (critical, open since" in found.line
        assert f"{settings.FEDPROBE_BASE_URL}/regressions/{worst.pk}/" in found.line
        assert (found.perf["critical"], found.perf["warning"]) == ("1;;;0", "1;;;0")


@pytest.mark.parametrize(
    ("fields", "code", "counted"),
    [
        ({"severity": Severity.WARNING}, 1, "warning"),
        ({"state": State.ACKNOWLEDGED, "severity": Severity.CRITICAL}, 2, "critical"),
        ({"state": State.PENDING, "severity": Severity.CRITICAL}, 1, "suspicious"),
        ({"state": State.RECOVERING, "severity": Severity.CRITICAL}, 1, "recovering"),
        ({"severity": Severity.INFO}, 0, "info"),
        ({"state": State.TESTER_FAULT, "severity": Severity.CRITICAL}, 0, "tester_faults"),
        ({"state": State.RESOLVED, "severity": Severity.CRITICAL}, 0, None),
    ],
)
def test_each_state_and_severity_maps_to_its_plugin_state(
    capsys: pytest.CaptureFixture[str],
    measured: dict[str, Any],
    fields: dict[str, Any],
    code: int,
    counted: str | None,
) -> None:
    regression(measured, **fields)
    found = check_watch(capsys, "--endpoint", str(measured["endpoint"].pk))
    assert found.code == code, found.line
    if counted:
        assert found.perf[counted] == "1;;;0"


def test_a_silenced_regression_is_counted_but_changes_no_state(
    capsys: pytest.CaptureFixture[str], measured: dict[str, Any]
) -> None:
    regression(
        measured, severity=Severity.CRITICAL, silenced_until=timezone.now() + timedelta(hours=1)
    )
    found = check_watch(capsys, "--site", "nagios-site")
    assert (found.code, found.perf["silenced"], found.perf["critical"]) == (0, "1;;;0", "0;;;0")


def test_a_vantage_point_answers_for_what_is_blamed_on_it_not_for_the_sites(
    capsys: pytest.CaptureFixture[str], measured: dict[str, Any]
) -> None:
    regression(measured, severity=Severity.CRITICAL)  # a site's series, seen from the point
    found = check_watch(capsys, "--vantage-point", "nagios-vp")
    assert found.code == 0, found.line
    RegressionFactory(
        endpoint=None,
        vantage_point=measured["vantage_point"],
        key="vp:nagios-vp:not-run",
        state=State.TESTER_FAULT,
        severity=Severity.CRITICAL,
        summary="nagios-vp ran nothing for 2 h",
        blame={"target": "vantage-point", "rule": "not-run"},
    )
    found = check_watch(capsys, "--vantage-point", "nagios-vp")
    assert (found.code, found.state) == (2, "CRITICAL"), found.line
    assert "nagios-vp ran nothing for 2 h" in found.line
    assert "availability" not in found.perf


def test_availability_below_the_critical_range_is_critical(
    capsys: pytest.CaptureFixture[str], measured: dict[str, Any]
) -> None:
    found = check_watch(capsys, "--site", "nagios-site", "--warning", "90:", "--critical", "80:")
    assert found.code == 2, found.line
    assert "availability 75% this month is below 80" in found.line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--site", "nowhere"], "--site: no site named 'nowhere'"),
        (["--endpoint", "x1"], "--endpoint: no endpoint with id 'x1'"),
        (["--endpoint", "\u00b2"], "--endpoint: no endpoint with id '\u00b2'"),  # isdigit()
        (["--site", "nagios-site", "--warning", "fast"], "--warning: 'fast' is not a range"),
        ([], "one of the arguments --site --endpoint --vantage-point is required"),
        (["--site", "a", "--endpoint", "1"], "not allowed with argument"),
    ],
)
def test_bad_arguments_and_unknown_targets_are_unknown(
    capsys: pytest.CaptureFixture[str], measured: dict[str, Any], args: list[str], said: str
) -> None:
    found = check_watch(capsys, *args)
    assert (found.code, found.state) == (3, "UNKNOWN"), found.line
    assert said in found.line


def test_a_target_the_watch_never_rolled_up_is_unknown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    SiteFactory(name="unmeasured")
    found = check_watch(capsys, "--site", "unmeasured")
    assert (found.code, found.state) == (3, "UNKNOWN")
    assert "no data" in found.line


def test_an_endpoint_answers_for_the_site_group_its_series_belong_to(
    capsys: pytest.CaptureFixture[str], measured: dict[str, Any]
) -> None:
    group = RegressionFactory(
        endpoint=None,
        vantage_point=None,
        site=measured["site"],
        key="site:nagios-site:availability",
        severity=Severity.CRITICAL,
        summary="nagios-site: 3 series failed (site)",
        blame={"target": "site", "rule": "site"},
    )
    regression(measured, severity=Severity.CRITICAL, parent=group)
    found = check_watch(capsys, "--endpoint", str(measured["endpoint"].pk))
    assert found.code == 2, found.line
    assert "nagios-site: 3 series failed (site) (critical, open since" in found.line
    assert found.perf["critical"] == "1;;;0"  # the group, not its member as well


def test_a_vantage_point_that_never_ran_is_judged_by_its_not_run_regression(
    capsys: pytest.CaptureFixture[str],
) -> None:
    point = VantagePointFactory(name="never-ran")
    found = check_watch(capsys, "--vantage-point", "never-ran")
    assert (found.code, found.state) == (3, "UNKNOWN")
    RegressionFactory(
        endpoint=None,
        vantage_point=point,
        key="vp:never-ran:not-run",
        state=State.TESTER_FAULT,
        severity=Severity.CRITICAL,
        summary="never-ran took no run in 2 h",
        blame={"target": "vantage-point", "rule": "not-run"},
    )
    found = check_watch(capsys, "--vantage-point", "never-ran")
    assert (found.code, found.state) == (2, "CRITICAL"), found.line


def test_a_database_that_does_not_answer_is_unknown_with_one_line() -> None:
    """The plugin's own failure is UNKNOWN (3), never a traceback's exit 1 (WARNING)."""
    env = {**os.environ, "DATABASE_URL": "postgres://fedprobe@127.0.0.1:1/nowhere"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check_watch", "--site", "ALPHA"],
        cwd=Path(__file__).parents[3], env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    state, _ = check_plugin_line(done.stdout.strip())
    assert state == "UNKNOWN" and "OperationalError" in done.stdout, done.stdout
