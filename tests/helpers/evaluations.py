"""Scenarios answered, judged and imported: the evaluations' tests' shared steps. The
scenarios themselves come from ``tests/factories.py`` (one factory per type)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile

from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.runs.engine import run_live
from evaluations.manager.imports import import_judgments
from evaluations.models import Assignment
from generation.models import GenerationJob, JobStatus
from generation.runners.live import GenerationWork
from scenarios import services as scenario_services
from scenarios.models import Scenario
from tests.factories import (
    ComparisonScenarioFactory,
    ConnectionFactory,
    LabelingScenarioFactory,
    LLMModelFactory,
    ScenarioFactory,
)
from tests.helpers.accounts import api_client

EVAL = "/api/evaluations"
# The analytics' reference data (public data sets, with attribution: fixtures/README.md).
FIXTURES = Path(__file__).resolve().parents[1] / "evaluations" / "fixtures"


def mock_judge_model(team):
    """The offline mock provider's judge model in ``team``."""
    connection = ConnectionFactory(team=team, kind="mock", name="mock")
    return LLMModelFactory(connection=connection, model_id="mock-judge", display_name="Judge")


class NoSleep:
    async def __call__(self, seconds):
        return None


def run(job_id):
    policy = RetryPolicy(max_retries=0, sleep=NoSleep())
    return asyncio.run(run_live(GenerationWork(job_id, retry=policy)))


ANSWERS = {
    "good": "A careful, complete and **well organised** answer with examples and sources.",
    "ok": "An answer that covers the basics.",
    "bad": "No.",
}


def rows(items=3):
    return [
        {
            "item_id": f"q{n}",
            "variant_id": name,
            "content": f"{text} (question {n})",
            "model": f"model-{name}",
            "context": {"question": f"Question number {n}?"},
        }
        for n in range(items)
        for name, text in ANSWERS.items()
    ]


def make_scenario(people, team, kind, config, data=None):
    """A draft scenario of ``kind`` made by ``people["manager"]`` of ``rows()`` (or
    ``data``): three answers (good, ok, bad) to each question."""
    return ScenarioFactory(
        team=team,
        created_by=people["manager"],
        type=kind,
        name=f"S {kind}",
        config=config,
        rows=data or rows(),
    )


def create_judge(api, user, scenario, **body):
    response = api(user).post(f"/api/scenarios/{scenario.pk}/judges", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def run_judge(api, user, judge, **body):
    response = api(user).post(f"/api/judges/{judge['id']}/run", body, format="json")
    assert response.status_code == 201, response.json()
    summary = response.json()
    assert GenerationJob.objects.get(pk=summary["job"]).status == JobStatus.RUNNING
    run(summary["job"])
    return summary["job"]


def card_of(api, user, judge, temperature=0.0):
    response = api(user).get(f"/api/judges/{judge['id']}/card")
    assert response.status_code == 200, response.json()
    body = response.json()
    return body, next(c for c in body["cards"] if c["temperature"] == temperature)


def import_people(api, manager, scenario, deviate_every: int = 4) -> int:
    """One imported rater per task: the better answer by ``ORDER``, but the other one on
    every ``deviate_every``-th task (so that the people and a judge disagree at times)."""
    lines = ["item_id,variant_a,variant_b,winner,rater"]
    for n, task in enumerate(scenario.tasks.select_related("variant_a", "variant_b")):
        a, b = task.variant_a.variant_id, task.variant_b.variant_id
        better = "A" if ORDER.index(a) < ORDER.index(b) else "B"
        if (n + 1) % deviate_every == 0:
            better = "B" if better == "A" else "A"
        lines.append(f"{task.variant_a.item.item_id},{a},{b},{better},r1")
    file = SimpleUploadedFile("people.csv", "\n".join(lines).encode(), "text/csv")
    response = api(manager).post(
        f"/api/scenarios/{scenario.pk}/import", {"file": file}, format="multipart"
    )
    assert response.status_code == 201, response.json()
    return response.json()["imported"]


ORDER = list(ANSWERS)  # good, ok, bad: the people's preference


def open_scenario(api, creator, job, manager, **body):
    first_model = job.models.order_by("position").first().pk
    first_prompt = job.prompts.order_by("position").first().pk
    body = {
        "name": "Eval",
        "type": "comparison",
        "outputs": {"models": [first_model], "prompts": [first_prompt]},
    } | body
    response = api(creator).post(f"/api/generation/jobs/{job.pk}/to-scenario", body, format="json")
    assert response.status_code == 201, response.json()
    scenario = Scenario.objects.get(pk=response.json()["id"])
    assert api(manager).post(f"/api/scenarios/{scenario.pk}/open").status_code == 200
    return scenario


def labeling_scenario(manager, team, *, tasks=10, overlap=1, name="Labels", open_it=True):
    """A labeling scenario of ``tasks`` texts, each "good" or "bad" (its content says which:
    ``t<n> good``), with the labels good and bad."""
    rows = [
        {"item_id": f"t{n}", "variant_id": "v", "content": f"t{n} {'good' if n % 2 else 'bad'}"}
        for n in range(tasks)
    ]
    return LabelingScenarioFactory(
        team=team,
        created_by=manager,
        name=name,
        config={"labels": ["good", "bad"]},
        overlap=overlap,
        rows=rows,
        open_it=open_it,
    )


def work(client, scenario, answer=lambda view: "good", *, limit=1000, time_ms=5000):
    """Answer tasks until none is left (or ``limit``); the task views answered, in order."""
    seen = []
    for _ in range(limit):
        response = client.post(f"{EVAL}/scenarios/{scenario.pk}/next")
        if response.status_code == 204:
            break
        assert response.status_code == 200, response.content
        view = response.json()
        stored = client.post(
            f"{EVAL}/assignments/{view['assignment']}/submit",
            {"answer": {"labels": [answer(view)]}, "time_spent_ms": time_ms},
            format="json",
        )
        assert stored.status_code == 201, stored.content
        seen.append(view)
    return seen


def post_file(api, user, scenario, name, text):
    file = SimpleUploadedFile(name, text.encode(), "text/plain")
    return api(user).post(
        f"/api/scenarios/{scenario.pk}/import", {"file": file}, format="multipart"
    )


def comparison_scenario(manager, team, name, items):
    """``items``: {item_id: {variant_id: model}}."""
    rows = [
        {"item_id": item, "variant_id": variant, "content": f"{variant} on {item}", "model": model}
        for item, variants in items.items()
        for variant, model in variants.items()
    ]
    return ComparisonScenarioFactory(
        team=team, created_by=manager, name=name, config={"ties": True}, rows=rows
    )


def import_rows(manager, scenario, rows):
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["item_id", "variant_a", "variant_b", "winner", "rater"])
    writer.writerows(rows)
    count = import_judgments(
        user=manager, scenario=scenario, raw=buffer.getvalue().encode(), filename="j.csv"
    )
    assert count == len(rows)


