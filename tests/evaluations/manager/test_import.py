"""Importing judgments collected elsewhere: comparisons, ratings, labels and rankings, raters
matched to the team's users or kept as external raters, every bad row named, all or nothing;
the command and the API, and the analysis of what was imported."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter, defaultdict

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import override_settings

from evalplatform.accounts.roles import Role
from evaluations.analytics.analyze import analyze
from evaluations.models import ExternalRater, Judgment
from scenarios.models import Scenario, Task
from tests.helpers.evaluations import post_file

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
    # Text no database stores is refused where the file is read, naming the cell.
    nul = csv_text(["item_id", "variant", "rater", "labels"], [["w1", "essay-a", "x\x00", "good"]])
    response = post_file(api, manager, scenario, "nul.csv", nul)
    assert response.status_code == 400
    assert "NUL" in response.json()["errors"]["line 2.rater"][0]
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


# --- labels and rankings -------------------------------------------------------------------------
RANKED = """item_id,variant_id,content,model
w1,essay-a,First essay,m1
w1,essay-b,Second essay,m2
w1,essay-c,Third essay,m3
w2,essay-d,Fourth essay,m1
w2,essay-e,Fifth essay,m2
w2,essay-f,Sixth essay,m3
"""


def csv_text(header, rows):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def run_import(path, *args, user):
    out = io.StringIO()
    call_command("import_judgments", str(path), *args, "--user", user.username, stdout=out)
    return out.getvalue()


LABELS = ["accurate", "fluent", "harmful", "off-topic"]


@pytest.mark.django_db
def test_labels_from_a_generated_file_make_a_scenario_and_its_analysis(team_a, member, tmp_path):
    manager = member(team_a, Role.MANAGER, username="lena")
    rng = random.Random(3)
    rows = []
    for n in range(50):
        for variant, model in (("short", "alpha"), ("long", "beta")):
            for rater in ("lena", "ext-1", "ext-2"):
                chosen = rng.sample(LABELS, rng.choice((1, 1, 2)))
                text = "reads well" if rng.random() < 0.2 else ""
                rows.append([f"q{n}", variant, model, rater, "|".join(chosen), text])
    path = tmp_path / "labels.csv"
    path.write_text(csv_text(["item_id", "variant", "model", "rater", "labels", "text"], rows))
    args = ("--scenario", "Labels", "--team", "team-a", "--create", "labeling")
    assert "Imported 300 judgments" in run_import(path, *args, user=manager)
    scenario = Scenario.objects.get(name="Labels")
    # The labels seen, sorted; several a judgment and free text, since rows have them.
    assert scenario.config == {"labels": LABELS, "multiple": True, "free_text": True}
    assert scenario.tasks.count() == 100  # the design's task per variant; none added
    assert Judgment.objects.filter(scenario=scenario, evaluator=manager).count() == 100
    assert ExternalRater.objects.filter(team=team_a).count() == 2
    first = Judgment.objects.get(
        external_rater__name="ext-1", task__item__item_id="q0", task__variant_a__variant_id="short"
    )
    assert first.payload == {"labels": rows[1][4].split("|"), "text": rows[1][5]}
    found = analyze(scenario)
    assert found["raters"]["judgments"] == 300
    assert found["raters"]["by_rater"] == {
        "external:ext-1": 100,
        "external:ext-2": 100,
        "lena": 100,
    }
    overall = Counter(label for row in rows for label in row[4].split("|"))
    assert found["labels"]["overall"] == dict(overall)
    assert list(found["labels"]["overall"].values()) == sorted(overall.values(), reverse=True)
    by_model: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        by_model[row[2]].update(row[4].split("|"))
    assert found["labels"]["by_model"] == {model: dict(c) for model, c in by_model.items()}
    assert found["labels"]["by_model"]["alpha"]["accurate"] == by_model["alpha"]["accurate"] > 0
    # Agreement on each variant's label set: three raters on 100 variants; two of them alike
    # on the share of variants where their sets are the same.
    agreement = found["agreement"]
    assert agreement["units"] == 100 and agreement["raters"] == 3
    sets = {(row[0], row[1], row[3]): sorted(row[4].split("|")) for row in rows}
    same = np.mean(
        [sets[(q, v, "lena")] == sets[(q, v, "ext-1")] for q, v, r in sets if r == "lena"]
    )
    raters = agreement["pairwise"]["raters"]
    shares = agreement["pairwise"]["agreement"][raters.index("lena")]
    assert 0 < same < 1 and shares[raters.index("external:ext-1")] == pytest.approx(same)
    # Imported again, lena's rows would judge her tasks twice: refused, nothing written.
    with pytest.raises(CommandError, match="has judged task"):
        run_import(path, *args, user=manager)
    assert Judgment.objects.filter(scenario=scenario).count() == 300


@pytest.mark.django_db
def test_labels_through_the_api_as_json_lines(api, team_a, member):
    manager = member(team_a, Role.MANAGER, username="mona")
    config = {"labels": ["good", "bad", "unclear"], "multiple": True, "free_text": True}
    scenario = uploaded(api, manager, "labeling", config=config)
    lines = [
        {"item_id": "w1", "variant": "essay-a", "rater": "mona", "labels": ["good", "unclear"]},
        {"item_id": "w1", "variant": "essay-b", "rater": "mona", "labels": "bad", "text": " Dull "},
        {"item_id": "w2", "variant": "essay-c", "rater": "panel", "labels": "unclear | good"},
    ]
    text = "\n".join(json.dumps(line) for line in lines)
    response = post_file(api, manager, scenario, "labels.jsonl", text)
    assert response.status_code == 201 and response.json() == {"imported": 3}
    mine = Judgment.objects.get(evaluator=manager, task__variant_a__variant_id="essay-a")
    assert mine.rater_kind == "human" and mine.payload == {
        "labels": ["good", "unclear"],
        "text": "",
    }
    other = Judgment.objects.get(evaluator=manager, task__variant_a__variant_id="essay-b")
    assert other.payload == {"labels": ["bad"], "text": "Dull"}
    panel = Judgment.objects.get(external_rater__name="panel")
    assert panel.payload["labels"] == ["unclear", "good"]
    assert panel.presented == [scenario.variants.get(variant_id="essay-c").pk]
    assert scenario.tasks.count() == 4
    assert analyze(scenario)["labels"]["overall"] == {"good": 2, "unclear": 2, "bad": 1}


@pytest.mark.django_db
def test_bad_labels_import_nothing(api, team_a, member, tmp_path):
    manager = member(team_a, Role.MANAGER)
    scenario = uploaded(api, manager, "labeling", config={"labels": ["good", "bad"]})
    rows = [
        ["w1", "essay-a", "x", "good", ""],  # line 2: fine
        ["w1", "essay-a", "x", "bad", ""],
        ["w1", "essay-b", "x", "great|good", ""],
        ["w1", "essay-b", "y", "good|bad", ""],
        ["w2", "essay-c", "x", "", ""],
        ["w2", "essay-c", "y", "good||bad", ""],
        ["w2", "essay-d", "x", "good", "Nice"],
        ["w2", "nope", "x", "good", ""],
        ["w2", "essay-d", "y", "good", "bad byte"],
        ["w2", "essay-d", "", "good", ""],
        ["w2", "essay-d", "z", "bad | bad", ""],
        ["w1", "essay-b", "z", "good", "x" * 20_001],
    ]
    bad = csv_text(["item_id", "variant", "rater", "labels", "text"], rows)
    response = post_file(api, manager, scenario, "bad.csv", bad)
    assert response.status_code == 400
    errors = {line: messages[0] for line, messages in response.json()["errors"].items()}
    assert errors == {
        "line 3": "x labeled this variant twice.",
        "line 4": "not among the scenario's labels: 'great'.",
        "line 5": "this scenario takes one label a judgment.",
        "line 6": "labels is missing.",
        "line 7": "an empty label (labels are joined by |).",
        "line 8": "this scenario takes no free text.",
        "line 9": "item 'w2' has no such variant.",
        "line 10": "this scenario takes no free text.",
        "line 11": "rater is missing.",
        "line 12": "labels given twice: 'bad'.",
        "line 13": "text has more than 20,000 characters.",
    }
    assert not Judgment.objects.exists() and not ExternalRater.objects.exists()
    # Text no database stores is refused where the file is read, naming the cell.
    nul = csv_text(["item_id", "variant", "rater", "labels"], [["w1", "essay-a", "x\x00", "good"]])
    response = post_file(api, manager, scenario, "nul.csv", nul)
    assert response.status_code == 400
    assert "NUL" in response.json()["errors"]["line 2.rater"][0]
    assert not Judgment.objects.exists() and not ExternalRater.objects.exists()
    path = tmp_path / "bad.csv"
    path.write_text(bad)
    with pytest.raises(CommandError, match="line 4: not among") as raised:
        run_import(path, "--scenario", str(scenario.pk), user=manager)
    assert "Nothing was imported:" in str(raised.value)
    assert not Judgment.objects.exists() and scenario.tasks.count() == 4


def kendall_w(table):
    """Kendall's W by its textbook formula: ``table`` is raters x objects of ranks."""
    m, n = table.shape
    totals = table.sum(axis=0)
    return 12 * ((totals - totals.mean()) ** 2).sum() / (m**2 * (n**3 - n))


