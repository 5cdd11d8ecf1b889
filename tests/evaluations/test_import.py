"""Importing judgments collected elsewhere: comparisons and ratings, raters matched to the
team's users or kept as external raters, every bad row named, all or nothing; the command and
the API."""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from evalplatform.accounts.roles import Role
from evaluations.models import ExternalRater, Judgment
from scenarios.models import Scenario

VARIANTS = """item_id,variant_id,content
w1,essay-a,First essay
w1,essay-b,Second essay
w2,essay-c,Third essay
w2,essay-d,Fourth essay
"""


def uploaded(api, user, kind, name="Imported", **extra):
    body = {"team": "team-a", "name": name, "type": kind, "format": "csv", "content": VARIANTS}
    response = api(user).post("/api/scenarios", body | extra, format="json")
    assert response.status_code == 201, response.json()
    return Scenario.objects.get(pk=response.json()["id"])


@pytest.mark.django_db
def test_comparisons_from_a_file(api, team_a, member, tmp_path):
    manager = member(team_a, Role.MANAGER, username="mona")
    scenario = uploaded(api, manager, "comparison")
    rows = (
        "item_id,variant_a,variant_b,winner,rater\n"
        "w1,essay-a,essay-b,A,mona\n"
        "w1,essay-b,essay-a,B,judge-panel-1\n"
        "w2,essay-c,essay-d,tie,judge-panel-1\n"
    )
    path = tmp_path / "pairs.csv"
    path.write_text(rows)
    out = io.StringIO()
    call_command(
        "import_judgments", str(path), "--scenario", "Imported", "--user", "mona", stdout=out
    )
    assert "Imported 3 judgments" in out.getvalue()
    human = Judgment.objects.get(evaluator=manager)
    assert human.payload == {"winner": "A"} and human.rater_kind == "human"
    reverse = Judgment.objects.get(task__variant_a__variant_id="essay-b")
    assert reverse.rater_kind == "external" and reverse.external_rater.name == "judge-panel-1"
    assert [v for v in reverse.presented] == [
        scenario.variants.get(variant_id="essay-b").pk,
        scenario.variants.get(variant_id="essay-a").pk,
    ]
    assert ExternalRater.objects.filter(team=team_a).count() == 1
    # The design had (a, b) or (b, a) for w1; the other order got a task of its own.
    assert scenario.tasks.filter(item__item_id="w1").count() == 2


@pytest.mark.django_db
def test_ratings_group_by_rater_and_variant(api, team_a, member):
    manager = member(team_a, Role.MANAGER)
    rubric = {
        "dimensions": [
            {"name": "Clarity", "min": 1, "max": 5},
            {"name": "Depth", "min": 1, "max": 5},
        ]
    }
    scenario = uploaded(api, manager, "rating", config=rubric)
    lines = [
        {"item_id": "w1", "variant": "essay-a", "rater": "r1", "dimension": "Clarity", "score": 4},
        {"item_id": "w1", "variant": "essay-a", "rater": "r1", "dimension": "Depth", "score": 2},
        {"item_id": "w2", "variant": "essay-c", "rater": "r2", "dimension": "Clarity", "score": 5},
    ]
    file = SimpleUploadedFile(
        "scores.jsonl", "\n".join(json.dumps(x) for x in lines).encode(), "application/jsonl"
    )
    response = api(manager).post(
        f"/api/scenarios/{scenario.pk}/import", {"file": file}, format="multipart"
    )
    assert response.status_code == 201 and response.json() == {"imported": 2}
    r1 = Judgment.objects.get(external_rater__name="r1")
    assert r1.payload == {"scores": {"Clarity": 4, "Depth": 2}, "justifications": {}}


@pytest.mark.django_db
def test_bad_rows_import_nothing(api, team_a, member, tmp_path):
    manager = member(team_a, Role.MANAGER)
    scenario = uploaded(api, manager, "comparison", config={"ties": False})
    bad = (
        "item_id,variant_a,variant_b,winner,rater\n"
        "w1,essay-a,essay-b,A,x\n"
        "w1,essay-a,nope,A,x\n"
        "w2,essay-c,essay-d,tie,x\n"
        "w2,essay-c,essay-d,B,\n"
        "w1,essay-a,essay-b,B,x\n"
    )
    file = SimpleUploadedFile("bad.csv", bad.encode(), "text/csv")
    response = api(manager).post(
        f"/api/scenarios/{scenario.pk}/import", {"file": file}, format="multipart"
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert "no such variant_a / variant_b" in errors["line 3"][0]
    assert "allows no ties" in errors["line 4"][0]
    assert "rater is missing" in errors["line 5"][0]
    assert "twice" in errors["line 6"][0]
    assert not Judgment.objects.exists() and not ExternalRater.objects.exists()
    path = tmp_path / "bad.csv"
    path.write_text(bad)
    with pytest.raises(CommandError, match="Nothing was imported"):
        call_command(
            "import_judgments",
            str(path),
            "--scenario",
            str(scenario.pk),
            "--user",
            manager.username,
        )
    creator = member(team_a, Role.CREATOR)
    file = SimpleUploadedFile("bad.csv", bad.encode(), "text/csv")
    assert (
        api(creator)
        .post(f"/api/scenarios/{scenario.pk}/import", {"file": file}, format="multipart")
        .status_code
        == 403
    )
