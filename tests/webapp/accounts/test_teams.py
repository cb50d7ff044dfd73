"""Teams over the API, on their pages and in the admin: operators make them and manage them,
a team's managers (and admins) add and remove members, a member may leave, nobody else
changes them (403 saying who may, nothing changed); the last manager stays; bad input 400
naming the field."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.webapp.factories import api_for, member, page_for, team, user
from webapp.accounts.models import Team, TeamMembership

pytestmark = pytest.mark.django_db


def members_of(made: Team) -> dict[str, bool]:
    return dict(made.memberships.values_list("user__username", "manager"))


def test_an_operator_makes_a_team_and_manages_it() -> None:
    lead = user("lead")
    answer = api_for(lead).post(
        "/api/v1/teams/", {"name": "storage-ops", "description": "the storage on-call"}
    )
    assert answer.status_code == 201, answer.json()
    assert answer.json()["members"][0]["username"] == "lead"
    assert answer.json()["members"][0]["manager"] is True
    made = Team.objects.get()
    assert members_of(made) == {"lead": True}
    assert made.managed_by(lead) and made.has_member(lead)


def test_a_viewer_cannot_make_a_team() -> None:
    answer = api_for(user("vic", role="viewer")).post("/api/v1/teams/", {"name": "mine"})
    assert answer.status_code == 403
    assert "creating teams needs the operator role" in answer.json()["detail"]
    assert not Team.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [({"name": "STORAGE-ops"}, "name"), ({"name": "  "}, "name"), ({"name": "x" * 101}, "name")],
)
def test_a_bad_team_name_answers_400_naming_it(body: dict[str, str], field: str) -> None:
    lead = user("lead")
    team("storage-ops", manager=lead)
    answer = api_for(lead).post("/api/v1/teams/", body)
    assert answer.status_code == 400 and field in answer.json(), answer.json()
    assert Team.objects.count() == 1


def test_a_manager_adds_and_removes_members_and_makes_managers() -> None:
    lead = user("lead")
    made = team("ops", manager=lead)
    api = api_for(lead)
    answer = api.post(f"/api/v1/teams/{made.pk}/members/", {"username": "ana"})
    assert answer.status_code == 400 and "no user is named 'ana'" in str(answer.json()["username"])
    member("ana")
    member("bo")
    assert api.post(f"/api/v1/teams/{made.pk}/members/", {"username": "ana"}).status_code == 200
    answer = api.post(f"/api/v1/teams/{made.pk}/members/", {"username": "bo", "manager": True})
    assert answer.status_code == 200
    assert [(m["username"], m["manager"]) for m in answer.json()["members"]] == [
        ("bo", True),
        ("lead", True),
        ("ana", False),
    ]
    answer = api.delete(f"/api/v1/teams/{made.pk}/members/ana/")
    assert answer.status_code == 200, answer.json()
    assert members_of(made) == {"lead": True, "bo": True}


def test_a_non_manager_cannot_change_members_and_nothing_changes() -> None:
    lead = user("lead")
    ana, bo = member("ana"), member("bo")
    made = team("ops", manager=lead, members=[ana, bo])
    before = members_of(made)
    outsider = user("outsider")
    for who in (ana, outsider):
        api = api_for(who)
        refused = [
            api.post(f"/api/v1/teams/{made.pk}/members/", {"username": "outsider"}),
            api.post(
                f"/api/v1/teams/{made.pk}/members/", {"username": who.username, "manager": True}
            ),
            api.delete(f"/api/v1/teams/{made.pk}/members/bo/"),
            api.patch(f"/api/v1/teams/{made.pk}/", {"name": "mine now"}),
            api.delete(f"/api/v1/teams/{made.pk}/"),
        ]
        assert [r.status_code for r in refused] == [403] * 5
        assert "a manager of team ops or an admin" in refused[0].json()["detail"]
    assert members_of(made) == before and Team.objects.get().name == "ops"

    page = page_for(ana)
    assert page.post(f"/accounts/teams/{made.pk}/", {"username": "outsider"}).status_code == 403
    assert page.post(f"/accounts/teams/{made.pk}/members/{bo.pk}/remove/").status_code == 403
    assert members_of(made) == before


def test_a_member_may_leave_but_the_last_manager_may_not() -> None:
    lead = user("lead")
    ana = member("ana")
    made = team("ops", manager=lead, members=[ana])
    answer = api_for(lead).delete(f"/api/v1/teams/{made.pk}/members/lead/")
    assert answer.status_code == 400
    assert "lead is the team's last manager" in str(answer.json()["username"])
    answer = api_for(lead).post(
        f"/api/v1/teams/{made.pk}/members/", {"username": "lead", "manager": False}
    )
    assert answer.status_code == 400 and "manager" in answer.json()
    assert api_for(ana).delete(f"/api/v1/teams/{made.pk}/members/ana/").status_code == 200
    assert members_of(made) == {"lead": True}


def test_an_admin_manages_any_team() -> None:
    made = team("ops", manager=user("lead"))
    member("ana")
    api = api_for(user("root", role="admin"))
    assert api.post(f"/api/v1/teams/{made.pk}/members/", {"username": "ana"}).status_code == 200
    assert api.patch(f"/api/v1/teams/{made.pk}/", {"name": "platform"}).json()["name"] == "platform"
    assert api.delete(f"/api/v1/teams/{made.pk}/").status_code == 204
    assert not Team.objects.exists() and not TeamMembership.objects.exists()


def test_every_role_reads_teams_and_their_members() -> None:
    made = team("ops", manager=user("lead"), members=[member("ana")])
    listed = api_for(user("vic", role="viewer")).get("/api/v1/teams/").json()["results"]
    assert [(t["id"], [m["username"] for m in t["members"]]) for t in listed] == [
        (made.pk, ["lead", "ana"])
    ]
    assert api_for(User.objects.create_user("norole")).get("/api/v1/teams/").status_code == 403


def test_the_team_pages_list_teams_and_let_a_manager_add_and_remove_members() -> None:
    lead = user("lead")
    page = page_for(lead)
    answer = page.post("/accounts/teams/", {"name": "ops", "description": "on call"})
    made = Team.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/accounts/teams/{made.pk}/"
    listing = page.get("/accounts/teams/").content.decode()
    assert "ops" in listing and "on call" in listing and "yours" in listing

    ana = member("ana")
    assert page.post(f"/accounts/teams/{made.pk}/", {"username": "ana"}).status_code == 302
    bad = page.post(f"/accounts/teams/{made.pk}/", {"username": "nobody"})
    assert bad.status_code == 400 and "username: no user is named" in bad.content.decode()
    html = page.get(f"/accounts/teams/{made.pk}/").content.decode()
    assert "Remove ana" in html and "Add a member" in html
    assert page.post(f"/accounts/teams/{made.pk}/members/{ana.pk}/remove/").status_code == 302
    assert members_of(made) == {"lead": True}

    viewer_html = page_for(member("vic")).get(f"/accounts/teams/{made.pk}/").content.decode()
    assert "Add a member" not in viewer_html and "Remove" not in viewer_html
    assert "New team" not in page_for(member("vic2")).get("/accounts/teams/").content.decode()
    assert page_for(member("vic3")).post(f"/accounts/teams/{made.pk}/delete/").status_code == 403
    assert page.post(f"/accounts/teams/{made.pk}/delete/").status_code == 302
    assert not Team.objects.exists()


def test_the_admin_lists_teams_and_their_members() -> None:
    made = team("ops", manager=user("lead"), members=[member("ana")])
    root = Client()
    root.force_login(User.objects.create_superuser("root", password="x"))
    assert "ops" in root.get("/admin/accounts/team/").content.decode()
    html = root.get(f"/admin/accounts/team/{made.pk}/change/").content.decode()
    assert "lead" in html and "ana" in html


def _admin_membership_post(made: Team, rows: list[tuple[TeamMembership, bool, bool]]) -> dict:
    """The admin's change form of `made` as a browser posts it: each membership with its
    manager box and delete box as given."""
    data: dict[str, object] = {
        "name": made.name,
        "description": made.description,
        "memberships-TOTAL_FORMS": str(len(rows)),
        "memberships-INITIAL_FORMS": str(len(rows)),
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }
    for index, (membership, manager, delete) in enumerate(rows):
        prefix = f"memberships-{index}-"
        data[prefix + "id"] = str(membership.pk)
        data[prefix + "team"] = str(made.pk)
        data[prefix + "user"] = str(membership.user_id)
        if manager:
            data[prefix + "manager"] = "on"
        if delete:
            data[prefix + "DELETE"] = "on"
    return data


def test_the_admin_cannot_leave_a_team_with_members_and_no_manager() -> None:
    made = team("ops", manager=user("lead"), members=[member("ana")])
    lead = made.memberships.get(user__username="lead")
    ana = made.memberships.get(user__username="ana")
    root = Client()
    root.force_login(User.objects.create_superuser("root", password="x"))
    url = f"/admin/accounts/team/{made.pk}/change/"
    for rows in (
        [(lead, False, False), (ana, False, False)],  # the last manager's role taken away
        [(lead, True, True), (ana, False, False)],  # the last manager removed
    ):
        refused = root.post(url, _admin_membership_post(made, rows))
        assert refused.status_code == 200  # the form again, with the error
        assert "needs an active manager" in refused.content.decode()
        assert members_of(made) == {"lead": True, "ana": False}
    handed_over = root.post(
        url, _admin_membership_post(made, [(lead, True, True), (ana, True, False)])
    )
    assert handed_over.status_code == 302
    assert members_of(made) == {"ana": True}
    emptied = root.post(url, _admin_membership_post(made, [(ana, True, True)]))
    assert emptied.status_code == 302  # no members left: nobody to manage
    assert members_of(made) == {}
