"""Availability and reliability of a hand-built month (WLCG A/R): each term counted by the
rule of webapp/watch/availability.py, with downtimes (scheduled, unscheduled, warning) and
tester faults; the API's answer and its 400 for a bad month."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from tests.webapp.dashboards.status_runs import RunMaker
from tests.webapp.factories import SiteFactory, VantagePointFactory, api_for, user
from webapp.campaigns.models import Run
from webapp.sites.models import Downtime
from webapp.watch.availability import Terms, availability_months, months_back

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

S = Run.Status


def at(day: int, hour: int = 12, month: int = 10) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def error(error_class: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"class": error_class, "message": "m", "client": None, **extra}]


@pytest.fixture
def october() -> dict[str, Any]:
    make = RunMaker()
    site = SiteFactory(name="ar-site")
    a, b = make.endpoint("ar-a", site=site), make.endpoint("ar-b", site=site)
    vp = VantagePointFactory(name="ar-vp")

    def add(endpoint: Any, status: str, when: datetime, **extra: Any) -> None:
        make.add(endpoint, vp, status, when, **extra)

    outage = {"severity": "outage", "description": ""}
    Downtime.objects.create(site=site, start=at(10, 0), end=at(11, 0), scheduled=True, **outage)
    Downtime.objects.create(endpoint=a, start=at(20, 0), end=at(21, 0), scheduled=False, **outage)
    Downtime.objects.create(
        endpoint=a, start=at(25, 0), end=at(26, 0), scheduled=True, severity="warning"
    )
    for day in range(1, 7):
        add(a, S.SUCCEEDED, at(day))  # up 6
    add(a, S.PARTIAL, at(7))
    add(a, S.PARTIAL, at(8))  # up 1, down 1
    add(a, S.FAILED, at(9, 1), errors=error("auth"))
    add(a, S.FAILED, at(9, 2), errors=error("refused"))
    add(a, S.TIMEOUT, at(9, 3), errors=error("timeout"))  # down 3
    add(a, S.FAILED, at(12), errors=error("lost"))
    add(a, S.PARTIAL, at(13), errors=error("harness"))
    add(a, S.FAILED, at(14), errors=error("auth", phase="credential"))  # unknown 3
    add(a, S.FAILED, at(10, 5), errors=error("refused"))
    add(a, S.FAILED, at(10, 6), errors=error("refused"))
    add(a, S.SUCCEEDED, at(10, 7))  # scheduled downtime 3, whatever the outcome
    add(a, S.FAILED, at(10, 8), errors=error("lost"))  # unknown, even during a downtime
    add(a, S.FAILED, at(20, 5), errors=error("refused"))
    add(a, S.TIMEOUT, at(20, 6), errors=error("timeout"))  # unscheduled downtime 2
    add(a, S.FAILED, at(25, 5), errors=error("refused"))  # a warning changes nothing: down
    add(a, S.CANCELLED, at(15))  # left out
    add(a, S.SUCCEEDED, datetime(2026, 9, 30, 23, 59, tzinfo=UTC))  # another month
    add(a, S.FAILED, datetime(2026, 11, 1, 0, 0, tzinfo=UTC), errors=error("auth"))
    add(b, S.SUCCEEDED, at(10, 9))  # the site's scheduled downtime covers b too
    add(b, S.SUCCEEDED, at(15))
    return {"site": site, "a": a, "b": b}


A = Terms(total=21, up=7, down=5, unknown=4, scheduled_downtime=3, unscheduled_downtime=2)
B = Terms(total=2, up=1, down=0, unknown=0, scheduled_downtime=1, unscheduled_downtime=0)
SITE = Terms(total=23, up=8, down=5, unknown=4, scheduled_downtime=4, unscheduled_downtime=2)


def test_each_term_of_a_hand_built_month(october: dict[str, Any]) -> None:
    (month,) = availability_months(sites=[october["site"]], months=[date(2026, 10, 1)])
    assert {e.name: e.terms for e in month.endpoints} == {"ar-a": A, "ar-b": B}
    assert month.terms == SITE
    assert A.availability == pytest.approx(7 / 17)
    assert A.reliability == pytest.approx(7 / 14)
    assert B.availability == pytest.approx(1 / 2)
    assert B.reliability == pytest.approx(1 / 1)
    assert SITE.availability == pytest.approx(8 / 19)
    assert SITE.reliability == pytest.approx(8 / 15)


def test_a_month_without_runs_has_no_figures(october: dict[str, Any]) -> None:
    (month,) = availability_months(sites=[october["site"]], months=[date(2026, 8, 1)])
    assert month.terms == Terms() and month.terms.availability is None


def test_months_back_crosses_the_year() -> None:
    assert months_back(date(2026, 2, 1), 4) == [
        date(2025, 11, 1),
        date(2025, 12, 1),
        date(2026, 1, 1),
        date(2026, 2, 1),
    ]


def test_the_api_answers_terms_and_formula(october: dict[str, Any]) -> None:
    api = api_for(user("viewer", "viewer"))
    answer = api.get(f"/api/v1/availability/?site={october['site'].pk}&month=2026-10")
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert data["formula"] == {
        "availability": "up / (total - unknown)",
        "reliability": "up / (total - scheduled_downtime - unknown)",
    }
    (site,) = data["sites"]
    assert (site["total"], site["up"], site["unknown"], site["scheduled_downtime"]) == (23, 8, 4, 4)
    assert site["availability"] == round(8 / 19, 4)
    assert site["reliability"] == round(8 / 15, 4)
    one = api.get(f"/api/v1/availability/?endpoint={october['b'].pk}&month=2026-10").json()
    assert [e["name"] for e in one["sites"][0]["endpoints"]] == ["ar-b"]
    assert one["sites"][0]["reliability"] == 1.0


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("month=2026-13", "month"),
        ("month=october", "month"),
        ("month=2026-1", "month"),
        ("site=987654", "site"),
        ("endpoint=x", "endpoint"),
    ],
)
def test_bad_query_answers_400_naming_the_field(
    october: dict[str, Any], query: str, field: str
) -> None:
    answer = api_for(user("viewer", "viewer")).get(f"/api/v1/availability/?{query}")
    assert answer.status_code == 400 and field in answer.json(), answer.content