@pytest.mark.django_db
def test_rankings_from_a_generated_file_make_a_scenario_and_its_analysis(team_a, member, tmp_path):
    manager = member(team_a, Role.MANAGER, username="rita")
    rng = random.Random(11)
    strength = {"m1": 3.0, "m2": 2.0, "m3": 1.0, "m4": 0.0}
    raters = ["rita", "ext-1", "ext-2", "ext-3"]
    rows = []
    ranks: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)  # item → rater → variant
    for n in range(30):
        for rater in raters:
            order = sorted(strength, key=lambda m: -(strength[m] + rng.gauss(0, 1)))
            ranks[f"q{n}"][rater] = {f"v-{m}": rank for rank, m in enumerate(order, 1)}
            rows += [[f"q{n}", rater, f"v-{m}", m, rank] for rank, m in enumerate(order, 1)]
    rng.shuffle(rows)  # the rows of one ranking anywhere in the file
    path = tmp_path / "ranks.csv"
    path.write_text(csv_text(["item_id", "rater", "variant", "model", "rank"], rows))
    args = ("--scenario", "Ranks", "--team", "team-a", "--create", "ranking")
    assert "Imported 120 judgments" in run_import(path, *args, user=manager)
    scenario = Scenario.objects.get(name="Ranks")
    assert scenario.tasks.count() == 30  # the design's task per item; none added
    assert Judgment.objects.filter(scenario=scenario, evaluator=manager).count() == 30
    mine = Judgment.objects.select_related("task__item").filter(evaluator=manager).first()
    variant_ids = dict(scenario.variants.values_list("pk", "variant_id"))
    given = ranks[mine.task.item.item_id]["rita"]
    assert [variant_ids[pk] for pk in mine.payload["ranking"]] == sorted(given, key=given.get)
    # The order shown is not in the file: the task's order stands for it.
    assert mine.presented == mine.task.order and sorted(mine.task.order) == sorted(
        mine.payload["ranking"]
    )
    found = analyze(scenario, resamples=50)["rankings"]
    mean = {
        f"{item}/{variant}": float(np.mean([by_rater[r][variant] for r in raters]))
        for item, by_rater in ranks.items()
        for variant in by_rater["rita"]
    }
    assert {r["variant"]: r["mean_rank"] for r in found["mean_rank"]} == pytest.approx(mean)
    assert len(found["mean_rank"]) == 120 and {r["n"] for r in found["mean_rank"]} == {4}
    ws = [
        kendall_w(np.array([[by_rater[r][v] for v in sorted(by_rater["rita"])] for r in raters]))
        for by_rater in ranks.values()
    ]
    assert found["kendall_w_tasks"] == 30
    assert found["kendall_w_mean"] == pytest.approx(float(np.mean(ws)), abs=1e-6)
    assert [row["variant"] for row in found["by_model"]] == ["m1", "m2", "m3", "m4"]


