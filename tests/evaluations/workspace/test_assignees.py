"""Who evaluates a scenario: assignees (everyone who may submit by default; only the chosen
members, and invited guests, once some are chosen), per-evaluator quotas, through the API,
the queue, "next", "submit" and the scenario page; bad inputs are 400s that change nothing;
one evaluator's concurrent requests never pass their quota."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from evalplatform.accounts.models import AuditEvent, TeamGroup
from evalplatform.accounts.roles import Role
from evaluations.invitations import services as invitations
from evaluations.models import Assignment, AssignmentStatus, Judgment
from scenarios.models import Scenario, ScenarioAssignee, ScenarioAssigneeGroup
from tests.helpers.evaluations import labeling_scenario, work

EVAL = "/api/evaluations"


def put_assignees(api, user, scenario, body):
    return api(user).put(f"/api/scenarios/{scenario.pk}/assignees", body, format="json")


def queue_ids(client):
    return [row["id"] for row in client.get(f"{EVAL}/scenarios").json()]


@pytest.mark.django_db
def test_assignees_alone_see_evaluate_and_answer_the_scenario(
    api, client, team_a, people_named_and_stranger
):
    scenario = labeling_scenario(people_named_and_stranger["manager"], team_a)
    eve, ed = api(people_named_and_stranger["eve"]), api(people_named_and_stranger["ed"])
    assert api(people_named_and_stranger["manager"]).get(
        f"/api/scenarios/{scenario.pk}/assignees"
    ).json() == {
        "default_quota": None,
        "everyone": True,
        "assignees": [],
        "groups": [],
    }
    # ed holds a task from before the assignment.
    held = ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"]
    guest = api(people_named_and_stranger["stranger"])  # of team B, invited to this scenario
    _, link = invitations.invite(
        user=people_named_and_stranger["manager"],
        scenario=scenario,
        emails=["guest@example.org"],
        note="",
        link_for=lambda token: token,
    )[0]
    invitations.accept(user=people_named_and_stranger["stranger"], token=link)

    response = put_assignees(
        api, people_named_and_stranger["manager"], scenario, [{"user": "eve", "quota": None}]
    )
    assert response.status_code == 200, response.json()
    assert response.json()["assignees"] == [
        {"user": people_named_and_stranger["eve"].pk, "username": "eve", "quota": None}
    ]
    assert response.json()["everyone"] is False
    assert scenario.pk in queue_ids(eve) and scenario.pk in queue_ids(guest)
    assert scenario.pk not in queue_ids(ed)
    assert ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 404
    assert ed.get(f"{EVAL}/assignments/{held}").status_code == 404
    refused = ed.post(
        f"{EVAL}/assignments/{held}/submit", {"answer": {"labels": ["good"]}}, format="json"
    )
    assert refused.status_code == 404 and not Judgment.objects.exists()
    client.force_login(people_named_and_stranger["ed"])
    assert client.get(f"/evaluate/scenarios/{scenario.pk}").status_code == 404
    assert eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 200
    assert guest.post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 200
    event = AuditEvent.objects.get(action="scenario.assignees.set")
    assert event.detail["assignees"] == {"eve": None}

    # No assignees: every evaluator of the team again.
    assert (
        put_assignees(api, people_named_and_stranger["manager"], scenario, []).json()["everyone"]
        is True
    )
    assert scenario.pk in queue_ids(ed)
    assert ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"] == held


@pytest.mark.django_db
def test_quotas_stop_next_and_cap_the_progress(api, team_a, people_named_and_stranger):
    scenario = labeling_scenario(people_named_and_stranger["manager"], team_a, tasks=10, overlap=2)
    body = {
        "default_quota": 3,
        "assignees": [
            {"user": people_named_and_stranger["eve"].pk, "quota": 5},
            {"user": "ed", "quota": None},
        ],
    }
    response = put_assignees(api, people_named_and_stranger["manager"], scenario, body)
    assert response.status_code == 200, response.json()
    assert response.json()["default_quota"] == 3
    eve, ed = api(people_named_and_stranger["eve"]), api(people_named_and_stranger["ed"])
    assert eve.get(f"{EVAL}/scenarios").json()[0]["total"] == 5
    assert ed.get(f"{EVAL}/scenarios").json()[0]["total"] == 3

    # A reservation counts against the quota: asking again resumes it.
    first = ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"]
    assert ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"] == first
    assert len(work(ed, scenario)) == 3
    assert len(work(eve, scenario)) == 5
    assert ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 204
    assert ed.get(f"{EVAL}/scenarios").json()[0] | {"id": 0} == {
        "id": 0,
        "team": "team-a",
        "name": "Labels",
        "type": "labeling",
        "done": 3,
        "total": 3,
        "skipped": 0,
        "left": 0,
    }
    assert Judgment.objects.filter(evaluator=people_named_and_stranger["ed"]).count() == 3
    # A lower quota never hides what is done; a higher one hands more.
    put_assignees(api, people_named_and_stranger["manager"], scenario, [{"user": "ed", "quota": 1}])
    assert ed.get(f"{EVAL}/scenarios").json()[0] | {"id": 0} == {
        "id": 0,
        "team": "team-a",
        "name": "Labels",
        "type": "labeling",
        "done": 3,
        "total": 3,
        "skipped": 0,
        "left": 0,
    }
    put_assignees(api, people_named_and_stranger["manager"], scenario, [{"user": "ed", "quota": 4}])
    assert len(work(ed, scenario)) == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([{"user": "nobody"}], "assignees.0.user"),
        ([{"user": "stranger"}], "assignees.0.user"),  # another team's member
        ([{"user": "outsider"}], "assignees.0.user"),
        ([{"user": "viewer"}], "assignees.0.user"),  # may not submit
        ([{"user": "eve"}, {"user": "eve"}], "assignees.1.user"),
        ([{"user": "eve", "quota": 10**12}], "assignees.0.quota"),
        ([{"user": "eve", "quota": 0}], "assignees.0.quota"),
        ([{"user": "eve", "quota": -3}], "assignees.0.quota"),
        ([{"user": "eve", "quota": 2.5}], "assignees.0.quota"),
        ([{"user": "eve", "quota": "NaN"}], "assignees.0.quota"),
        ([{"user": "eve", "quota": True}], "assignees.0.quota"),
        ([{"user": "eve", "role": "x"}], "assignees.0"),
        (["eve"], "assignees.0"),
        ({"assignees": "eve"}, "assignees"),
        ({"assignees": [], "default_quota": 2**40}, "default_quota"),
        ({"assignees": [], "colour": 1}, "non_field_errors"),
    ],
)
def test_bad_assignees_are_400_and_change_nothing(
    api, team_a, people_named_and_stranger, body, field
):
    scenario = labeling_scenario(people_named_and_stranger["manager"], team_a)
    put_assignees(
        api,
        people_named_and_stranger["manager"],
        scenario,
        {"assignees": [{"user": "ed", "quota": 2}]},
    )
    response = put_assignees(api, people_named_and_stranger["manager"], scenario, body)
    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"], response.json()
    assert list(ScenarioAssignee.objects.values_list("user__username", "quota")) == [("ed", 2)]
    assert Scenario.objects.get(pk=scenario.pk).default_quota is None


@pytest.mark.django_db
def test_who_may_manage_assignees(api, team_a, people_named_and_stranger):
    scenario = labeling_scenario(people_named_and_stranger["manager"], team_a)
    url = f"/api/scenarios/{scenario.pk}/assignees"
    assert api(people_named_and_stranger["outsider"]).get(url).status_code == 404
    assert (
        put_assignees(api, people_named_and_stranger["outsider"], scenario, []).status_code == 404
    )
    assert (
        put_assignees(
            api, people_named_and_stranger["eve"], scenario, [{"user": "eve"}]
        ).status_code
        == 404
    )
    assert (
        put_assignees(
            api, people_named_and_stranger["viewer"], scenario, [{"user": "eve"}]
        ).status_code
        == 403
    )
    assert not ScenarioAssignee.objects.exists()


@pytest.mark.django_db
def test_the_scenario_page_chooses_who_evaluates(client, team_a, people_named_and_stranger):
    scenario = labeling_scenario(people_named_and_stranger["manager"], team_a)
    client.force_login(people_named_and_stranger["manager"])
    page = client.get(f"/scenarios/{scenario.pk}").content.decode()
    assert "Who evaluates" in page and 'name="quota-' in page
    response = client.post(
        f"/scenarios/{scenario.pk}/assignees",
        {
            "assignee": [people_named_and_stranger["eve"].pk],
            f"quota-{people_named_and_stranger['eve'].pk}": "4",
            "default_quota": "2",
        },
    )
    assert response.status_code == 302
    assert list(ScenarioAssignee.objects.values_list("user__username", "quota")) == [("eve", 4)]
    assert Scenario.objects.get(pk=scenario.pk).default_quota == 2
    bad = client.post(
        f"/scenarios/{scenario.pk}/assignees",
        {
            "assignee": [people_named_and_stranger["eve"].pk],
            f"quota-{people_named_and_stranger['eve'].pk}": "99999999999",
        },
        follow=True,
    )
    assert "Evaluator #1 quota" in bad.content.decode()  # in words, not the API's key
    assert "assignees.0.quota" not in bad.content.decode()
    assert list(ScenarioAssignee.objects.values_list("user__username", "quota")) == [("eve", 4)]


@pytest.mark.django_db(transaction=True)
def test_one_evaluators_concurrent_requests_never_pass_the_quota(api, team_a, member):
    manager = member(team_a, Role.MANAGER)
    eve = member(team_a, Role.EVALUATOR, username="eve")
    scenario = labeling_scenario(manager, team_a, tasks=12)
    put_assignees(api, manager, scenario, [{"user": "eve", "quota": 3}])
    barrier = threading.Barrier(6)
    failures = []

    def ask():
        client = api(eve)
        try:
            barrier.wait(10)
            for _ in range(20):
                response = client.post(f"{EVAL}/scenarios/{scenario.pk}/next")
                if response.status_code == 204:
                    return
                assert response.status_code == 200, response.content
                stored = client.post(
                    f"{EVAL}/assignments/{response.json()['assignment']}/submit",
                    {"answer": {"labels": ["good"]}},
                    format="json",
                )
                # Another request of hers answered it first.
                assert stored.status_code in (201, 409), stored.content
        except Exception as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    assert Judgment.objects.filter(evaluator=eve).count() == 3
    assert not Assignment.objects.filter(status=AssignmentStatus.RESERVED).exists()


@pytest.mark.django_db
def test_a_group_evaluates_as_it_is_when_its_members_ask(
    api, client, team_a, people_named_and_stranger
):
    scenario = labeling_scenario(people_named_and_stranger["manager"], team_a, tasks=6, overlap=2)
    group = TeamGroup.objects.create(team=team_a, name="Linguists")
    group.members.add(people_named_and_stranger["eve"])
    body = {"groups": ["Linguists"], "default_quota": 2}
    response = put_assignees(api, people_named_and_stranger["manager"], scenario, body)
    assert response.status_code == 200, response.json()
    assert response.json() | {"assignees": None} == {
        "default_quota": 2,
        "everyone": False,
        "assignees": None,
        "groups": [{"group": group.pk, "name": "Linguists", "members": 1}],
    }
    eve, ed = api(people_named_and_stranger["eve"]), api(people_named_and_stranger["ed"])
    # A member of the group is an assignee with the default quota; anyone else is not.
    assert scenario.pk in queue_ids(eve) and scenario.pk not in queue_ids(ed)
    assert ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 404
    client.force_login(people_named_and_stranger["ed"])
    assert client.get(f"/evaluate/scenarios/{scenario.pk}").status_code == 404
    assert "Labels" not in client.get("/").content.decode()
    held = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"]
    assert len(work(eve, scenario)) == 2  # the held task and one more: her quota
    # Joining the group makes ed an assignee at once; his own quota overrides the default.
    group.members.add(people_named_and_stranger["ed"])
    assert scenario.pk in queue_ids(ed)
    client.force_login(people_named_and_stranger["ed"])
    assert "Labels" in client.get("/").content.decode()  # his open tasks
    assert len(work(ed, scenario)) == 2
    put_assignees(
        api,
        people_named_and_stranger["manager"],
        scenario,
        {"assignees": [{"user": "ed", "quota": 3}]},
    )
    assert ScenarioAssigneeGroup.objects.filter(scenario=scenario).count() == 1  # kept
    assert len(work(ed, scenario)) == 1
    # Leaving the group revokes: eve's own task is a 404 now, and so is asking for more.
    group.members.remove(people_named_and_stranger["eve"])
    assert eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 404
    assert eve.get(f"{EVAL}/assignments/{held}").status_code == 404
    assert scenario.pk not in queue_ids(eve)
    # A group with no members opens the scenario to no one (not to everyone).
    put_assignees(
        api,
        people_named_and_stranger["manager"],
        scenario,
        {"assignees": [], "groups": ["Linguists"]},
    )
    group.members.clear()
    assert scenario.pk not in queue_ids(eve) and scenario.pk not in queue_ids(ed)
    # While a scenario is assigned to it, the group cannot be deleted.
    deleted = api(people_named_and_stranger["manager"]).delete(f"/api/groups/{group.pk}")
    assert deleted.status_code == 409 and TeamGroup.objects.filter(pk=group.pk).exists()
    assert put_assignees(
        api, people_named_and_stranger["manager"], scenario, {"groups": []}
    ).json()["everyone"]
    assert (
        api(people_named_and_stranger["manager"]).delete(f"/api/groups/{group.pk}").status_code
        == 204
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "groups", [["Nope"], ["Theirs"], ["Linguists", "Linguists"], "Linguists", [True]]
)
def test_bad_groups_are_400_and_change_nothing(
    api, team_a, team_b, people_named_and_stranger, groups
):
    scenario = labeling_scenario(people_named_and_stranger["manager"], team_a)
    TeamGroup.objects.create(team=team_a, name="Linguists")
    TeamGroup.objects.create(team=team_b, name="Theirs")
    response = put_assignees(
        api, people_named_and_stranger["manager"], scenario, {"groups": groups}
    )
    assert response.status_code == 400, response.json()
    assert any(key.startswith("groups") for key in response.json()["errors"])
    assert not ScenarioAssigneeGroup.objects.exists()


@pytest.mark.django_db
def test_the_scenario_page_chooses_groups(client, team_a, people_named_and_stranger):
    scenario = labeling_scenario(people_named_and_stranger["manager"], team_a)
    group = TeamGroup.objects.create(team=team_a, name="Linguists")
    client.force_login(people_named_and_stranger["manager"])
    page = client.get(f"/scenarios/{scenario.pk}").content.decode()
    assert 'name="group"' in page and "Linguists" in page
    response = client.post(f"/scenarios/{scenario.pk}/assignees", {"group": [group.pk]})
    assert response.status_code == 302
    assert list(ScenarioAssigneeGroup.objects.values_list("group__name", flat=True)) == [
        "Linguists"
    ]
    client.post(f"/scenarios/{scenario.pk}/assignees", {})
    assert not ScenarioAssigneeGroup.objects.exists()
