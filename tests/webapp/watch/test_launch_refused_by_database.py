"""A launch the database itself refuses (PostgreSQL: a trigger raising on the runs' insert) is
recorded on its slot instead of rolling the claim back: it is not tried again each minute,
the campaigns after it still launch, and the watch raises its tester fault."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.webapp.watch.test_launch_failed import at, nightly
from webapp.campaigns.schedules import campaigns_launch_due
from webapp.watch.evaluate import watch_evaluate
from webapp.watch.launches import launch_key
from webapp.watch.models import Regression

pytestmark = pytest.mark.django_db
State = Regression.State


def test_a_launch_the_database_refuses_is_recorded_and_the_next_campaigns_still_launch() -> None:
    refused, other = nightly(), nightly()
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION refuse_runs() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'runs of this campaign are refused' "
            "USING DETAIL = 'Failing row contains (s3cr3t-row-value)'; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER refuse_runs BEFORE INSERT ON campaigns_run FOR EACH ROW "
            f"WHEN (NEW.campaign_id = {refused.pk}) EXECUTE FUNCTION refuse_runs()"
        )
    launches = campaigns_launch_due(now=at("2026-03-10 02:00:30"))
    assert [(launch.campaign_id, launch.run_count) for launch in launches] == [
        (refused.pk, 0),
        (other.pk, 1),
    ]
    assert "runs of this campaign are refused" in launches[0].error
    assert campaigns_launch_due(now=at("2026-03-10 02:01:30")) == []  # not tried each minute
    watch_evaluate(now=at("2026-03-10 02:45"))
    (regression,) = Regression.objects.all()
    assert (regression.key, regression.state) == (launch_key(refused.pk), State.TESTER_FAULT)
    assert "runs of this campaign are refused" in regression.summary
    # The server's DETAIL quotes the refused row: never on the slot, the alert or its messages.
    assert "s3cr3t-row-value" not in launches[0].error
    assert "s3cr3t-row-value" not in regression.summary
