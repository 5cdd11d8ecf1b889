"""LLM judges through the API: each scenario type judged live on the mock provider, position
swap mapped back to the variants, repetitions and temperatures recorded, unparseable replies
kept and retried alone, budget pause, permissions."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal

import pytest

from evaluations.models import Judgment, ParseStatus, RaterKind
from generation.models import GenerationJob, GenerationOutput, JobStatus
from scenarios import services as scenario_services
from scenarios.models import Task
from tests.factories import PromptTemplateFactory, make_version
from tests.helpers.evaluations import create_judge, make_scenario, run, run_judge

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_comparison_judge_in_both_orders_with_repetitions_at_two_temperatures(
    api, people, team_a, mock_judge
):
    scenario = make_scenario(people, team_a, "comparison", {"ties": True})
    tasks = list(Task.objects.filter(scenario=scenario))
    assert len(tasks) == 9
    judge = create_judge(
        api,
        people["manager"],
        scenario,
        name="Mock pairwise",
        model=mock_judge.pk,
        temperatures=[0.0, 1.0],
        repetitions=2,
        swap=True,
    )
    assert judge["prompt"] == "Default judge: comparison v1"
    estimate = api(people["manager"]).post(f"/api/judges/{judge['id']}/estimate", {}, format="json")
    assert estimate.status_code == 200 and estimate.json()["calls"] == 9 * 2 * 2 * 2
    job_id = run_judge(api, people["manager"], judge)
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.COMPLETED and job.completed_cells == 72 and job.cost_usd > 0

    judgments = Judgment.objects.filter(judge_id=judge["id"])
    assert judgments.count() == 72 and not judgments.exclude(rater_kind=RaterKind.JUDGE).exists()
    assert Counter((j.temperature, j.repetition, j.swapped) for j in judgments) == {
        (t, r, s): 9 for t in (0.0, 1.0) for r in (0, 1) for s in (False, True)
    }
    by_task = {t.pk: t for t in tasks}
    for judgment in judgments:
        task = by_task[judgment.task_id]
        forward = [task.variant_a_id, task.variant_b_id]
        assert judgment.presented == (forward[::-1] if judgment.swapped else forward)
        assert judgment.payload["winner"] in ("A", "B", "tie")
        assert judgment.parse_status == ParseStatus.OK and judgment.output.content

    # At temperature 0 the mock judges by each text's latent quality alone: mapped back to
    # the variants, the verdicts in both orders name the same winner.
    def winner_variant(judgment):
        winner = judgment.payload["winner"]
        return "tie" if winner == "tie" else judgment.presented["AB".index(winner)]

    for task in tasks:
        pair = judgments.filter(task=task, temperature=0.0, repetition=0)
        assert len({winner_variant(j) for j in pair}) == 1

    # A second run judges nothing again: every task has a verdict.
    again = api(people["manager"]).post(f"/api/judges/{judge['id']}/run", {}, format="json")
    assert again.status_code == 400 and "tasks" in again.json()["errors"]
    runs = api(people["manager"]).get(f"/api/judges/{judge['id']}/runs").json()
    assert runs[0]["verdicts"] == 72 and runs[0]["unparseable"] == 0
    listed = api(people["viewer"]).get(f"/api/evaluations/judgments?scenario={scenario.pk}")
    assert listed.json()["count"] == 72


@pytest.mark.parametrize(
    ("kind", "config", "check"),
    [
        (
            "rating",
            {
                "dimensions": [
                    {
                        "name": "clarity",
                        "min": 1,
                        "max": 5,
                        "anchors": {"1": "muddled", "5": "crystal clear"},
                    },
                    {"name": "accuracy", "min": 0, "max": 10, "description": "Facts right"},
                ]
            },
            lambda p: (
                set(p["scores"]) == {"clarity", "accuracy"}
                and 1 <= p["scores"]["clarity"] <= 5
                and 0 <= p["scores"]["accuracy"] <= 10
            ),
        ),
        (
            "labeling",
            {"labels": ["helpful", "harmful", "off-topic"]},
            lambda p: len(p["labels"]) == 1,
        ),
        (
            "labeling",
            {"labels": ["concise", "polite", "correct"], "multiple": True},
            lambda p: len(p["labels"]) == 2,
        ),
    ],
)
def test_rating_and_labeling_judges(api, people, team_a, mock_judge, kind, config, check):
    scenario = make_scenario(people, team_a, kind, config)
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    run_judge(api, people["manager"], judge)
    judgments = Judgment.objects.filter(judge_id=judge["id"])
    assert judgments.count() == 9
    for judgment in judgments:
        assert judgment.parse_status == ParseStatus.OK, judgment.parse_error
        assert check(judgment.payload), judgment.payload
        assert judgment.presented == [Task.objects.get(pk=judgment.task_id).variant_a_id]
        assert judgment.rationale or kind == "labeling"


def test_a_ranking_judge_maps_keys_back_to_variants_in_both_orders(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "ranking", {})
    judge = create_judge(api, people["manager"], scenario, name="R", model=mock_judge.pk, swap=True)
    run_judge(api, people["manager"], judge)
    judgments = Judgment.objects.filter(judge_id=judge["id"])
    assert judgments.count() == 6  # 3 items, both orders
    for judgment in judgments:
        task = Task.objects.get(pk=judgment.task_id)
        assert sorted(judgment.payload["ranking"]) == sorted(task.order)
        assert judgment.presented == (task.order[::-1] if judgment.swapped else task.order)
    # The mock ranks by the texts' quality: at temperature 0 both orders agree, once mapped.
    for task in Task.objects.filter(scenario=scenario):
        pair = judgments.filter(task=task)
        assert len({tuple(j.payload["ranking"]) for j in pair}) == 1


def test_unparseable_replies_are_kept_and_retried_alone(api, people, team_a, mock_judge):
    scenario = make_scenario(
        people, team_a, "rating", {"dimensions": [{"name": "clarity", "min": 1, "max": 5}]}
    )
    # A judge prompt that asks for another dimension: its replies are no valid verdicts.
    wrong = make_version(
        PromptTemplateFactory(team=team_a, name="Wrong rubric"),
        [
            ("System", 'Score the rubric:\n- tone (1-5): warmth\nReply {"scores": {...}}'),
            ("", "{{response}}"),
        ],
    )
    bad = create_judge(
        api, people["manager"], scenario, name="Bad", model=mock_judge.pk, prompt_version=wrong.pk
    )
    job_id = run_judge(api, people["manager"], bad)
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.COMPLETED and job.failed_cells == 9 and job.completed_cells == 0
    assert job.cost_usd > 0  # the replies were paid for
    failed = Judgment.objects.filter(judge_id=bad["id"])
    assert failed.count() == 9 and {j.parse_status for j in failed} == {ParseStatus.FAILED}
    assert "Unknown dimensions: tone" in failed[0].parse_error
    output = GenerationOutput.objects.filter(job_id=job_id).first()
    assert output.status == "failed" and output.error_kind == "invalid_reply"
    assert '"tone"' in output.content  # the raw reply is kept

    # Provider errors on part of the calls; after the provider recovers, "retry failed"
    # asks again those calls and only them.
    connection = mock_judge.connection
    connection.options = {"failure_rate": 0.5}
    connection.save()
    good = create_judge(api, people["manager"], scenario, name="Good", model=mock_judge.pk)
    job_id = run_judge(api, people["manager"], good)
    job = GenerationJob.objects.get(pk=job_id)
    assert 0 < job.failed_cells < 9, job.failed_cells
    done_before = dict(
        GenerationOutput.objects.filter(job_id=job_id, status="completed").values_list(
            "pk", "completed_at"
        )
    )
    connection.options = {}
    connection.save()
    retried = api(people["manager"]).post(f"/api/judges/{good['id']}/retry-failed")
    assert retried.status_code == 200 and retried.json()["retried"] == 9 - len(done_before)
    run(job_id)
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETED and job.completed_cells == 9 and job.failed_cells == 0
    after = dict(
        GenerationOutput.objects.filter(job_id=job_id, pk__in=done_before).values_list(
            "pk", "completed_at"
        )
    )
    assert after == done_before  # the calls that had succeeded were not asked again
    assert Judgment.objects.filter(judge_id=good["id"], parse_status=ParseStatus.OK).count() == 9
    nothing = api(people["manager"]).post(f"/api/judges/{good['id']}/retry-failed")
    assert nothing.status_code == 409


def test_the_budget_pauses_a_judge_run(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    judge = create_judge(
        api,
        people["manager"],
        scenario,
        name="Cheap",
        model=mock_judge.pk,
        max_tokens=100,
        budget_usd="0.0015",
    )
    job_id = run_judge(api, people["manager"], judge)
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.PAUSED and "Budget reached" in job.status_message
    assert job.cost_usd <= Decimal("0.0015")
    made = Judgment.objects.filter(judge_id=judge["id"]).count()
    assert 0 < made < 9 and made == job.completed_cells


def test_judge_configuration_errors_and_permissions(api, people, team_a, team_b, mock_judge):
    scenario = make_scenario(people, team_a, "rating", {"dimensions": [{"name": "x"}]})
    url = f"/api/scenarios/{scenario.pk}/judges"
    manager = api(people["manager"])
    bad = manager.post(
        url,
        {"name": "", "model": 999, "temperatures": [3], "repetitions": 0, "swap": True},
        format="json",
    )
    assert bad.status_code == 400
    assert set(bad.json()["errors"]) >= {"name", "model", "temperatures", "repetitions", "swap"}
    batch_on_mock = manager.post(
        url, {"name": "B", "model": mock_judge.pk, "mode": "batch"}, format="json"
    )
    assert batch_on_mock.status_code == 400 and "mode" in batch_on_mock.json()["errors"]
    assert not scenario.judges.exists()

    body = {"name": "J", "model": mock_judge.pk}
    assert api(people["viewer"]).post(url, body, format="json").status_code == 403
    assert api(people["evaluator"]).post(url, body, format="json").status_code == 404
    assert api(people["outsider"]).post(url, body, format="json").status_code == 404
    judge = create_judge(api, people["manager"], scenario, **body)
    assert api(people["viewer"]).get(f"/api/judges/{judge['id']}").status_code == 200
    assert api(people["viewer"]).post(f"/api/judges/{judge['id']}/run").status_code == 403
    assert api(people["outsider"]).get(f"/api/judges/{judge['id']}").status_code == 404
    assert api(people["outsider"]).post(f"/api/judges/{judge['id']}/run").status_code == 404
    changed = manager.patch(f"/api/judges/{judge['id']}", {"repetitions": 3}, format="json")
    assert changed.status_code == 200 and changed.json()["repetitions"] == 3
    run_judge(api, people["manager"], judge)
    frozen = manager.patch(f"/api/judges/{judge['id']}", {"repetitions": 1}, format="json")
    assert frozen.status_code == 409
    assert manager.delete(f"/api/judges/{judge['id']}").status_code == 204
    assert not Judgment.objects.exists()


def test_judge_judgments_export_beside_the_human_ones(api, people, team_a, mock_judge):
    import csv
    import io

    scenario = make_scenario(people, team_a, "comparison", {})
    scenario_services.scenario_open(user=people["manager"], scenario=scenario)
    evaluator = api(people["evaluator"])
    task = evaluator.post(f"/api/evaluations/scenarios/{scenario.pk}/next").json()
    evaluator.post(
        f"/api/evaluations/assignments/{task['assignment']}/submit",
        {"answer": {"winner": "B"}},
        format="json",
    )
    judge = create_judge(
        api, people["manager"], scenario, name="Mock J", model=mock_judge.pk, swap=True
    )
    run_judge(api, people["manager"], judge, tasks=[Task.objects.filter(scenario=scenario)[0].pk])
    raw = b"".join(
        api(people["manager"]).post(f"/api/scenarios/{scenario.pk}/export/csv").streaming_content
    )
    table = list(csv.DictReader(io.StringIO(raw.decode())))
    kinds = Counter(row["rater_kind"] for row in table)
    assert kinds == {"human": 1, "judge": 2}
    human = next(r for r in table if r["rater_kind"] == "human")
    assert human["winner"] == "B" and human["judge_model"] == "" and human["parse_status"] == ""
    judged = [r for r in table if r["rater_kind"] == "judge"]
    assert {r["rater"] for r in judged} == {"Mock J"} and {r["swapped"] for r in judged} == {
        "True",
        "False",
    }
    for row in judged:
        assert row["judge_model"] == "mock-judge" and row["judge_prompt"].startswith("Default")
        assert row["winner"] in ("A", "B", "tie") and Decimal(row["cost_usd"]) > 0
        assert row["model_a"].startswith("model-")  # unblinded
    body = api(people["manager"]).post(f"/api/scenarios/{scenario.pk}/export/json")
    data = json.loads(b"".join(body.streaming_content))
    judge_rows = [j for j in data["judgments"] if j["rater_kind"] == "judge"]
    assert len(judge_rows) == 2 and all(j["raw_reply"].startswith("{") for j in judge_rows)


def test_the_admin_lists_judges_and_runs_them_with_the_same_service(
    api, people, team_a, mock_judge
):
    from django.test import Client

    from evaluations.models import JudgeRun

    scenario = make_scenario(people, team_a, "comparison", {})
    judge = create_judge(api, people["manager"], scenario, name="Admin J", model=mock_judge.pk)
    client = Client()
    client.force_login(people["manager"])
    listing = client.get("/admin/evaluations/llmjudge/")
    assert listing.status_code == 200 and "Admin J" in listing.content.decode()
    client.post(
        "/admin/evaluations/llmjudge/",
        {"action": "run_unjudged", "_selected_action": [judge["id"]]},
    )
    run = JudgeRun.objects.get(judge_id=judge["id"])
    assert run.job.total_cells == 9 and run.job.status == JobStatus.RUNNING
    outsider = Client()
    outsider.force_login(people["outsider"])
    assert "Admin J" not in outsider.get("/admin/evaluations/llmjudge/").content.decode()
    # Another team's judge does not exist for them.
    assert outsider.get(f"/admin/evaluations/llmjudge/{judge['id']}/change/").status_code == 404


def test_the_scenario_page_adds_estimates_and_runs_a_judge(api, people, team_a, mock_judge):
    from django.test import Client

    scenario = make_scenario(people, team_a, "comparison", {})
    page_url = f"/scenarios/{scenario.pk}"
    client = Client()
    client.force_login(people["manager"])
    page = client.get(page_url).content.decode()
    assert "Add a judge" in page and "Mock judge" not in page and "Judge (mock)" in page
    bad = client.post(f"{page_url}/judges", {"name": "", "model": str(mock_judge.pk)}, follow=True)
    assert "No judge was added" in bad.content.decode() and not scenario.judges.exists()
    client.post(
        f"{page_url}/judges",
        {
            "name": "Page judge",
            "model": str(mock_judge.pk),
            "temperatures": "0, 0.7",
            "repetitions": "2",
            "swap": "1",
            "mode": "live",
        },
    )
    judge = scenario.judges.get()
    assert judge.temperatures == [0.0, 0.7] and judge.repetitions == 2 and judge.swap
    estimate = client.post(f"/judges/{judge.pk}/estimate").content.decode()
    assert "72 calls" in estimate  # 9 tasks x 2 orders x 2 repetitions x 2 temperatures
    started = client.post(f"/judges/{judge.pk}/run")
    job = GenerationJob.objects.get(judge_run__judge=judge)
    assert started["Location"] == f"/generation/jobs/{job.pk}"
    run(job.pk)
    page = client.get(page_url).content.decode()
    assert "Page judge" in page and "72/72" in page
    job_page = client.get(f"/generation/jobs/{job.pk}").content.decode()
    assert f"/scenarios/{scenario.pk}#judges" in job_page
    assert "Evaluate these outputs" not in job_page
    # A viewer sees the judges, not the forms; another team sees nothing.
    viewer = Client()
    viewer.force_login(people["viewer"])
    seen = viewer.get(page_url).content.decode()
    assert "Page judge" in seen and "Add a judge" not in seen
    assert viewer.post(f"/judges/{judge.pk}/run").status_code == 403
    outsider = Client()
    outsider.force_login(people["outsider"])
    assert outsider.post(f"/judges/{judge.pk}/run").status_code == 404
    client.post(f"/judges/{judge.pk}/delete")
    assert not scenario.judges.exists() and not Judgment.objects.exists()


def test_a_grid_of_judges_prompt_by_model_by_thinking(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    strict = make_version(
        PromptTemplateFactory(team=team_a, name="Strict judge"),
        [
            ("System", 'Be strict. Reply {"winner": "A" | "B" | "tie"}.'),
            ("", "Response A:\n{{response_a}}\n\nResponse B:\n{{response_b}}"),
        ],
    )
    url = f"/api/scenarios/{scenario.pk}/judges"
    body = {
        "grid": {
            "prompt_versions": [None, strict.pk],
            "models": [
                {"model": mock_judge.pk},
                {"model": mock_judge.pk, "params": {"thinking": True}},
            ],
        },
        "swap": True,
        "temperatures": [0.0],
    }
    made = api(people["manager"]).post(url, body, format="json")
    assert made.status_code == 201, made.json()
    names = sorted(j["name"] for j in made.json())
    assert names == sorted(
        [
            "Judge · Default judge: comparison v1",
            "Judge · Strict judge v1",
            "Judge thinking=True · Default judge: comparison v1",
            "Judge thinking=True · Strict judge v1",
        ]
    )
    # Each is a rater of its own over the same tasks, in both orders.
    for judge in made.json():
        run_judge(api, people["manager"], judge)
    per_judge = Counter(Judgment.objects.values_list("judge__name", flat=True))
    assert set(per_judge.values()) == {18} and len(per_judge) == 4
    bad = api(people["manager"]).post(
        url, body | {"grid": {"models": [{"model": mock_judge.pk}, {"model": 999}]}}, format="json"
    )
    assert bad.status_code == 400 and scenario.judges.count() == 4  # none of them made


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("budget_usd", "1e20"),
        ("budget_usd", "100000000"),
        ("budget_usd", "0.00001"),
        ("max_tokens", 10**20),
        ("max_tokens", 5e9),
        ("max_tokens", 1_000_001),
        ("repetitions", 10**20),
    ],
)
def test_judge_refuses_what_its_run_would_refuse(api, people, team_a, mock_judge, field, value):
    # The judge's bounds are the generation job's (evalplatform.validation): nothing is stored
    # that its own run, the judges list or the analytics would then choke on.
    scenario = make_scenario(people, team_a, "rating", {"dimensions": [{"name": "x"}]})
    body = {"name": "J", "model": mock_judge.pk, field: value}
    bad = api(people["manager"]).post(f"/api/scenarios/{scenario.pk}/judges", body, format="json")
    assert bad.status_code == 400 and set(bad.json()["errors"]) == {field}
    assert not scenario.judges.exists()
    edge = {"budget_usd": "99999999.9999", "max_tokens": 1_000_000, "repetitions": 20}[field]
    judge = create_judge(api, people["manager"], scenario, **{**body, field: edge})
    listed = api(people["manager"]).get(f"/api/scenarios/{scenario.pk}/judges")
    assert listed.status_code == 200 and judge["id"] in [j["id"] for j in listed.json()]
