"""Evaluator groups through the API, the admin and the team's groups page: managers create,
rename and delete them and change their members (only members of the team); viewers read;
evaluators may do neither; another team's group is a 404; bad input is a 400 that writes
nothing; a member who leaves the team leaves its groups."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evalplatform.accounts.models import AuditEvent, Membership, TeamGroup

GROUPS = "/api/groups"


def members_of(name):
    return sorted(TeamGroup.objects.get(name=name).members.values_list("username", flat=True))


@pytest.mark.django_db
def test_a_manager_creates_renames_fills_and_deletes_a_group(api, team_a, people_named):
    manager = api(people_named["manager"])
    made = manager.post(
        GROUPS, {"name": "Linguists", "members": ["eve", people_named["ed"].pk]}, format="json"
    )
    assert made.status_code == 201, made.json()
    group = made.json()
    assert group | {"id": 0, "created_at": ""} == {
        "id": 0,
        "team": "team-a",
        "name": "Linguists",
        "members": [
            {"id": people_named["ed"].pk, "username": "ed"},
            {"id": people_named["eve"].pk, "username": "eve"},
        ],
        "created_at": "",
    }
    url = f"{GROUPS}/{group['id']}"
    renamed = manager.patch(url, {"name": "Raters"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Raters"
    assert manager.delete(f"{url}/members/eve").status_code == 204
    assert manager.delete(f"{url}/members/eve").status_code == 404  # not in it any more
    assert members_of("Raters") == ["ed"]
    added = manager.post(f"{url}/members", {"members": ["viewer", "eve"]}, format="json")
    assert added.status_code == 200, added.json()
    assert [m["username"] for m in added.json()["members"]] == ["ed", "eve", "viewer"]
    listed = api(people_named["viewer"]).get(GROUPS, {"team": "team-a"}).json()["results"]
    assert [g["name"] for g in listed] == ["Raters"]
    assert manager.delete(url).status_code == 204
    assert not TeamGroup.objects.exists()
    assert list(
        AuditEvent.objects.filter(action__startswith="accounts.group")
        .order_by("pk")
        .values_list("action", flat=True)
    ) == [
        "accounts.group.create",
        "accounts.group.rename",
        "accounts.group.members.remove",
        "accounts.group.members.add",
        "accounts.group.delete",
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": 7}, "name"),
        ({"name": "Taken"}, "name"),
        ({"name": "G", "members": ["nobody"]}, "members.0"),
        ({"name": "G", "members": ["outsider"]}, "members.0"),  # another team's member
        ({"name": "G", "members": ["eve", "eve"]}, "members.1"),
        ({"name": "G", "members": "eve"}, "members"),
        ({"name": "G", "team": "team-b"}, "team"),
    ],
)
def test_bad_groups_are_400_and_write_nothing(api, team_a, people_named, body, field):
    manager = api(people_named["manager"])
    assert manager.post(GROUPS, {"name": "Taken"}, format="json").status_code == 201
    response = manager.post(GROUPS, body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"], response.json()
    assert list(TeamGroup.objects.values_list("name", flat=True)) == ["Taken"]
    group = TeamGroup.objects.get()
    bad_add = manager.post(f"{GROUPS}/{group.pk}/members", {"members": ["outsider"]}, format="json")
    assert bad_add.status_code == 400 and "members.0" in bad_add.json()["errors"]
    assert manager.patch(f"{GROUPS}/{group.pk}", {"name": ""}, format="json").status_code == 400
    assert members_of("Taken") == []


@pytest.mark.django_db
def test_who_may_see_and_manage_groups(api, team_a, team_b, people_named, member):
    group = TeamGroup.objects.create(team=team_a, name="Night shift")
    group.members.add(people_named["eve"])
    url = f"{GROUPS}/{group.pk}"
    outsider = api(people_named["outsider"])
    # Another team's group is a 404 whatever is asked.
    assert outsider.get(url).status_code == 404
    assert outsider.patch(url, {"name": "Mine"}, format="json").status_code == 404
    assert outsider.delete(url).status_code == 404
    assert (
        outsider.post(f"{url}/members", {"members": ["outsider"]}, format="json").status_code == 404
    )
    assert outsider.delete(f"{url}/members/eve").status_code == 404
    assert outsider.get(GROUPS).json()["results"] == []
    # Evaluators may not even list groups; viewers see but may not change them.
    evaluator = api(people_named["eve"])
    assert evaluator.get(GROUPS).status_code == 403
    assert evaluator.post(GROUPS, {"name": "Mine"}, format="json").status_code == 403
    assert evaluator.delete(f"{url}/members/eve").status_code == 403
    viewer = api(people_named["viewer"])
    assert viewer.get(url).status_code == 200
    assert viewer.patch(url, {"name": "Mine"}, format="json").status_code == 403
    assert viewer.delete(url).status_code == 403
    assert viewer.post(GROUPS, {"team": "team-a", "name": "Mine"}, format="json").status_code == 403
    assert members_of("Night shift") == ["eve"]
    # A member who leaves the team leaves its groups.
    Membership.objects.get(user=people_named["eve"], team=team_a).delete()
    assert members_of("Night shift") == []


@pytest.mark.django_db
def test_listing_groups_costs_the_same_queries_for_one_or_many(api, team_a, people_named):
    manager = api(people_named["manager"])

    def cost():
        with CaptureQueriesContext(connection) as queries:
            assert manager.get(GROUPS).status_code == 200
        return len(queries)

    manager.post(GROUPS, {"name": "One", "members": ["eve"]}, format="json")
    cost()
    one = cost()
    for name in ("Two", "Three"):
        manager.post(GROUPS, {"name": name, "members": ["eve", "ed"]}, format="json")
    assert cost() == one


@pytest.mark.django_db
def test_the_groups_page_and_the_admin(client, team_a, people_named):
    client.force_login(people_named["manager"])
    page = f"/teams/{team_a.slug}/groups"
    assert client.post(page, {"action": "create", "name": "Linguists"}).status_code == 302
    group = TeamGroup.objects.get()
    client.post(page, {"action": "add", "group": group.pk, "member": [people_named["eve"].pk]})
    assert members_of("Linguists") == ["eve"]
    shown = client.get(page).content.decode()
    assert "Linguists" in shown and "eve" in shown
    duplicate = client.post(page, {"action": "create", "name": "Linguists"}, follow=True)
    assert "group of that name" in duplicate.content.decode()
    client.post(page, {"action": "remove", "group": group.pk, "member": people_named["eve"].pk})
    assert members_of("Linguists") == []
    assert "Evaluator groups" in client.get("/").content.decode()
    # The admin lists the team's groups and refuses an outsider as a member.
    assert "Linguists" in client.get("/admin/accounts/teamgroup/").content.decode()
    refused = client.post(
        f"/admin/accounts/teamgroup/{group.pk}/change/",
        {"team": team_a.pk, "name": "Linguists", "members": [people_named["outsider"].pk]},
    )
    assert refused.status_code == 200 and members_of("Linguists") == []
    # Others: a viewer reads the page but may not post; another team's page is a 404.
    client.force_login(people_named["viewer"])
    assert client.get(page).status_code == 200
    assert client.post(page, {"action": "create", "name": "Mine"}).status_code == 403
    client.force_login(people_named["outsider"])
    assert client.get(page).status_code == 404
    assert client.get(f"/admin/accounts/teamgroup/{group.pk}/change/").status_code == 404