def comparison(manager, team, tasks: int):
    """An open comparison scenario of ``tasks`` pairs (a and b), each to be answered twice."""
    rows = [
        {"item_id": f"i{n}", "variant_id": v, "content": f"Answer {v} to item {n}"}
        for n in range(tasks)
        for v in ("a", "b")
    ]
    return ComparisonScenarioFactory(
        team=team,
        created_by=manager,
        name=f"Q{tasks}",
        config={},
        overlap=2,
        seed=1,
        rows=rows,
        open_it=True,
    )


QUALITY = {"model-good": 2, "model-ok": 1, "model-bad": 0}


# The question most tests ask, with no budget yet.
PAIR = {"question": "pair", "a": "model-good", "b": "model-ok"}


def answer_next(client, scenario, *, seconds=40) -> bool:
    """The evaluator (``client``) answers the next task they are handed, the better model
    winning; False when they are handed none."""
    task = client.post(f"/api/evaluations/scenarios/{scenario.pk}/next")
    if task.status_code != 200:
        return False
    assignment = Assignment.objects.select_related("task__variant_a", "task__variant_b").get(
        pk=task.json()["assignment"]
    )
    a, b = assignment.task.variant_a.model_label, assignment.task.variant_b.model_label
    done = client.post(
        f"/api/evaluations/assignments/{assignment.pk}/submit",
        {
            "answer": {"winner": "A" if QUALITY[a] >= QUALITY[b] else "B"},
            "time_spent_ms": seconds * 1000,
        },
        format="json",
    )
    assert done.status_code in (200, 201), done.content
    return True


def answer_all(api, user, scenario, *, seconds=40):
    """The evaluator answers every task they are handed, the better model winning."""
    client = api(user)
    while answer_next(client, scenario, seconds=seconds):
        pass


def judge_scenario(people, team, judge_model):
    """An open comparison scenario (three models on three items) answered by an evaluator
    and by a mock judge; the scenario and the judge."""
    scenario = make_scenario(people, team, "comparison", {})
    scenario = scenario_services.scenario_open(user=people["manager"], scenario=scenario)
    answer_all(api_client, people["evaluator"], scenario)
    judge = create_judge(api_client, people["manager"], scenario, name="J", model=judge_model.pk)
    run(
        api_client(people["manager"])
        .post(f"/api/judges/{judge['id']}/run", {}, format="json")
        .json()["job"]
    )
    return scenario, judge


def row(custom_id, model="openrelay/gemma-4-31b", body_extra=None, **extra):
    body = {
        "model": model,
        "messages": [
            {"role": "system", "content": 'Score 1-5, reply as JSON {"score", "rationale"}.'},
            {"role": "user", "content": f"Answer to grade: {custom_id}"},
        ],
    } | (body_extra or {})
    return json.dumps(
        {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
        | extra
    )
