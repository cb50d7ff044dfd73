"""Managing archivers: the API (admins only, secrets write-only, errors naming the field),
the admin's pages (backlog shown, bad address refused by field), and `manage.py archivers`
(list, test, backfill)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.webapp.archivers.conftest import TOKEN, finished_run, http_archiver, pump
from tests.webapp.factories import api_for, page_for, user
from tests.webapp.notifications.conftest import HttpReceiver
from webapp.archivers.models import ArchiveDelivery, Archiver

Status = ArchiveDelivery.Status

pytestmark = pytest.mark.django_db


def test_the_api_is_for_admins_and_never_gives_the_secrets_back(
    http_receiver: HttpReceiver,
) -> None:
    admin = api_for(user("root", "admin"))
    made = admin.post(
        "/api/v1/archivers/",
        {
            "name": "es",
            "kind": "http",
            "url": http_receiver.url,
            "headers": {"Authorization": TOKEN},
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    listed = admin.get("/api/v1/archivers/")
    assert TOKEN not in made.content.decode() and TOKEN not in listed.content.decode()
    (row,) = listed.json()["results"]
    assert row["has_headers"] is True and "headers" not in row
    assert row["backlog"] == {
        "pending": 0, "oldest_pending_s": None, "failed": 0, "last_delivered_at": None,
    }  # fmt: skip
    assert row["retry_policy"][0] == {"attempts": 3, "wait_s": 60}
    assert api_for(user("ops", "operator")).get("/api/v1/archivers/").status_code == 403

    moved = admin.patch(f"/api/v1/archivers/{row['id']}/", {"url": "http://127.0.0.2/x"})
    assert moved.status_code == 400 and "headers" in moved.json()
    refused = admin.patch(
        f"/api/v1/archivers/{row['id']}/",
        {"url": "http://169.254.169.254/", "headers": {}},
        format="json",
    )
    assert refused.status_code == 400 and "egress" in refused.json()["url"][0]
    policy = admin.patch(
        f"/api/v1/archivers/{row['id']}/", {"retry_policy": [{"attempts": 0}]}, format="json"
    )
    assert policy.status_code == 400 and "retry_policy" in policy.json()
    assert Archiver.objects.get().header_dict() == {"Authorization": TOKEN}


def test_the_admin_lists_the_backlog_and_refuses_a_bad_address_by_field(
    http_receiver: HttpReceiver,
) -> None:
    http_archiver(http_receiver)  # down: its run waits
    finished_run()
    pump()
    page = page_for(_superuser())
    listing = page.get("/admin/archivers/archiver/")
    assert listing.status_code == 200 and " s ago<" in listing.content.decode()
    assert TOKEN not in listing.content.decode()

    form = {
        "name": "meta", "kind": "http", "enabled": "on", "url": "http://169.254.169.254/",
        "headers": "", "retry_policy": '[{"attempts": 1, "wait_s": 5}]', "ttl_s": "3600",
        "timeout_s": "5",
    }  # fmt: skip
    answer = page.post("/admin/archivers/archiver/add/", form)
    assert answer.status_code == 200 and "egress" in answer.content.decode()
    assert not Archiver.objects.filter(name="meta").exists()
    form["url"], form["headers"] = http_receiver.url, f"Authorization: {TOKEN}"
    assert page.post("/admin/archivers/archiver/add/", form).status_code == 302
    saved = Archiver.objects.get(name="meta")
    assert saved.header_dict() == {"Authorization": TOKEN}
    edit = page.get(f"/admin/archivers/archiver/{saved.pk}/change/")
    assert TOKEN not in edit.content.decode()


def test_the_command_tests_lists_and_backfills(http_receiver: HttpReceiver) -> None:
    http_receiver.start()
    old = finished_run(finished_at=timezone.now() - timedelta(days=3))
    archiver = http_archiver(http_receiver)
    out = StringIO()
    call_command("archivers", "test", archiver.name, stdout=out)
    assert f"{archiver.name}: delivered" in out.getvalue()
    (received,) = http_receiver.received
    assert received.body["kind"] == "fedprobe.test"

    pump()
    assert len(http_receiver.received) == 1  # a run older than the archiver is not pushed
    call_command("archivers", "backfill", archiver.name, "--since", "2000-01-01", stdout=out)
    pump()
    assert http_receiver.received[-1].body["run"]["id"] == old.pk
    listing = StringIO()
    call_command("archivers", "list", stdout=listing)
    assert archiver.name in listing.getvalue() and "pending 0" in listing.getvalue()

    http_receiver.stop()
    with pytest.raises(CommandError, match="not delivered"):
        call_command("archivers", "test", archiver.name)


def _superuser() -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_superuser("root", "root@example.org", "x")


def test_send_again_gives_a_delivery_its_time_to_live_again(http_receiver: HttpReceiver) -> None:
    """One given up after its ttl, sent again to a receiver still failing, is retried rather
    than given up on its first attempt again."""
    http_receiver.status = 503
    http_receiver.start()
    http_archiver(http_receiver)  # ttl a day
    finished_run()
    pump()
    stale = timezone.now() - timedelta(days=2)
    ArchiveDelivery.objects.update(status=Status.FAILED, created_at=stale)
    page = page_for(_superuser())
    (delivery,) = ArchiveDelivery.objects.all()
    chosen = {"action": "send_again", "_selected_action": [delivery.pk]}
    assert page.post("/admin/archivers/archivedelivery/", chosen).status_code == 302
    pump()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (Status.PENDING, 1), delivery.last_error


def test_the_deliveries_list_costs_the_same_queries_for_one_row_or_three(
    http_receiver: HttpReceiver,
) -> None:
    http_archiver(http_receiver)
    finished_run()
    pump()
    page = page_for(_superuser())
    with CaptureQueriesContext(connection) as one:
        assert page.get("/admin/archivers/archivedelivery/").status_code == 200
    finished_run(), finished_run()
    pump()
    with CaptureQueriesContext(connection) as three:
        assert page.get("/admin/archivers/archivedelivery/").status_code == 200
    assert ArchiveDelivery.objects.count() == 3
    assert len(three) == len(one)