@pytest.mark.django_db
def test_rankings_through_the_api_join_each_items_task(api, team_a, member):
    manager = member(team_a, Role.MANAGER, username="mona")
    body = {"team": "team-a", "name": "Ranked", "type": "ranking", "format": "csv"}
    response = api(manager).post("/api/scenarios", body | {"content": RANKED}, format="json")
    assert response.status_code == 201, response.json()
    scenario = Scenario.objects.get(pk=response.json()["id"])
    rows = [
        ["w1", "mona", "essay-b", 1],
        ["w1", "panel", "essay-c", 3],
        ["w1", "mona", "essay-c", 2],
        ["w1", "panel", "essay-a", 1],
        ["w1", "mona", "essay-a", 3],
        ["w1", "panel", "essay-b", 2],
        ["w2", "panel", "essay-f", 1],
        ["w2", "panel", "essay-d", 2],
        ["w2", "panel", "essay-e", 3],
    ]
    text = csv_text(["item_id", "rater", "variant", "rank"], rows)
    response = post_file(api, manager, scenario, "ranks.csv", text)
    assert response.status_code == 201 and response.json() == {"imported": 3}
    pk = dict(scenario.variants.values_list("variant_id", "pk"))
    mine = Judgment.objects.get(evaluator=manager)
    assert mine.payload == {"ranking": [pk["essay-b"], pk["essay-c"], pk["essay-a"]]}
    assert mine.task == Task.objects.get(scenario=scenario, item__item_id="w1")
    panel = Judgment.objects.get(external_rater__name="panel", task__item__item_id="w2")
    assert panel.payload == {"ranking": [pk["essay-f"], pk["essay-d"], pk["essay-e"]]}
    assert scenario.tasks.count() == 2
    found = analyze(scenario, resamples=20)["rankings"]
    assert {r["variant"]: r["mean_rank"] for r in found["mean_rank"]} == {
        "w1/essay-a": 2.0,
        "w1/essay-b": 1.5,
        "w1/essay-c": 2.5,
        "w2/essay-d": 2.0,
        "w2/essay-e": 3.0,
        "w2/essay-f": 1.0,
    }
    # Kendall's W of w1's two rankings (b c a, a b c): rank totals 4, 3, 5 → 12·2 / (2²·24).
    assert found["kendall_w_tasks"] == 1 and found["kendall_w_mean"] == pytest.approx(0.25)

    # Its CSV export, in the same columns, imports into a new scenario as the same rankings.
    export = api(manager).post(f"/api/scenarios/{scenario.pk}/export/csv")
    assert export.status_code == 200
    path_text = b"".join(export.streaming_content).decode()
    copied = SimpleUploadedFile("export.csv", path_text.encode(), "text/csv")
    copy_body = body | {"name": "Copy", "content": RANKED}
    response = api(manager).post("/api/scenarios", copy_body, format="json")
    copy = Scenario.objects.get(pk=response.json()["id"])
    response = api(manager).post(
        f"/api/scenarios/{copy.pk}/import", {"file": copied}, format="multipart"
    )
    assert response.status_code == 201 and response.json() == {"imported": 3}
    names = dict(copy.variants.values_list("pk", "variant_id"))
    again = Judgment.objects.get(scenario=copy, evaluator=manager)
    assert [names[v] for v in again.payload["ranking"]] == ["essay-b", "essay-c", "essay-a"]


