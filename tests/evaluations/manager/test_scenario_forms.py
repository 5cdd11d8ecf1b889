"""The scenario manager's forms: create a scenario from an upload, edit a draft (the
rubric, the label set, ties; never the pair design), with errors shown by field and
nothing changed by a bad form."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from scenarios.models import Scenario, ScenarioStatus

ROWS = [
    {"item_id": "i1", "variant_id": "a", "content": "First", "model": "m1"},
    {"item_id": "i1", "variant_id": "b", "content": "Second", "model": "m2"},
    {"item_id": "i2", "variant_id": "a", "content": "Third", "model": "m1"},
    {"item_id": "i2", "variant_id": "b", "content": "Fourth", "model": "m2"},
]


def browser(user):
    client = Client()
    client.force_login(user)
    return client


def upload(rows=ROWS, name="rows.jsonl"):
    return SimpleUploadedFile(name, "\n".join(json.dumps(r) for r in rows).encode())


@pytest.mark.django_db
def test_a_rating_scenario_from_an_upload_then_its_rubric_edited(people_authors):
    client = browser(people_authors["creator"])
    assert "New from an upload" in client.get("/scenarios/").content.decode()
    created = client.post(
        "/scenarios/new",
        {
            "team": "team-a",
            "type": "rating",
            "name": "Helpfulness",
            "overlap": "2",
            "blind": "1",
            "dim-0-name": "Helpful",
            "dim-0-min": "1",
            "dim-0-max": "7",
            "dim-0-anchors": "1=Useless; 7=Perfect",
            "dim-0-justification": "1",
            "dim-1-name": "",
            "file": upload(),
        },
    )
    scenario = Scenario.objects.get(name="Helpfulness")
    assert created["Location"] == f"/scenarios/{scenario.pk}"
    assert scenario.overlap == 2 and scenario.blind and scenario.tasks.count() == 4
    assert scenario.config["dimensions"] == [
        {
            "name": "Helpful",
            "description": "",
            "min": 1,
            "max": 7,
            "anchors": {"1": "Useless", "7": "Perfect"},
            "justification": True,
        }
    ]

    manager = browser(people_authors["manager"])
    form = manager.get(f"/scenarios/{scenario.pk}/edit").content.decode()
    assert 'value="Helpful"' in form and "1=Useless; 7=Perfect" in form
    saved = manager.post(
        f"/scenarios/{scenario.pk}/edit",
        {
            "name": "Helpfulness v2",
            "instructions": "Read **both**.",
            "overlap": "3",
            "dim-0-name": "Helpful",
            "dim-0-min": "1",
            "dim-0-max": "5",
            "dim-1-name": "Safe",
            "dim-1-description": "No harm",
            "dim-1-min": "0",
            "dim-1-max": "1",
        },
    )
    assert saved.status_code == 302
    scenario.refresh_from_db()
    assert scenario.name == "Helpfulness v2" and scenario.overlap == 3 and not scenario.blind
    assert [(d["name"], d["min"], d["max"]) for d in scenario.config["dimensions"]] == [
        ("Helpful", 1, 5),
        ("Safe", 0, 1),
    ]


@pytest.mark.django_db
def test_bad_forms_show_errors_by_field_and_change_nothing(people_authors):
    client = browser(people_authors["creator"])
    bad = client.post(
        "/scenarios/new",
        {
            "team": "team-a",
            "type": "rating",
            "name": "",
            "dim-0-name": "Clarity",
            "dim-0-min": "5",
            "dim-0-max": "1",
            "file": upload(),
        },
    )
    html = bad.content.decode()
    assert bad.status_code == 400 and "Rubric row “Clarity”: min and max" in html
    assert "<strong>Name</strong>: A scenario needs a name" in html and "config." not in html
    no_file = client.post("/scenarios/new", {"team": "team-a", "type": "ranking", "name": "X"})
    assert (
        no_file.status_code == 400 and "Choose a CSV or JSON lines file" in no_file.content.decode()
    )
    other_team = client.post(
        "/scenarios/new", {"team": "team-b", "type": "ranking", "name": "X", "file": upload()}
    )
    assert (
        other_team.status_code == 400 and "Choose one of your teams" in other_team.content.decode()
    )
    bad_rows = client.post(
        "/scenarios/new",
        {"team": "team-a", "type": "ranking", "name": "X", "file": upload([{"item_id": "i"}])},
    )
    assert bad_rows.status_code == 400 and "line 1" in bad_rows.content.decode()
    assert not Scenario.objects.exists()
    # Evaluators may not create scenarios at all.
    assert browser(people_authors["evaluator"]).get("/scenarios/new").status_code == 403


@pytest.mark.django_db
def test_a_comparison_draft_keeps_its_pair_design(people_authors, api):
    client = browser(people_authors["manager"])
    client.post(
        "/scenarios/new",
        {
            "team": "team-a",
            "type": "comparison",
            "name": "Pairs",
            "pairing": "within_item",
            "reverse_share": "0.5",
            "ties": "1",
            "seed": "7",
            "file": upload(),
        },
    )
    scenario = Scenario.objects.get(name="Pairs")
    assert scenario.seed == 7 and scenario.config["reverse_share"] == 0.5
    tasks_before = list(scenario.tasks.values_list("pk", "variant_a", "variant_b"))
    edit = client.get(f"/scenarios/{scenario.pk}/edit").content.decode()
    assert "(fixed)" in edit
    client.post(f"/scenarios/{scenario.pk}/edit", {"name": "Pairs", "overlap": "1"})
    scenario.refresh_from_db()
    assert scenario.config["ties"] is False and scenario.config["reverse_share"] == 0.5
    assert list(scenario.tasks.values_list("pk", "variant_a", "variant_b")) == tasks_before
    # Through the API, the pair design cannot change either.
    changed = api(people_authors["manager"]).patch(
        f"/api/scenarios/{scenario.pk}",
        {"config": {**scenario.config, "reverse_share": 0}},
        format="json",
    )
    assert changed.status_code == 400 and "config.reverse_share" in changed.json()["errors"]


@pytest.mark.django_db
def test_only_managers_edit_and_only_drafts(people_authors, api):
    client = browser(people_authors["manager"])
    client.post(
        "/scenarios/new",
        {
            "team": "team-a",
            "type": "labeling",
            "name": "Tags",
            "labels": "good\nbad",
            "file": upload(),
        },
    )
    scenario = Scenario.objects.get(name="Tags")
    assert scenario.config == {"labels": ["good", "bad"], "multiple": False, "free_text": False}
    assert (
        browser(people_authors["creator"]).get(f"/scenarios/{scenario.pk}/edit").status_code == 403
    )
    assert (
        browser(people_authors["outsider"]).get(f"/scenarios/{scenario.pk}/edit").status_code == 404
    )
    page = client.get(f"/scenarios/{scenario.pk}").content.decode()
    assert f"/scenarios/{scenario.pk}/edit" in page
    client.post(f"/scenarios/{scenario.pk}/open")
    scenario.refresh_from_db()
    assert scenario.status == ScenarioStatus.OPEN
    assert (
        f"/scenarios/{scenario.pk}/edit"
        not in client.get(f"/scenarios/{scenario.pk}").content.decode()
    )
    late = client.post(
        f"/scenarios/{scenario.pk}/edit", {"name": "Renamed", "labels": "a\nb"}, follow=True
    )
    assert "Only a draft scenario can be edited" in late.content.decode()
    scenario.refresh_from_db()
    assert scenario.name == "Tags"


@pytest.mark.django_db
def test_the_upload_form_previews_its_design_and_writes_nothing(people_authors, team_b, member):
    from evalplatform.accounts.roles import Role

    client = browser(people_authors["creator"])
    form = client.get("/scenarios/new").content.decode()
    # The same defaults as a job's conversion: no pair asked reversed unless asked for.
    assert 'name="reverse_share" value="0"' in form and "Preview the design" in form
    settings = {"team": "team-a", "type": "comparison", "name": "Pairs", "reverse_share": "1"}
    shown = client.post("/scenarios/new/preview", settings | {"file": upload()})
    # Two items of two variants: one pair each, each also asked reversed.
    text = shown.content.decode()
    assert shown.status_code == 200 and "4 tasks" in text and "2 items" in text, text
    wrong = client.post(
        "/scenarios/new/preview", settings | {"reverse_share": "2", "file": upload()}
    ).content.decode()
    assert "cannot be made" in wrong and "Share also asked in reverse order" in wrong
    missing = client.post("/scenarios/new/preview", settings).content.decode()
    assert "Choose a CSV or JSON lines file" in missing
    assert not Scenario.objects.exists()
    outsider = browser(member(team_b, Role.ADMIN))
    foreign = outsider.post("/scenarios/new/preview", settings | {"file": upload()})
    assert "Choose one of your teams" in foreign.content.decode()
