"""The regression pages: the list (live ones by default, severity first, filtered as the
API), the detail (verdict with its detector's parameters, blame rule, versions, events, the
plot's data) and the operators' forms; home's "Regressions"; their query budgets."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.webapp.factories import (
    EndpointFactory,
    RegressionFactory,
    SeriesNightFactory,
    SiteFactory,
    VantagePointFactory,
    page_for,
    user,
)
from webapp.watch.models import Regression, RegressionEvent

pytestmark = pytest.mark.django_db
State = Regression.State


def _row_ids(html: str) -> list[int]:
    return [int(part.split('"', 1)[0]) for part in html.split('data-regression-id="')[1:]]


def test_the_list_shows_live_regressions_severity_first_by_default() -> None:
    warning = RegressionFactory(severity="warning")
    critical = RegressionFactory(severity="critical", opened_at=timezone.now() - timedelta(9))
    RegressionFactory(state=State.RESOLVED, severity="critical")
    html = page_for(user("v", "viewer")).get("/regressions/").content.decode()
    assert _row_ids(html) == [critical.pk, warning.pk]


def test_the_list_row_says_what_state_blame_since_change_and_silence() -> None:
    site = SiteFactory(name="T2_Example")
    regression = RegressionFactory(
        endpoint=EndpointFactory(site=site, name="xrootd-door"),
        vantage_point=VantagePointFactory(name="cern"),
        silenced_until=timezone.now() + timedelta(days=2),
    )
    html = page_for(user("v", "viewer")).get("/regressions/").content.decode()
    row = html.split(f'data-regression-id="{regression.pk}"')[1].split("</tr>")[0]
    for text in ("xrootd-door", "(T2_Example)", "from cern", "throughput_mbps", "64 KiB reads",
                 "open", "the site T2_Example", "2026-11-20", "-40%"):  # fmt: skip
        assert text in row, text
    assert f"{regression.silenced_until:%Y-%m-%d}" in row


def test_the_list_filters_as_the_api_does_and_names_a_bad_filter() -> None:
    RegressionFactory()
    suspicious = RegressionFactory(state=State.PENDING, verdict="suspicious")
    viewer = page_for(user("v", "viewer"))
    assert _row_ids(viewer.get("/regressions/?verdict=suspicious").content.decode()) == [
        suspicious.pk
    ]
    bad = viewer.get("/regressions/?blame=weather")
    assert bad.status_code == 400
    assert "blame:" in bad.content.decode()


def test_the_filter_lists_only_sites_with_regressions_and_takes_the_endpoint_as_an_id() -> None:
    with_one = RegressionFactory(endpoint=EndpointFactory(site=SiteFactory(name="T2_Listed")))
    quiet = SiteFactory(name="T2_Quiet")
    EndpointFactory.create_batch(5, site=quiet)
    viewer = page_for(user("v", "viewer"))
    html = viewer.get("/regressions/").content.decode()
    site_select = html.split('name="site"')[1].split("</select>")[0]
    assert "T2_Listed" in site_select and "T2_Quiet" not in site_select
    assert 'type="number" name="endpoint"' in html
    assert f'href="?endpoint={with_one.endpoint_id}"' in html  # the row's own filter
    # A site without regressions may still be asked for: the page keeps it chosen.
    chosen = viewer.get(f"/regressions/?site={quiet.pk}").content.decode()
    assert f'<option value="{quiet.pk}" selected>' in chosen
    assert _row_ids(chosen) == []
    assert _row_ids(
        viewer.get(f"/regressions/?endpoint={with_one.endpoint_id}").content.decode()
    ) == [with_one.pk]
    bad = viewer.get("/regressions/?endpoint=999999")
    assert bad.status_code == 400 and "endpoint:" in bad.content.decode()


def test_names_are_shown_as_text_never_as_html() -> None:
    site = SiteFactory(name="<img src=x onerror=alert(1)>")
    RegressionFactory(endpoint=EndpointFactory(site=site, name="<b>door</b>"))
    html = page_for(user("v", "viewer")).get("/regressions/").content.decode()
    assert "<img src=x" not in html and "<b>door</b>" not in html
    assert "&lt;b&gt;door&lt;/b&gt;" in html


def test_the_list_reads_a_bounded_number_of_queries(django_assert_max_num_queries: Any) -> None:
    for _ in range(30):
        RegressionFactory(acknowledged_by=user(f"u{_}"), silenced_by=None)
    viewer = page_for(user("v", "viewer"))
    # session, user, role x2, count, 2 filter lists (sites with regressions, vantage
    # points), the page's keys, its rows
    with django_assert_max_num_queries(9):
        assert viewer.get("/regressions/").status_code == 200


def _series(regression: Regression) -> None:
    for day in range(1, 25):
        median = 100.0 if day < 20 else 60.0
        SeriesNightFactory(
            endpoint=regression.endpoint, vantage_point=regression.vantage_point,
            night=date(2026, 11, day),
            metrics={"throughput_mbps": {"median": median, "q1": median - 2, "q3": median + 2,
                                         "mad": 1.0, "n": 4}},
            server_versions=["5.6.2" if day >= 20 else "5.6.1"],
        )  # fmt: skip
    SeriesNightFactory(
        endpoint=regression.endpoint, vantage_point=VantagePointFactory(name="desy"),
        night=date(2026, 11, 22),
    )  # fmt: skip


def test_the_detail_shows_the_verdict_its_detector_blame_rule_versions_and_plot_data(
    django_assert_max_num_queries: Any,
) -> None:
    regression = RegressionFactory(
        blame={"target": "site", "rule": "bad from every vantage point that measures it (2 of 2)"},
        versions=[
            {"kind": "server", "version": "5.6.2", "first_seen": "2026-11-20", "previous": "5.6.1"},
            {
                "kind": "client",
                "version": "xrdcp v5.6.2",
                "first_seen": "2026-11-21",
                "previous": "xrdcp v5.6.1",
            },
        ],
    )
    _series(regression)
    viewer = page_for(user("v", "viewer"))
    with django_assert_max_num_queries(10):
        html = viewer.get(f"/regressions/{regression.pk}/").content.decode()
    for text in ("e-divisive", "<code>pvalue</code> = 0.01", "2026-10-25 to 2026-11-19",
                 "2026-11-20 to 2026-11-24", "rule: bad from every vantage point",
                 "server version 5.6.2 (was 5.6.1), first seen 2026-11-20",
                 "client version xrdcp v5.6.2 (was xrdcp v5.6.1), first seen 2026-11-21",
                 "desy"):  # fmt: skip
        assert text in html, text
    plot = json.loads(html.split('id="regression-data" type="application/json">')[1].split("<")[0])
    assert plot["change_night"] == "2026-11-20"
    assert len(plot["nights"]) == 24 and plot["nights"][-1]["value"] == 60.0
    assert plot["nights"][-1]["client_versions"] == ["xrootd 5.6.1 (Python bindings)"]
    assert plot["band"]["median"] == 100.0
    assert [o["vantage_point"] for o in plot["others"]] == ["desy"]
    assert "Acknowledge" not in html  # a viewer gets no forms


def test_an_operator_acknowledges_with_a_note_and_the_page_shows_who_and_why() -> None:
    regression = RegressionFactory()
    operator = page_for(user("olga"))
    url = f"/regressions/{regression.pk}/"
    answer = operator.post(url, {"action": "ack", "ack-note": "GGUS 4242 opened"})
    assert answer.status_code == 302
    html = operator.get(url).content.decode()
    assert "by olga" in html and "GGUS 4242 opened" in html
    assert RegressionEvent.objects.get(regression=regression).actor.username == "olga"


def test_an_operator_silences_until_a_date_and_a_silence_in_the_past_is_400() -> None:
    regression = RegressionFactory()
    operator = page_for(user("olga"))
    url = f"/regressions/{regression.pk}/"
    past = operator.post(url, {"action": "silence", "silence-until": "2020-01-01 00:00",
                               "silence-note": "x"})  # fmt: skip
    assert past.status_code == 400
    assert "until: a silence must end in the future" in past.content.decode()
    until = timezone.now() + timedelta(days=3)
    operator.post(url, {"action": "silence", "silence-until": f"{until:%Y-%m-%d %H:%M}",
                        "silence-note": "site downtime in GOCDB"})  # fmt: skip
    stored = Regression.objects.get(pk=regression.pk)
    assert stored.silenced_until is not None and stored.silence_note == "site downtime in GOCDB"
    assert f"silenced until {until:%Y-%m-%d %H:%M}" in operator.get(url).content.decode()


def test_acknowledging_a_pending_regression_on_the_page_is_409_and_says_why() -> None:
    regression = RegressionFactory(state=State.PENDING)
    answer = page_for(user("olga")).post(
        f"/regressions/{regression.pk}/", {"action": "ack", "ack-note": "x"}
    )
    assert answer.status_code == 409
    assert "a pending regression cannot become acknowledged" in answer.content.decode()


def test_a_viewer_posting_a_form_gets_403_and_nothing_changes() -> None:
    regression = RegressionFactory()
    answer = page_for(user("v", "viewer")).post(
        f"/regressions/{regression.pk}/", {"action": "resolve", "resolve-note": ""}
    )
    assert answer.status_code == 403
    assert "needs the operator role: you are a viewer" in answer.content.decode()
    assert Regression.objects.get(pk=regression.pk).state == State.OPEN


def test_home_lists_open_regressions_severity_first_and_tester_faults_not_silenced_ones(
    django_assert_max_num_queries: Any,
) -> None:
    critical = RegressionFactory(severity="critical")
    warning = RegressionFactory(severity="warning", opened_at=timezone.now())
    silenced = RegressionFactory(silenced_until=timezone.now() + timedelta(days=1))
    member = RegressionFactory(parent=critical)
    fault = RegressionFactory(state=State.TESTER_FAULT)
    for _ in range(10):
        RegressionFactory(state=State.RESOLVED)
    viewer = page_for(user("v", "viewer"))
    # 4 more: the watch's pass the alerts come from (3), their rows' regressions
    with django_assert_max_num_queries(20):
        html = viewer.get("/").content.decode()
    regressions = html.split('id="home-regressions"')[1].split("</table>")[0]
    assert _row_ids(regressions) == [critical.pk, warning.pk]
    assert silenced.pk not in _row_ids(regressions) and member.pk not in _row_ids(regressions)
    faults = html.split('id="home-tester-faults"')[1].split("</table>")[0]
    assert _row_ids(faults) == [fault.pk]