@pytest.mark.django_db
def test_bad_rankings_import_nothing(api, team_a, member, tmp_path):
    manager = member(team_a, Role.MANAGER)
    body = {"team": "team-a", "name": "Ranked", "type": "ranking", "format": "csv"}
    response = api(manager).post("/api/scenarios", body | {"content": RANKED}, format="json")
    scenario = Scenario.objects.get(pk=response.json()["id"])
    rows = [
        ["w1", "x", "essay-a", "1"],  # line 2: fine
        ["w1", "x", "essay-b", "1"],
        ["w1", "x", "essay-a", "2"],
        ["w1", "y", "nope", "1"],
        ["w1", "y", "essay-a", "4"],
        ["w1", "y", "essay-b", "0"],
        ["w1", "y", "essay-c", "first"],
        ["w1", "y", "essay-c", "1.5"],
        ["w2", "y", "", ""],
        ["w2", "y", "essay-d", ""],
        ["w2", "y", "essay-e", "9"],
        ["w3", "y", "essay-a", "1"],
        ["w2", "r" * 201, "essay-e", "1"],
    ]
    bad = csv_text(["item_id", "rater", "variant", "rank"], rows)
    response = post_file(api, manager, scenario, "bad.csv", bad)
    assert response.status_code == 400
    errors = {line: messages[0] for line, messages in response.json()["errors"].items()}
    assert errors == {
        "line 3": "x gave rank 1 of this item twice.",
        "line 4": "x ranked essay-a of this item twice.",
        "line 5": "item 'w1' has no such variant.",
        "line 6": "rank is a whole number from 1 to 3.",
        "line 7": "rank is a whole number from 1 to 3.",
        "line 8": "rank is a whole number from 1 to 3.",
        "line 9": "rank is a whole number from 1 to 3.",
        "line 10": "variant is missing; rank is missing.",
        "line 11": "rank is missing.",
        "line 12": "rank is a whole number from 1 to 3.",
        "line 13": "item 'w3' has no such variant.",
        "line 14": "rater has more than 200 characters.",
    }
    assert not Judgment.objects.exists() and not ExternalRater.objects.exists()
    # Rows each fine, rankings not whole: each named at its first row, with what it lacks.
    rows = [
        ["w1", "x", "essay-c", "3"],
        ["w2", "y", "essay-d", "1"],
        ["w1", "x", "essay-a", "1"],
        ["w1", "y", "essay-a", "1"],
        ["w1", "y", "essay-b", "2"],
        ["w1", "y", "essay-c", "3"],
    ]
    path = tmp_path / "partial.csv"
    path.write_text(csv_text(["item_id", "rater", "variant", "rank"], rows))
    with pytest.raises(CommandError) as raised:
        run_import(path, "--scenario", "Ranked", "--team", "team-a", user=manager)
    message = str(raised.value)
    assert "line 2: x's ranking (its rows from this line on) leaves out essay-b;" in message
    assert "line 3: y's ranking (its rows from this line on) leaves out essay-e, essay-f;" in (
        message
    )
    assert "line 5" not in message
    assert not Judgment.objects.exists()


