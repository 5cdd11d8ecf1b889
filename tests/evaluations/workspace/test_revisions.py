"""Evaluators revise their earlier answers (history kept, the judgment row holds the latest,
which analytics and exports read), comment on tasks and flag them; managers list the flags.
Through the API and the pages, on the project's databases."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client

from evaluations.analytics.results import fingerprint
from evaluations.models import Assignment, AssignmentStatus, Judgment, JudgmentRevision, TaskFlag
from scenarios import services as scenario_services
from scenarios.models import Task
from tests.helpers.evaluations import make_scenario, open_scenario

EVAL = "/api/evaluations"


def answer_one(client, scenario, answer, **extra):
    task = client.post(f"{EVAL}/scenarios/{scenario.pk}/next")
    assert task.status_code == 200, task.status_code
    body = {"answer": answer, **extra}
    done = client.post(
        f"{EVAL}/assignments/{task.json()['assignment']}/submit", body, format="json"
    )
    assert done.status_code == 201, done.json()
    return done.json()


def export_rows(client, scenario):
    response = client.post(f"/api/scenarios/{scenario.pk}/export/csv")
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.django_db
def test_an_evaluator_revises_an_answer_and_the_history_is_kept(
    api, creator, finished_job, people_crew_and_outsider
):
    scenario = open_scenario(api, creator, finished_job, people_crew_and_outsider["manager"])
    eve = api(people_crew_and_outsider["eve"])
    first = answer_one(eve, scenario, {"winner": "A"}, rationale="first look", time_spent_ms=900)
    second = answer_one(eve, scenario, {"winner": "B"})
    before = fingerprint(scenario)[0]

    mine = eve.get(f"{EVAL}/scenarios/{scenario.pk}/mine").json()["results"]
    assert [j["id"] for j in mine] == [second["id"], first["id"]]  # the latest first
    assert mine[1]["revisions"] == []

    presented = Judgment.objects.get(pk=first["id"]).presented
    body = {"answer": {"winner": "tie"}, "rationale": "on reflection", "comment": "close call"}
    revised = eve.post(f"{EVAL}/judgments/{first['id']}/revise", body, format="json")
    assert revised.status_code == 200, revised.json()
    data = revised.json()
    assert data["payload"] == {"winner": "tie"} and data["comment"] == "close call"
    assert data["revised_at"] is not None
    assert data["revisions"] == [
        {
            "payload": {"winner": "A"},
            "rationale": "first look",
            "comment": "",
            "time_spent_ms": 900,
            "answered_at": first["created_at"],
            "replaced_at": data["revised_at"],
        }
    ]
    # The row analytics and exports read holds the latest answer; the presented order stays.
    row = Judgment.objects.get(pk=first["id"])
    assert row.payload == {"winner": "tie"} and row.rationale == "on reflection"
    assert row.time_spent_ms == 900  # none sent: the time spent stays
    assert row.presented == presented
    assert Judgment.objects.filter(scenario=scenario).count() == 2
    assert fingerprint(scenario)[0] != before  # stored analyses are stale now
    exported = {
        r["judgment_id"]: r for r in export_rows(api(people_crew_and_outsider["manager"]), scenario)
    }
    assert exported[str(first["id"])]["winner"] == "tie"
    assert exported[str(first["id"])]["comment"] == "close call"

    # A second revision: both earlier answers are kept, each with its time.
    again = eve.post(
        f"{EVAL}/judgments/{first['id']}/revise",
        {"answer": {"winner": "B"}, "time_spent_ms": 300},
        format="json",
    ).json()
    assert [r["payload"] for r in again["revisions"]] == [{"winner": "A"}, {"winner": "tie"}]
    assert again["revisions"][1]["answered_at"] == data["revised_at"]
    assert again["time_spent_ms"] == 300 and again["comment"] == ""


@pytest.mark.django_db
def test_revisions_are_checked_like_answers_and_only_the_owner_may(
    api, creator, finished_job, people_crew_and_outsider
):
    rubric = {"dimensions": [{"name": "Clarity", "min": 1, "max": 5}]}
    scenario = open_scenario(
        api,
        creator,
        finished_job,
        people_crew_and_outsider["manager"],
        type="rating",
        config=rubric,
    )
    eve = api(people_crew_and_outsider["eve"])
    mine = answer_one(eve, scenario, {"scores": {"Clarity": 3}})
    url = f"{EVAL}/judgments/{mine['id']}/revise"

    def unchanged():
        row = Judgment.objects.get(pk=mine["id"])
        return row.payload == {"scores": {"Clarity": 3}, "justifications": {}} and (
            row.revised_at is None and not JudgmentRevision.objects.exists()
        )

    for bad, field in (
        ({"answer": {"scores": {"Clarity": 9}}}, "answer.scores.Clarity"),
        ({"answer": "3"}, "answer"),
        ({"answer": {"scores": {"Clarity": 4}}, "comment": "x" * 2001}, "comment"),
        ({"answer": {"scores": {"Clarity": 4}}, "comment": "a\x00b"}, "comment"),
        ({"answer": {"scores": {"Clarity": 4}}, "rationale": 5}, "rationale"),
        ({"answer": {"scores": {"Clarity": 4}}, "time_spent_ms": -1}, "time_spent_ms"),
    ):
        response = eve.post(url, bad, format="json")
        assert response.status_code == 400 and field in response.json()["errors"], bad
        assert unchanged()
    assert eve.post(url, [1], format="json").status_code == 400
    # Someone else's judgment is not there for you: not another evaluator, not a manager,
    # not another team.
    for who in ("ed", "manager", "outsider"):
        response = api(people_crew_and_outsider[who]).post(
            url, {"answer": {"scores": {"Clarity": 4}}}, format="json"
        )
        assert response.status_code == 404, who
    assert eve.post(f"{EVAL}/judgments/999999/revise", {}, format="json").status_code == 404
    assert (
        api(people_crew_and_outsider["ed"])
        .get(f"{EVAL}/scenarios/{scenario.pk}/mine")
        .json()["results"]
        == []
    )
    assert (
        api(people_crew_and_outsider["outsider"])
        .get(f"{EVAL}/scenarios/{scenario.pk}/mine")
        .status_code
        == 404
    )
    assert unchanged()
    # Closed: answers cannot change any more.
    scenario_services.scenario_close(user=people_crew_and_outsider["manager"], scenario=scenario)
    closed = eve.post(url, {"answer": {"scores": {"Clarity": 4}}}, format="json")
    assert closed.status_code == 409 and unchanged()


@pytest.mark.django_db(transaction=True)
def test_analytics_read_the_revised_answer(api, people_crew_and_outsider, team_a):
    scenario = make_scenario(people_crew_and_outsider, team_a, "comparison", {"ties": True})
    scenario = scenario_services.scenario_open(
        user=people_crew_and_outsider["manager"], scenario=scenario
    )
    eve = api(people_crew_and_outsider["eve"])
    answered = []
    while (task := eve.post(f"{EVAL}/scenarios/{scenario.pk}/next")).status_code == 200:
        done = eve.post(
            f"{EVAL}/assignments/{task.json()['assignment']}/submit",
            {"answer": {"winner": "A"}},
            format="json",
        )
        answered.append(done.json()["id"])
    url = f"/api/scenarios/{scenario.pk}/analytics?raters=humans&resamples=0"
    name = people_crew_and_outsider["eve"].username

    def first_shown_share():
        return (
            api(people_crew_and_outsider["viewer"])
            .get(url)
            .json()["position_bias"]["by_rater"][name]["share"]
        )

    assert first_shown_share() == 1.0
    revised = eve.post(
        f"{EVAL}/judgments/{answered[0]}/revise", {"answer": {"winner": "B"}}, format="json"
    )
    assert revised.status_code == 200
    assert first_shown_share() < 1.0


@pytest.mark.django_db
def test_comments_with_answers(api, creator, finished_job, people_crew_and_outsider):
    scenario = open_scenario(api, creator, finished_job, people_crew_and_outsider["manager"])
    eve = api(people_crew_and_outsider["eve"])
    task = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    url = f"{EVAL}/assignments/{task['assignment']}/submit"
    for bad in ("x" * 2001, "nul\x00", 12):
        response = eve.post(url, {"answer": {"winner": "A"}, "comment": bad}, format="json")
        assert response.status_code == 400 and "comment" in response.json()["errors"]
    assert not Judgment.objects.exists()
    done = eve.post(
        url, {"answer": {"winner": "A"}, "comment": "B is cut off mid-sentence."}, format="json"
    )
    assert done.status_code == 201 and done.json()["comment"] == "B is cut off mid-sentence."
    listed = (
        api(people_crew_and_outsider["manager"])
        .get(f"{EVAL}/judgments?scenario={scenario.pk}")
        .json()
    )
    assert listed["results"][0]["comment"] == "B is cut off mid-sentence."
    page = (
        _browser(people_crew_and_outsider["manager"])
        .get(f"/scenarios/{scenario.pk}")
        .content.decode()
    )
    assert "B is cut off mid-sentence." in page


def _browser(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_flagging_gives_the_task_back_and_managers_list_the_flags(
    api, creator, finished_job, people_crew_and_outsider
):
    scenario = open_scenario(
        api, creator, finished_job, people_crew_and_outsider["manager"], overlap=1
    )
    eve = api(people_crew_and_outsider["eve"])
    task = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    url = f"{EVAL}/assignments/{task['assignment']}/flag"
    assignment = Assignment.objects.get(pk=task["assignment"])
    for bad, field in (
        ({"reason": "boring"}, "reason"),
        ({}, "reason"),
        ({"reason": "broken", "note": "x" * 2001}, "note"),
        ({"reason": "broken", "note": "a\x00"}, "note"),
    ):
        response = eve.post(url, bad, format="json")
        assert response.status_code == 400 and field in response.json()["errors"], bad
    assert not TaskFlag.objects.exists()
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.RESERVED
    # Another evaluator cannot flag your task.
    assert (
        api(people_crew_and_outsider["ed"])
        .post(url, {"reason": "broken"}, format="json")
        .status_code
        == 404
    )

    flagged = eve.post(url, {"reason": "broken", "note": "B is empty."}, format="json")
    assert flagged.status_code == 201, flagged.json()
    assert flagged.json()["reason"] == "broken"
    assert flagged.json()["evaluator"] == people_crew_and_outsider["eve"].username
    # Given back like a skip: the place is free for others, and never handed to her again.
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.SKIPPED
    assert Task.objects.get(pk=assignment.task_id).taken == 0
    nxt = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    assert nxt["assignment"] != task["assignment"]
    again = eve.post(url, {"reason": "unclear"}, format="json")
    assert again.status_code == 409 and TaskFlag.objects.count() == 1

    # Flagging an answered task keeps the answer.
    answered = eve.post(
        f"{EVAL}/assignments/{nxt['assignment']}/submit", {"answer": {"winner": "A"}}, format="json"
    ).json()
    later = eve.post(
        f"{EVAL}/assignments/{nxt['assignment']}/flag", {"reason": "offensive"}, format="json"
    )
    assert later.status_code == 201 and Judgment.objects.filter(pk=answered["id"]).exists()

    listed = api(people_crew_and_outsider["manager"]).get(f"{EVAL}/scenarios/{scenario.pk}/flags")
    assert listed.status_code == 200
    flags = listed.json()["results"]
    assert [f["reason"] for f in flags] == ["offensive", "broken"]
    assert flags[1]["note"] == "B is empty." and flags[1]["task"] == assignment.task_id
    assert flags[1]["evaluator"] == people_crew_and_outsider["eve"].username and flags[1]["item_id"]
    assert (
        api(people_crew_and_outsider["viewer"])
        .get(f"{EVAL}/scenarios/{scenario.pk}/flags")
        .status_code
        == 200
    )
    assert api(people_crew_and_outsider["eve"]).get(
        f"{EVAL}/scenarios/{scenario.pk}/flags"
    ).status_code in (
        403,
        404,
    )
    outsider = api(people_crew_and_outsider["outsider"]).get(
        f"{EVAL}/scenarios/{scenario.pk}/flags"
    )
    assert outsider.status_code == 404

    # The exports: the flag on the answered task's row (columns after the judges', before
    # the adjudicated answer), every flag in the JSON.
    rows = export_rows(api(people_crew_and_outsider["manager"]), scenario)
    assert list(rows[0])[-3:] == ["comment", "flag", "adjudicated"]
    assert rows[0]["flag"] == "offensive"
    response = api(people_crew_and_outsider["manager"]).post(
        f"/api/scenarios/{scenario.pk}/export/json"
    )
    exported = json.loads(b"".join(response.streaming_content))
    assert sorted(f["reason"] for f in exported["flags"]) == ["broken", "offensive"]
    # The manager's page lists them.
    page = (
        _browser(people_crew_and_outsider["manager"])
        .get(f"/scenarios/{scenario.pk}")
        .content.decode()
    )
    assert "B is empty." in page and "Offensive" in page


@pytest.mark.django_db
def test_the_pages_go_back_revise_and_flag(api, creator, finished_job, people_crew_and_outsider):
    labels = {"labels": ["good", "bad"], "multiple": True, "free_text": True}
    scenario = open_scenario(
        api,
        creator,
        finished_job,
        people_crew_and_outsider["manager"],
        type="labeling",
        config=labels,
    )
    eve = _browser(people_crew_and_outsider["eve"])
    first_url = eve.get(f"/evaluate/scenarios/{scenario.pk}")["Location"]
    html = eve.get(first_url).content.decode()
    assert "data-back" not in html  # nothing answered yet: nowhere to go back to
    assert 'aria-keyshortcuts="Enter"' in html and 'id="shortcuts"' in html
    eve.post(first_url, {"labels": ["good", "bad"], "text": "mixed", "comment": "long one"})
    judgment = Judgment.objects.get()
    assert judgment.comment == "long one"

    second_url = eve.get(f"/evaluate/scenarios/{scenario.pk}")["Location"]
    html = eve.get(second_url).content.decode()
    assert f'href="/evaluate/judgments/{judgment.pk}" data-back' in html
    revise_url = f"/evaluate/judgments/{judgment.pk}"
    page = eve.get(revise_url).content.decode()
    # The earlier answer is filled in.
    assert 'value="good" data-digit="1" aria-keyshortcuts="1" checked' in page
    assert 'value="bad" data-digit="2" aria-keyshortcuts="2" checked' in page
    assert ">mixed</textarea>" in page and ">long one</textarea>" in page
    assert "Save the revision" in page and "data-skip" not in page
    bad = eve.post(revise_url, {"labels": "nope"})
    assert bad.status_code == 400 and not JudgmentRevision.objects.exists()
    done = eve.post(revise_url, {"labels": "bad"})
    assert done.status_code == 302 and done["Location"] == f"/evaluate/scenarios/{scenario.pk}"
    judgment.refresh_from_db()
    assert judgment.payload == {"labels": ["bad"], "text": ""} and judgment.comment == ""
    assert JudgmentRevision.objects.get().payload == {"labels": ["good", "bad"], "text": "mixed"}
    # Someone else's judgment is a 404.
    assert _browser(people_crew_and_outsider["ed"]).get(revise_url).status_code == 404

    # Flag the current task from its page: it is given back and the next one comes.
    held = Assignment.objects.get(
        evaluator=people_crew_and_outsider["eve"], status=AssignmentStatus.RESERVED
    )
    flagged = eve.post(f"/evaluate/tasks/{held.pk}/flag", {"reason": "unclear", "note": "?"})
    assert flagged.status_code == 302
    assert TaskFlag.objects.get().reason == "unclear"
    held.refresh_from_db()
    assert held.status == AssignmentStatus.SKIPPED
    refused = eve.post(f"/evaluate/tasks/{held.pk}/flag", {"reason": "unclear"})
    assert refused.status_code == 302 and TaskFlag.objects.count() == 1

    scenario_services.scenario_close(user=people_crew_and_outsider["manager"], scenario=scenario)
    assert eve.get(revise_url).status_code == 409
