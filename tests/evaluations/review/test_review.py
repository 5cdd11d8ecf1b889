"""Review and adjudication: each task's disagreement by type on hand-made judgments (people,
imported raters and LLM judges, shown in either order), the review API's ordering, filters
and query count, setting / replacing / removing an adjudicated answer through the type's
strict check, who may do what, the export column and the analytics block."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from sklearn.metrics import cohen_kappa_score

from evalplatform.accounts.models import AuditEvent
from evalplatform.accounts.roles import Role
from evaluations.analytics.analyze import analyze
from evaluations.models import Adjudication, ExternalRater, Judgment, ParseStatus, RaterKind
from scenarios.models import Task
from tests.factories import LLMJudgeFactory, ScenarioFactory, presented_order

pytestmark = pytest.mark.django_db
User = get_user_model()

RUBRIC = {
    "dimensions": [
        {"name": "clarity", "min": 1, "max": 5},
        {"name": "tone", "min": 1, "max": 3},
    ]
}
LABELS = {"labels": ["ok", "rude", "wrong"], "multiple": True, "free_text": False}


@pytest.fixture
def manager(team_a, member):
    return member(team_a, Role.MANAGER, username="mara")


def make_scenario(manager, team, kind, config, items, name=None):
    """``items``: item id → variant ids."""
    rows = [
        {
            "item_id": item,
            "variant_id": v,
            "content": f"{item} {v} <b>text</b>",
            "model": f"model-{v}",
            "prompt": "p1",
        }
        for item, variants in items.items()
        for v in variants
    ]
    return ScenarioFactory(
        team=team,
        created_by=manager,
        type=kind,
        name=name or f"{kind} review",
        config=config,
        rows=rows,
    )


order_of = presented_order  # a task's variant ids as it shows them


class Raters:
    """People, imported raters and judges answering tasks by hand."""

    def __init__(self, scenario, team, member, mock_judge, manager):
        self.scenario, self.team, self.member = scenario, team, member
        self.mock_judge, self.manager = mock_judge, manager
        self.people: dict[str, object] = {}
        self.judge = None

    def human(self, name, task, payload, *, reverse=False, rationale=""):
        if name not in self.people:
            found = User.objects.filter(username=name).first()
            self.people[name] = found or self.member(self.team, Role.EVALUATOR, username=name)
        shown = order_of(task)[::-1] if reverse else order_of(task)
        return Judgment.objects.create(
            scenario=self.scenario,
            task=task,
            rater_kind=RaterKind.HUMAN,
            evaluator=self.people[name],
            presented=shown,
            payload=payload,
            rationale=rationale,
        )

    def external(self, name, task, payload):
        rater, _ = ExternalRater.objects.get_or_create(team=self.team, name=name)
        return Judgment.objects.create(
            scenario=self.scenario,
            task=task,
            rater_kind=RaterKind.EXTERNAL,
            external_rater=rater,
            presented=order_of(task),
            payload=payload,
        )

    def by_judge(self, task, payload, *, reverse=False, repetition=0, failed=False):
        if self.judge is None:
            self.judge = LLMJudgeFactory(
                scenario=self.scenario,
                created_by=self.manager,
                llm_model=self.mock_judge,
                name="Judge J",
            )
        shown = order_of(task)[::-1] if reverse else order_of(task)
        return Judgment.objects.create(
            scenario=self.scenario,
            task=task,
            rater_kind=RaterKind.JUDGE,
            judge=self.judge,
            presented=shown,
            payload={} if failed else payload,
            parse_status=ParseStatus.FAILED if failed else ParseStatus.OK,
            swapped=reverse,
            repetition=repetition,
            temperature=0.0,
            rationale="because",
        )


@pytest.fixture
def raters(team_a, member, mock_judge, manager):
    return lambda scenario: Raters(scenario, team_a, member, mock_judge, manager)


def review(api, user, scenario, **query):
    return api(user).get(f"/api/scenarios/{scenario.pk}/review", query)


def by_task(body):
    return {row["task"]["id"]: row for row in body["results"]}


# --- disagreement per type ------------------------------------------------------------------


def test_comparison_disagreement_reads_the_winner_whatever_the_order(api, manager, team_a, raters):
    scenario = make_scenario(manager, team_a, "comparison", {"ties": True}, {"q1": ["a", "b"]})
    scenario.tasks.all().delete()  # three tasks of the same pair, made by hand
    va, vb = scenario.variants.order_by("position")
    tasks = [
        Task.objects.create(scenario=scenario, item=va.item, position=n, variant_a=va, variant_b=vb)
        for n in range(3)
    ]
    r = raters(scenario)
    r.human("ann", tasks[0], {"winner": "A"})  # a
    r.human("bob", tasks[0], {"winner": "B"}, reverse=True)  # shown b, a: a again
    r.by_judge(tasks[0], {"winner": "B"})  # b
    r.by_judge(tasks[0], {}, failed=True, repetition=1)  # no verdict: not an answer
    r.external("ext", tasks[1], {"winner": "tie"})  # one answer: no disagreement
    found = by_task(review(api, manager, scenario).json())
    assert found[tasks[0].pk]["disagreement"] == pytest.approx(1 / 3, abs=1e-4)
    assert found[tasks[0].pk]["answer_count"] == 3
    # Side by side under the task's keys: bob's B (shown reversed) is the task's A.
    answers = {a["rater"]: a for a in found[tasks[0].pk]["answers"]}
    assert answers["ann"]["answer"] == answers["bob"]["answer"] == {"winner": "A"}
    assert answers["bob"]["payload"] == {"winner": "B"}
    assert answers["Judge J"]["answer"] == {"winner": "B"}
    assert answers["Judge J"]["rater_kind"] == "judge" and answers["Judge J"]["rationale"]
    assert found[tasks[1].pk]["disagreement"] is None
    assert found[tasks[1].pk]["answers"][0]["rater"] == "ext"
    assert found[tasks[2].pk]["disagreement"] is None and found[tasks[2].pk]["answers"] == []
    # People only: ann and bob agree.
    humans = by_task(review(api, manager, scenario, raters="humans").json())
    assert humans[tasks[0].pk]["disagreement"] == 0
    assert {a["rater"] for a in humans[tasks[0].pk]["answers"]} == {"ann", "bob"}


def test_rating_labeling_and_ranking_disagreement(api, manager, team_a, raters):
    rating = make_scenario(manager, team_a, "rating", RUBRIC, {"q1": ["a"]})
    task = rating.tasks.get()
    r = raters(rating)
    r.human("ann", task, {"scores": {"clarity": 1, "tone": 2}, "justifications": {}})
    r.human("bob", task, {"scores": {"clarity": 5, "tone": 2}, "justifications": {}})
    row = review(api, manager, rating).json()["results"][0]
    # clarity: SD 2 over half the scale (2) = 1; tone: 0; the mean of the two.
    assert row["disagreement"] == 0.5
    spread = {d["dimension"]: d for d in row["dimensions"]}
    assert spread["clarity"]["sd"] == 2 and spread["clarity"]["range"] == 4
    assert spread["tone"]["sd"] == 0

    labeling = make_scenario(manager, team_a, "labeling", LABELS, {"q1": ["a"]})
    task = labeling.tasks.get()
    r = raters(labeling)
    r.human("ann", task, {"labels": ["rude", "wrong"], "text": ""})
    r.human("bob", task, {"labels": ["wrong", "rude"], "text": ""})  # the same set
    r.external("ext", task, {"labels": ["ok"], "text": ""})
    assert review(api, manager, labeling).json()["results"][0]["disagreement"] == pytest.approx(
        1 / 3, abs=1e-4
    )

    ranking = make_scenario(manager, team_a, "ranking", {}, {"q1": ["a", "b", "c"]})
    task = ranking.tasks.get()
    ids = {v.variant_id: v.pk for v in ranking.variants.all()}
    r = raters(ranking)
    r.human("ann", task, {"ranking": [ids["a"], ids["b"], ids["c"]]})
    r.human("bob", task, {"ranking": [ids["c"], ids["b"], ids["a"]]})
    # Two reversals: tau -1, disagreement 1.
    assert review(api, manager, ranking).json()["results"][0]["disagreement"] == 1
    r.by_judge(task, {"ranking": [ids["a"], ids["b"], ids["c"]]}, reverse=True)
    # taus -1, 1, -1: mean -1/3, (1 + 1/3) / 2 = 2/3.
    row = review(api, manager, ranking).json()["results"][0]
    assert row["disagreement"] == pytest.approx(2 / 3, abs=1e-4)
    keys = {v["id"]: v["key"] for v in row["variants"]}
    ann = next(a for a in row["answers"] if a["rater"] == "ann")
    assert ann["answer"] == {"ranking": [keys[ids["a"]], keys[ids["b"]], keys[ids["c"]]]}
    # The judge saw them reversed: its rationale's keys are read for the page's.
    judge = next(a for a in row["answers"] if a["rater"] == "Judge J")
    assert judge["rationale_keys"] == (
        "In this rationale “A” is C and “C” is A (shown in another order)."
    )
    assert ann["rationale_keys"] == ""


# --- ordering, filters, queries ----------------------------------------------------------


@pytest.fixture
def pairs(manager, team_a, raters):
    """Four comparison tasks: disputed (1/3), unanimous (0), one answer, none."""
    scenario = make_scenario(
        manager, team_a, "comparison", {"ties": True}, {f"q{n}": ["a", "b"] for n in range(4)}
    )
    tasks = list(scenario.tasks.order_by("position"))
    r = raters(scenario)
    for name, winner in (("ann", "A"), ("bob", "A"), ("cyd", "B")):
        r.human(name, tasks[1], {"winner": winner})
    for name in ("ann", "bob"):
        r.human(name, tasks[2], {"winner": "B"})
    r.human("ann", tasks[3], {"winner": "A"})
    return scenario, tasks


def positions(body):
    return [row["task"]["position"] for row in body["results"]]


def test_ordering_and_filters(api, manager, pairs):
    scenario, tasks = pairs
    body = review(api, manager, scenario).json()
    assert body["count"] == 4
    assert positions(body) == [1, 2, 0, 3]  # 1/3, 0, then none by position
    assert positions(review(api, manager, scenario, ordering="disagreement").json()) == [
        2,
        1,
        0,
        3,
    ]
    assert positions(review(api, manager, scenario, ordering="position").json()) == [0, 1, 2, 3]
    assert positions(review(api, manager, scenario, min_answers=2).json()) == [1, 2]
    assert positions(review(api, manager, scenario, raters="judges").json()) == [0, 1, 2, 3]
    page = review(api, manager, scenario, page_size=1, page=2).json()
    assert positions(page) == [2] and page["count"] == 4
    api(manager).put(
        f"/api/scenarios/{scenario.pk}/tasks/{tasks[1].pk}/adjudication",
        {"answer": {"winner": "A"}},
        format="json",
    )
    assert positions(review(api, manager, scenario, unadjudicated="true").json()) == [2, 0, 3]
    bad = review(api, manager, scenario, ordering="random", raters="bots", min_answers="x")
    assert bad.status_code == 400
    assert set(bad.json()["errors"]) == {"ordering", "raters", "min_answers"}


def test_the_review_reads_in_a_fixed_number_of_queries(
    api, manager, team_a, raters, django_assert_max_num_queries
):
    def scenario_of(n, name):
        scenario = make_scenario(
            manager,
            team_a,
            "comparison",
            {"ties": True},
            {f"q{i}": ["a", "b"] for i in range(n)},
            name,
        )
        r = raters(scenario)
        for i, task in enumerate(scenario.tasks.all()):
            r.human("ann", task, {"winner": "A"})
            r.external("ext", task, {"winner": "B" if i % 2 else "A"})
            r.by_judge(task, {"winner": "tie"})
        Adjudication.objects.create(
            scenario=scenario, task=task, presented=order_of(task), payload={"winner": "A"}
        )
        return scenario

    small, large = scenario_of(2, "small"), scenario_of(30, "large")
    client = api(manager)
    for scenario in (small, large):
        with django_assert_max_num_queries(12):
            response = client.get(f"/api/scenarios/{scenario.pk}/review", {"page_size": 100})
        assert response.status_code == 200
    assert len(response.json()["results"]) == 30


# --- adjudication ------------------------------------------------------------------------


def test_set_replace_and_remove_an_adjudicated_answer(api, manager, pairs):
    scenario, tasks = pairs
    url = f"/api/scenarios/{scenario.pk}/tasks/{tasks[1].pk}/adjudication"
    client = api(manager)
    response = client.put(url, {"answer": {"winner": "B"}, "note": "B cites"}, format="json")
    assert response.status_code == 200, response.json()
    row = response.json()
    assert row["adjudication"]["answer"] == {"winner": "B"}
    assert row["adjudication"]["note"] == "B cites" and row["adjudication"]["set_by"] == "mara"
    assert row["disagreement"] == pytest.approx(1 / 3, abs=1e-4)
    stored = Adjudication.objects.get(task=tasks[1])
    assert stored.payload == {"winner": "B"} and stored.presented == order_of(tasks[1])

    replaced = client.put(url, {"answer": {"winner": "A"}}, format="json")
    assert replaced.status_code == 200
    stored.refresh_from_db()
    assert stored.payload == {"winner": "A"} and stored.note == ""
    assert [h["payload"] for h in stored.history] == [{"winner": "B"}]
    assert stored.history[0]["note"] == "B cites"
    assert replaced.json()["adjudication"]["replaced"] == 1

    # A bad answer: 400 naming the field, nothing written.
    events = AuditEvent.objects.count()
    for body, field in (
        ({"answer": {"winner": "C"}}, "answer.winner"),
        ({"answer": "A"}, "answer"),
        ({"note": "no answer"}, "answer"),
        ({"answer": {"winner": "A"}, "note": "x" * 5001}, "note"),
        ([1, 2], "answer"),
    ):
        bad = client.put(url, body, format="json")
        assert bad.status_code == 400, body
        assert field in bad.json()["errors"], bad.json()
    stored.refresh_from_db()
    assert stored.payload == {"winner": "A"} and len(stored.history) == 1
    assert AuditEvent.objects.count() == events

    assert client.delete(url).status_code == 204
    assert not Adjudication.objects.filter(task=tasks[1]).exists()
    assert client.delete(url).status_code == 204  # gone already: the same
    actions = list(
        AuditEvent.objects.filter(action__startswith="scenario.adjudication").values_list(
            "action", flat=True
        )
    )
    assert sorted(actions) == [
        "scenario.adjudication.delete",
        "scenario.adjudication.replace",
        "scenario.adjudication.set",
    ]
    assert (
        client.put(
            f"/api/scenarios/{scenario.pk}/tasks/999999/adjudication",
            {"answer": {"winner": "A"}},
            format="json",
        ).status_code
        == 404
    )


def test_each_type_checks_the_adjudicated_answer(api, manager, team_a):
    rating = make_scenario(manager, team_a, "rating", RUBRIC, {"q1": ["a"]})
    task = rating.tasks.get()
    url = f"/api/scenarios/{rating.pk}/tasks/{task.pk}/adjudication"
    client = api(manager)
    bad = client.put(url, {"answer": {"scores": {"clarity": 9, "tone": 2}}}, format="json")
    assert bad.status_code == 400 and "answer.scores.clarity" in bad.json()["errors"]
    good = client.put(url, {"answer": {"scores": {"clarity": 4, "tone": 2}}}, format="json")
    assert good.status_code == 200
    assert Adjudication.objects.get(task=task).payload["scores"] == {"clarity": 4, "tone": 2}

    ranking = make_scenario(manager, team_a, "ranking", {}, {"q1": ["a", "b", "c"]})
    task = ranking.tasks.get()
    url = f"/api/scenarios/{ranking.pk}/tasks/{task.pk}/adjudication"
    assert client.put(url, {"answer": {"ranking": ["A", "A", "B"]}}, format="json").status_code == (
        400
    )
    assert client.put(url, {"answer": {"ranking": ["C", "A", "B"]}}, format="json").status_code == (
        200
    )
    # Stored as variant ids, read back under the task's keys.
    assert Adjudication.objects.get(task=task).payload == {
        "ranking": [task.order[2], task.order[0], task.order[1]]
    }

    single = {**LABELS, "multiple": False}
    labeling = make_scenario(manager, team_a, "labeling", single, {"q": ["a"]})
    task = labeling.tasks.get()
    url = f"/api/scenarios/{labeling.pk}/tasks/{task.pk}/adjudication"
    two = client.put(url, {"answer": {"labels": ["ok", "rude"]}}, format="json")
    assert two.status_code == 400 and "answer.labels" in two.json()["errors"]
    assert not Adjudication.objects.filter(task=task).exists()


@pytest.mark.parametrize(
    ("role", "read", "write"),
    [
        (Role.ADMIN, 200, 200),
        (Role.MANAGER, 200, 200),
        (Role.CREATOR, 200, 403),
        (Role.VIEWER, 200, 403),
        (Role.EVALUATOR, 404, 404),
    ],
)
def test_who_may_read_and_adjudicate(api, member, team_a, manager, pairs, role, read, write):
    scenario, tasks = pairs
    user = member(team_a, role)
    client = api(user)
    assert client.get(f"/api/scenarios/{scenario.pk}/review").status_code == read
    url = f"/api/scenarios/{scenario.pk}/tasks/{tasks[0].pk}/adjudication"
    assert client.put(url, {"answer": {"winner": "A"}}, format="json").status_code == write
    assert client.delete(url).status_code == (204 if write == 200 else write)
    assert not Adjudication.objects.exists()


def test_another_teams_scenario_is_not_found(api, team_b, member, pairs):
    scenario, tasks = pairs
    outsider = api(member(team_b, Role.ADMIN))
    assert outsider.get(f"/api/scenarios/{scenario.pk}/review").status_code == 404
    url = f"/api/scenarios/{scenario.pk}/tasks/{tasks[0].pk}/adjudication"
    assert outsider.put(url, {"answer": {"winner": "A"}}, format="json").status_code == 404
    assert outsider.delete(url).status_code == 404
    assert not Adjudication.objects.exists()


def test_a_task_of_another_scenario_is_not_found(api, manager, team_a, pairs):
    scenario, _ = pairs
    other = make_scenario(manager, team_a, "comparison", {}, {"z": ["a", "b"]}, "other")
    url = f"/api/scenarios/{scenario.pk}/tasks/{other.tasks.get().pk}/adjudication"
    assert api(manager).put(url, {"answer": {"winner": "A"}}, format="json").status_code == 404


# --- exports and analytics ---------------------------------------------------------------


def export_rows(client, scenario):
    response = client.post(f"/api/scenarios/{scenario.pk}/export/csv")
    text = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(text)))


def test_exports_carry_the_adjudicated_answer(api, manager, team_a, pairs, raters):
    scenario, tasks = pairs
    client = api(manager)
    before = export_rows(client, scenario)
    client.put(
        f"/api/scenarios/{scenario.pk}/tasks/{tasks[1].pk}/adjudication",
        {"answer": {"winner": "B"}},
        format="json",
    )
    after = export_rows(client, scenario)
    assert after[0] == before[0]  # appended last, the rest as it was
    assert after[0][-1] == "adjudicated"
    assert [row[:-1] for row in after] == [row[:-1] for row in before]
    winner_b = tasks[1].variant_b.variant_id
    for row in after[1:]:
        wanted = winner_b if int(row[2]) == tasks[1].pk else ""
        assert row[-1] == wanted
    data = json.loads(
        b"".join(client.post(f"/api/scenarios/{scenario.pk}/export/json").streaming_content)
    )
    for record in data["judgments"]:
        if record["task"] == tasks[1].pk:
            assert record["adjudicated"]["payload"] == {"winner": "B"}
            assert record["adjudicated"]["set_by"] == "mara"
        else:
            assert record["adjudicated"] is None

    rating = make_scenario(manager, team_a, "rating", RUBRIC, {"q1": ["a"]}, "scored")
    task = rating.tasks.get()
    raters(rating).human("ann", task, {"scores": {"clarity": 2, "tone": 3}, "justifications": {}})
    client.put(
        f"/api/scenarios/{rating.pk}/tasks/{task.pk}/adjudication",
        {"answer": {"scores": {"clarity": 4, "tone": 1}}},
        format="json",
    )
    header, *rows = export_rows(client, rating)
    by_dimension = {row[header.index("dimension")]: row[-1] for row in rows}
    assert by_dimension == {"clarity": "4", "tone": "1"}


def test_analytics_hold_each_rater_to_the_adjudicated_answers(api, manager, team_a, raters):
    scenario = make_scenario(
        manager, team_a, "comparison", {"ties": True}, {f"q{n}": ["a", "b"] for n in range(6)}
    )
    tasks = list(scenario.tasks.order_by("position"))
    r = raters(scenario)
    truth = ["A", "B", "A", "tie", "B"]
    ann = ["A", "B", "B", "tie", "B", "A"]
    judge = ["A", "A", "A", "B", "B", "B"]
    for task, mine in zip(tasks, ann, strict=True):
        r.human("ann", task, {"winner": mine})
    # The judge sees every task reversed: its A is the task's B.
    flip = {"A": "B", "B": "A", "tie": "tie"}
    for task, theirs in zip(tasks, judge, strict=True):
        r.by_judge(task, {"winner": flip[theirs]}, reverse=True)
    client = api(manager)
    # Five of the six tasks adjudicated (the last is not).
    for task, answer in zip(tasks[:5], truth, strict=True):
        client.put(
            f"/api/scenarios/{scenario.pk}/tasks/{task.pk}/adjudication",
            {"answer": {"winner": answer}},
            format="json",
        )
    result = analyze(scenario, raters="all", resamples=0)
    block = result["adjudicated"]
    assert block["tasks"] == 5
    rows = {entry["rater"]: entry for entry in block["by_rater"]}
    assert [e["rater"] for e in block["by_rater"]] == ["ann", "judge:Judge J"]

    def category(task, winner):
        # The variant that won, as the lower or higher id of the pair (or a tie).
        if winner == "tie":
            return "tie"
        won = task.variant_a_id if winner == "A" else task.variant_b_id
        return "lower" if won == min(task.variant_a_id, task.variant_b_id) else "higher"

    for name, given in (("ann", ann), ("judge:Judge J", judge)):
        mine = [category(t, g) for t, g in zip(tasks, given[:5], strict=False)]
        ref = [category(t, g) for t, g in zip(tasks, truth, strict=False)]
        entry = rows[name]
        assert entry["n"] == 5 and entry["tasks"] == 5
        same = sum(a == b for a, b in zip(mine, ref, strict=True))
        assert entry["accuracy"] == pytest.approx(same / 5)
        assert entry["cohen_kappa"] == pytest.approx(cohen_kappa_score(mine, ref), abs=1e-6)
    assert rows["ann"]["accuracy"] == pytest.approx(0.8)
    assert block["humans"]["accuracy"] == rows["ann"]["accuracy"]
    judge_row = result["judges"][0]
    assert judge_row["adjudicated_n"] == 5
    assert judge_row["adjudicated_accuracy"] == rows["judge:Judge J"]["accuracy"]

    # The stored analysis is stale once an adjudicated answer changes.
    first = client.get(f"/api/scenarios/{scenario.pk}/analytics", {"resamples": 0}).json()
    assert first["adjudicated"]["by_rater"][0]["accuracy"] == pytest.approx(0.8)
    client.put(
        f"/api/scenarios/{scenario.pk}/tasks/{tasks[2].pk}/adjudication",
        {"answer": {"winner": "B"}},
        format="json",
    )
    again = client.get(f"/api/scenarios/{scenario.pk}/analytics", {"resamples": 0}).json()
    assert again["adjudicated"]["by_rater"][0]["accuracy"] == 1.0


def test_analytics_of_ratings_and_rankings_against_adjudicated_answers(manager, team_a, raters):
    rating = make_scenario(manager, team_a, "rating", RUBRIC, {"q1": ["a"], "q2": ["a"]})
    first, second = rating.tasks.order_by("position")
    r = raters(rating)
    r.human("ann", first, {"scores": {"clarity": 4, "tone": 2}, "justifications": {}})
    r.human("ann", second, {"scores": {"clarity": 1, "tone": 3}, "justifications": {}})
    for task in (first, second):
        Adjudication.objects.create(
            scenario=rating,
            task=task,
            presented=order_of(task),
            payload={"scores": {"clarity": 4, "tone": 3}, "justifications": {}},
        )
    entry = analyze(rating, resamples=0)["adjudicated"]["by_rater"][0]
    # Scores: 4=4, 2≠3, 1≠4, 3=3.
    assert entry["scores"] == 4 and entry["accuracy"] == 0.5
    assert entry["mean_abs_error"] == 1.0
    assert entry["by_dimension"]["clarity"] == {
        "scores": 2,
        "accuracy": 0.5,
        "mean_abs_error": 1.5,
    }

    ranking = make_scenario(manager, team_a, "ranking", {}, {"q1": ["a", "b", "c"]}, "ranked")
    task = ranking.tasks.get()
    a, b, c = (ranking.variants.get(variant_id=x).pk for x in "abc")
    r = raters(ranking)
    r.human("ann", task, {"ranking": [a, b, c]})
    r.human("bob", task, {"ranking": [b, a, c]})
    Adjudication.objects.create(
        scenario=ranking, task=task, presented=list(task.order), payload={"ranking": [a, b, c]}
    )
    found = {e["rater"]: e for e in analyze(ranking, resamples=0)["adjudicated"]["by_rater"]}
    assert found["ann"]["accuracy"] == 1 and found["ann"]["mean_kendall_tau"] == 1
    assert found["bob"]["accuracy"] == 0
    assert found["bob"]["mean_kendall_tau"] == pytest.approx(1 / 3)


# --- the page ----------------------------------------------------------------------------


def test_the_review_page_shows_the_answers_and_takes_an_adjudicated_answer(
    manager, team_a, member, raters
):
    scenario = make_scenario(manager, team_a, "comparison", {"ties": True}, {"q1": ["a", "b"]})
    task = scenario.tasks.get()
    r = raters(scenario)
    r.human("ann", task, {"winner": "A"}, rationale="<script>alert(1)</script> clearer")
    r.human("bob", task, {"winner": "B"})
    client = Client()
    client.force_login(manager)
    page = client.get(f"/scenarios/{scenario.pk}")
    assert f'href="/scenarios/{scenario.pk}/review"' in page.content.decode()
    html = client.get(f"/scenarios/{scenario.pk}/review").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; clearer" in html
    assert "<script>alert(1)" not in html
    assert 'disagreement <span class="disagreement">0.50</span>' in html
    assert "&lt;b&gt;text&lt;/b&gt;" in html  # model output, escaped
    # The two responses side by side at full width, rendered as the evaluators saw them.
    assert '<div class="pair">' in html and '<section class="variant">' in html
    assert '<div class="md">' in html and '<pre class="text">' not in html.split("<h3>Answers")[0]
    assert 'name="csrfmiddlewaretoken"' in html

    url = f"/scenarios/{scenario.pk}/tasks/{task.pk}/adjudication"
    bad = client.post(url, {"winner": "C", "back": "ordering=position"})
    assert bad.status_code == 302 and bad["Location"].endswith(
        f"/review?ordering=position#task-{task.pk}"
    )
    assert not Adjudication.objects.exists()
    done = client.post(url, {"winner": "B", "note": "B is right"}, follow=True)
    # One number for a task everywhere: the message names it as the page does.
    assert f"Task {task.position}: adjudicated answer saved" in done.content.decode()
    assert f"<strong>Task {task.position}</strong>" in done.content.decode()
    assert Adjudication.objects.get().payload == {"winner": "B"}
    assert "adjudicated: B" in done.content.decode()
    client.post(f"{url}/delete", {})
    assert not Adjudication.objects.exists()

    viewer = Client()
    viewer.force_login(member(team_a, Role.VIEWER))
    html = viewer.get(f"/scenarios/{scenario.pk}/review").content.decode()
    assert "clearer" in html and "Set the adjudicated answer" not in html
    assert viewer.post(url, {"winner": "A"}).status_code == 403
    assert viewer.get(f"/scenarios/{scenario.pk}/review?raters=bots").status_code == 400


def test_the_page_forms_of_ratings_and_rankings(manager, team_a):
    client = Client()
    client.force_login(manager)
    rating = make_scenario(manager, team_a, "rating", RUBRIC, {"q1": ["a"]})
    task = rating.tasks.get()
    html = client.get(f"/scenarios/{rating.pk}/review").content.decode()
    assert 'name="score_0"' in html and 'name="score_1"' in html
    client.post(
        f"/scenarios/{rating.pk}/tasks/{task.pk}/adjudication", {"score_0": "5", "score_1": "1"}
    )
    assert Adjudication.objects.get(task=task).payload["scores"] == {"clarity": 5, "tone": 1}

    ranking = make_scenario(manager, team_a, "ranking", {}, {"q1": ["a", "b", "c"]})
    task = ranking.tasks.get()
    url = f"/scenarios/{ranking.pk}/tasks/{task.pk}/adjudication"
    client.post(url, {"place": ["B", "B", "A"]})  # B twice: refused
    assert not Adjudication.objects.filter(task=task).exists()
    client.post(url, {"place": ["B", "C", "A"]})
    assert Adjudication.objects.get(task=task).payload == {
        "ranking": [task.order[1], task.order[2], task.order[0]]
    }
    html = client.get(f"/scenarios/{ranking.pk}/review").content.decode()
    assert "adjudicated: B &gt; C &gt; A" in html


def test_gold_and_attention_checks_from_the_review_page(api, manager, team_a, member, pairs):
    from scenarios.models import GoldKind, GoldTask

    scenario, tasks = pairs
    client = Client()
    client.force_login(manager)
    html = client.get(f"/scenarios/{scenario.pk}/review").content.decode()
    assert "Make this task gold with this answer" in html and "Add the attention check" in html
    gold_url = f"/scenarios/{scenario.pk}/tasks/{tasks[1].pk}/gold"
    # The type's own form: the winner under the task's keys, as evaluators answer.
    refused = client.post(gold_url, {"action": "set", "winner": "C"}, follow=True)
    assert f"Task {tasks[1].position}: the gold answer was not saved" in refused.content.decode()
    assert not GoldTask.objects.exists()
    done = client.post(gold_url, {"action": "set", "winner": "B"}, follow=True)
    page = done.content.decode()
    assert f"Task {tasks[1].position}: gold answer saved" in page and "gold: B" in page
    gold = GoldTask.objects.get()
    assert (gold.task_id, gold.kind) == (tasks[1].pk, GoldKind.GOLD)
    # Stored in the task's own order: B is its second variant.
    assert gold.answer == {"winner": "B"}
    client.post(gold_url, {"action": "set", "winner": "tie"})
    assert GoldTask.objects.get().answer == {"winner": "tie"}  # replaced, not added
    # Another task's gold stays when one more is marked (unlike a gold file, which replaces).
    client.post(f"/scenarios/{scenario.pk}/tasks/{tasks[2].pk}/gold", {"winner": "A"})
    assert GoldTask.objects.filter(kind=GoldKind.GOLD).count() == 2
    client.post(gold_url, {"action": "remove"})
    assert list(GoldTask.objects.values_list("task_id", flat=True)) == [tasks[2].pk]

    check_url = f"/scenarios/{scenario.pk}/tasks/{tasks[0].pk}/attention-check"
    blank = client.post(check_url, {"instruction": "", "winner": "B"}, follow=True)
    assert "no attention check was added" in blank.content.decode()
    added = client.post(
        check_url, {"instruction": "This is an attention check: choose B.", "winner": "B"}
    )
    assert added.status_code == 302
    check = GoldTask.objects.get(kind=GoldKind.ATTENTION)
    assert check.instruction == "This is an attention check: choose B."
    assert check.task.item_id == tasks[0].item_id and check.task_id != tasks[0].pk
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"scenario.gold.mark", "scenario.gold.unmark"} <= actions

    viewer = Client()
    viewer.force_login(member(team_a, Role.VIEWER))
    assert viewer.post(gold_url, {"winner": "A"}).status_code == 403
    assert client.post(f"/scenarios/{scenario.pk}/tasks/999999/gold", {}).status_code == 404