@pytest.mark.django_db
def test_create_makes_no_scenario_when_the_import_fails(team_a, member, tmp_path):
    manager = member(team_a, Role.MANAGER)
    rows = [
        ["q1", "a", "x", "good", ""],
        ["q1", "b", "x", "bad", "\x00"],
        ["q1", "c", "y", "bad", ""],
    ]
    path = tmp_path / "labels.csv"
    path.write_text(csv_text(["item_id", "variant", "rater", "labels", "text"], rows))
    args = ("--scenario", "Never", "--team", "team-a", "--create", "labeling")
    with pytest.raises(CommandError, match=r"Unreadable file:\n  line 3\.text: Holds a NUL"):
        run_import(path, *args, user=manager)
    assert not Scenario.objects.filter(name="Never").exists()
    # One label in the whole file makes no label set: the scenario's check says why.
    path.write_text(csv_text(["item_id", "variant", "rater", "labels"], [["q1", "a", "x", "ok"]]))
    with pytest.raises(CommandError, match=r"could not be made:\n  config\.labels: A list of 2"):
        run_import(path, *args, user=manager)
    rows = [["q1", "x", "a", "1"], ["q1", "x", "b", "1"]]
    path.write_text(csv_text(["item_id", "rater", "variant", "rank"], rows))
    args = ("--scenario", "Never", "--team", "team-a", "--create", "ranking")
    with pytest.raises(CommandError, match="line 3: x gave rank 1 of this item twice"):
        run_import(path, *args, user=manager)
    assert not Scenario.objects.exists() and not ExternalRater.objects.exists()


@pytest.mark.django_db
@override_settings(UPLOAD_MAX_BYTES=2000)
@pytest.mark.parametrize("kind", ["labeling", "ranking"])
def test_a_file_over_the_upload_limit_imports_nothing(api, team_a, member, tmp_path, kind):
    manager = member(team_a, Role.MANAGER)
    if kind == "labeling":
        config = {"labels": ["good", "bad"]}
        header = ["item_id", "variant", "rater", "labels"]
        rows = [["w1", "essay-a", f"rater-{n}", "good"] for n in range(200)]
    else:
        config = {}
        header = ["item_id", "rater", "variant", "rank"]
        rows = [["w1", f"rater-{n}", "essay-a", "1"] for n in range(200)]
    scenario = uploaded(api, manager, kind, config=config)
    big = csv_text(header, rows)
    assert len(big) > 2000
    response = post_file(api, manager, scenario, "big.csv", big)
    assert (
        response.status_code == 400 and "the limit is 2,000" in response.json()["errors"]["file"][0]
    )
    path = tmp_path / "big.csv"
    path.write_text(big)
    with pytest.raises(CommandError, match=r"source\.file: The file has .* the limit is 2,000"):
        run_import(path, "--scenario", str(scenario.pk), user=manager)
    assert not Judgment.objects.exists() and not ExternalRater.objects.exists()


@pytest.mark.django_db
@override_settings(JUDGMENT_IMPORT_MAX_ROWS=50)
def test_an_import_past_the_row_cap_is_refused_while_read(api, team_a, member):
    """The rows are counted as the file is read, and reading stops at the first past the cap
    (a file of a million tiny rows is never held): nothing is imported."""
    manager = member(team_a, Role.MANAGER)
    scenario = uploaded(api, manager, "labeling", config={"labels": ["good", "bad"]})
    header = ["item_id", "variant", "rater", "labels"]
    rows = [["w1", "essay-a", f"rater-{n}", "good"] for n in range(51)]
    refused = post_file(api, manager, scenario, "many.csv", csv_text(header, rows))
    assert refused.status_code == 400
    assert refused.json()["errors"] == {
        "file": ["More than 50 rows (JUDGMENT_IMPORT_MAX_ROWS): split the file."]
    }
    assert not Judgment.objects.exists() and not ExternalRater.objects.exists()
    taken = post_file(api, manager, scenario, "fifty.csv", csv_text(header, rows[:50]))
    assert taken.status_code == 201 and taken.json() == {"imported": 50}


@pytest.mark.django_db(transaction=True)
def test_an_import_is_written_in_chunks_and_undone_if_a_chunk_fails(
    api, team_a, member, monkeypatch
):
    """Raters, missing tasks and judgments commit a chunk at a time (another team's writes
    go between them); a chunk that fails takes back everything the import wrote."""
    from evalplatform import bulk
    from evaluations.manager import imports

    manager = member(team_a, Role.MANAGER)
    scenario = uploaded(api, manager, "comparison", config={"ties": True})
    tasks_before = set(scenario.tasks.values_list("pk", flat=True))
    header = ["item_id", "variant_a", "variant_b", "winner", "rater"]
    rows = [
        [item, a, b, "A", f"panel-{n}"]
        for n in range(3)
        for item, a, b in (("w1", "essay-a", "essay-b"), ("w1", "essay-b", "essay-a"),
                           ("w2", "essay-c", "essay-d"), ("w2", "essay-d", "essay-c"))
    ]  # fmt: skip
    monkeypatch.setattr(imports, "CHUNK", 2)
    chunks = {"n": 0}

    def failing() -> None:
        chunks["n"] += 1
        if chunks["n"] == 6:  # raters and tasks written, judgments begun
            assert Judgment.objects.filter(scenario=scenario).exists()
            raise RuntimeError("the disk is full")

    monkeypatch.setattr(bulk, "between_chunks", failing)
    with pytest.raises(RuntimeError):
        imports.import_judgments(
            user=manager, scenario=scenario, raw=csv_text(header, rows).encode(),
            filename="x.csv",
        )  # fmt: skip
    assert not Judgment.objects.exists() and not ExternalRater.objects.exists()
    assert set(Task.objects.filter(scenario=scenario).values_list("pk", flat=True)) == tasks_before

    monkeypatch.setattr(bulk, "between_chunks", lambda: None)
    response = post_file(api, manager, scenario, "x.csv", csv_text(header, rows))
    assert response.status_code == 201 and response.json() == {"imported": 12}
    assert ExternalRater.objects.filter(team=team_a).count() == 3
    assert Task.objects.filter(scenario=scenario).count() == len(tasks_before) + 2
