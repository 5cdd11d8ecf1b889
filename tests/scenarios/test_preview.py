"""Designs you can see before you create them: the preview's counts equal the tasks created
for every design, uploads and job conversions alike; previews write nothing; designs past
the limit are refused before anything is built; a sample never lists every pair."""

from __future__ import annotations

import json

import pytest

from scenarios.models import Scenario, Task
from tests.factories import ConnectionFactory, LLMModelFactory

SCENARIOS = "/api/scenarios"
RUBRIC = {"dimensions": [{"name": "Clarity", "min": 1, "max": 5}]}
DESIGNS = [
    ("rating", RUBRIC),
    ("labeling", {"labels": ["good", "bad"]}),
    ("ranking", {}),
    ("comparison", {}),
    ("comparison", {"reverse_share": 0.5}),
    ("comparison", {"sample_count": 7, "reverse_share": 0.3}),
    ("comparison", {"sample_share": 0.25}),
    ("comparison", {"max_pairs_per_item": 5}),
    ("comparison", {"max_pairs_per_item": 9, "sample_count": 11, "reverse_share": 1}),
    ("comparison", {"pairing": "across", "sample_share": 0.1, "reverse_share": 0.2}),
    ("comparison", {"pairing": "across"}),
]


def convert(api, user, job, **body):
    return api(user).post(f"/api/generation/jobs/{job.pk}/to-scenario", body, format="json")


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "config"), DESIGNS)
def test_a_conversions_preview_counts_the_tasks_it_makes(api, creator, finished_job, kind, config):
    body = {"type": kind, "config": config, "overlap": 3, "seed": 5}
    preview = convert(api, creator, finished_job, preview=True, **body)
    assert preview.status_code == 200, preview.json()
    assert not Scenario.objects.exists()  # nothing written
    made = convert(api, creator, finished_job, name=f"{kind} {config}", **body)
    assert made.status_code == 201, made.json()
    tasks = Task.objects.filter(scenario_id=made.json()["id"]).count()
    shown = preview.json()
    assert shown["tasks"] == tasks and shown["judgments"] == 3 * tasks
    assert (shown["items"], shown["variants"], shown["allowed"]) == (3, 48, True)
    assert shown["human_hours"] > 0


def rows(items, variants, width=40):
    return "\n".join(
        json.dumps({"item_id": f"i{i}", "variant_id": f"v{v}", "content": "x" * width})
        for i in range(items)
        for v in range(variants)
    )


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "config"), DESIGNS)
def test_an_uploads_preview_counts_the_tasks_it_makes(api, creator, team_a, kind, config):
    body = {"team": team_a.slug, "type": kind, "config": config, "format": "jsonl"}
    content = rows(6, 5)
    preview = api(creator).post(f"{SCENARIOS}/preview", body | {"content": content}, format="json")
    assert preview.status_code == 200, preview.json()
    assert not Scenario.objects.exists()
    made = api(creator).post(SCENARIOS, body | {"name": "S", "content": content}, format="json")
    assert made.status_code == 201, made.json()
    assert preview.json()["tasks"] == Task.objects.filter(scenario_id=made.json()["id"]).count()


@pytest.mark.django_db
def test_a_design_past_the_limit_is_refused_before_anything_is_built(
    api, creator, team_a, settings
):
    settings.SCENARIO_MAX_TASKS = 1000
    # 8,000 single-variant items compared across items: 31,996,000 pairs.
    body = {"team": team_a.slug, "type": "comparison", "format": "jsonl"}
    body |= {"config": {"pairing": "across"}, "content": rows(8000, 1, width=5)}
    preview = api(creator).post(f"{SCENARIOS}/preview", body, format="json")
    assert preview.status_code == 200
    assert preview.json()["tasks"] == 31_996_000 and preview.json()["allowed"] is False
    refused = api(creator).post(SCENARIOS, body | {"name": "Huge"}, format="json")
    assert (
        refused.status_code == 400 and "31,996,000 tasks" in refused.json()["errors"]["config"][0]
    )
    assert not Scenario.objects.exists()
    # A sample of them is built without listing the 32 million pairs.
    body["config"] |= {"sample_count": 500, "reverse_share": 0.1}
    made = api(creator).post(SCENARIOS, body | {"name": "Sampled"}, format="json")
    assert made.status_code == 201, made.json()
    tasks = Task.objects.filter(scenario_id=made.json()["id"])
    assert tasks.count() == 550 and tasks.filter(reverse_of__isnull=False).count() == 50
    pairs = {frozenset((t.variant_a_id, t.variant_b_id)) for t in tasks}
    assert len(pairs) == 500 and all(len(p) == 2 for p in pairs)


@pytest.mark.django_db
def test_the_preview_estimates_a_judges_cost(api, creator, team_a):
    model = LLMModelFactory(
        connection=ConnectionFactory(team=team_a, kind="mock"),
        input_price_per_mtok=1,
        output_price_per_mtok=4,
    )
    body = {"team": team_a.slug, "type": "comparison", "format": "jsonl", "content": rows(4, 3)}
    judged = api(creator).post(
        f"{SCENARIOS}/preview", body | {"judge_model": model.pk}, format="json"
    )
    judge = judged.json()["judge"]
    assert judge["calls"] == 12 and judge["model"] == model.pk
    assert float(judge["cost_usd"]) > 0 and judge["output_tokens"] == 12 * 150
    other = LLMModelFactory(connection=ConnectionFactory(kind="mock"))  # another team's
    for bad in (other.pk, "x", 10**20, True):
        refused = api(creator).post(
            f"{SCENARIOS}/preview", body | {"judge_model": bad}, format="json"
        )
        assert refused.status_code == 400 and "judge_model" in refused.json()["errors"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"max_pairs_per_item": 0}, "config.max_pairs_per_item"),
        ({"max_pairs_per_item": 10**20}, "config.max_pairs_per_item"),
        ({"pairing": "across", "max_pairs_per_item": 3}, "config.max_pairs_per_item"),
        ({"sample_count": 10**20}, "config.sample_count"),
    ],
)
def test_bad_pair_designs_are_400(api, creator, team_a, config, field):
    body = {"team": team_a.slug, "type": "comparison", "format": "jsonl", "content": rows(2, 3)}
    refused = api(creator).post(f"{SCENARIOS}/preview", body | {"config": config}, format="json")
    assert refused.status_code == 400 and field in refused.json()["errors"]


@pytest.mark.django_db
def test_a_drafts_tasks_are_made_again_with_another_design(api, creator, team_a, member):
    from evalplatform.accounts.roles import Role
    from evaluations.models import Judgment

    manager = member(team_a, Role.MANAGER)
    body = {"team": team_a.slug, "type": "comparison", "format": "jsonl", "name": "D"}
    made = api(manager).post(SCENARIOS, body | {"content": rows(4, 4)}, format="json")
    scenario = Scenario.objects.get(pk=made.json()["id"])
    assert scenario.tasks.count() == 24  # 6 pairs in each of 4 items
    url = f"{SCENARIOS}/{scenario.pk}/regenerate"
    design = {"config": {"max_pairs_per_item": 2, "reverse_share": 0.5}, "seed": 3}
    preview = api(creator).post(
        f"{SCENARIOS}/preview", body | {"content": rows(4, 4)} | design, format="json"
    )
    again = api(manager).post(url, design, format="json")
    assert again.status_code == 200, again.json()
    scenario.refresh_from_db()
    assert scenario.tasks.count() == preview.json()["tasks"] == 12 and scenario.seed == 3
    assert scenario.config["max_pairs_per_item"] == 2 and scenario.variants.count() == 16
    for bad, field in (
        ({"config": {"max_pairs_per_item": -1}}, "config.max_pairs_per_item"),
        ({"seed": 10**30}, "seed"),
        ({"name": "x"}, "name"),
    ):
        refused = api(manager).post(url, bad, format="json")
        assert refused.status_code == 400 and field in refused.json()["errors"], refused.json()
    assert scenario.tasks.count() == 12  # unchanged
    viewer = member(team_a, Role.VIEWER)
    assert api(viewer).post(url, design, format="json").status_code == 403
    task = scenario.tasks.first()
    Judgment.objects.create(
        scenario=scenario, task=task, rater_kind="external", payload={"winner": "A"}
    )
    assert api(manager).post(url, design, format="json").status_code == 409


@pytest.mark.django_db
def test_digits_that_are_not_numbers_are_field_errors_not_500s(api, creator, team_a, finished_job):
    from django.test import Client

    rubric = {"dimensions": [{"name": "C", "min": 1, "max": 5, "anchors": {"²": "odd"}}]}
    body = {"team": team_a.slug, "type": "rating", "format": "jsonl", "content": rows(2, 2)}
    refused = api(creator).post(f"{SCENARIOS}/preview", body | {"config": rubric}, format="json")
    assert refused.status_code == 400, refused.json()
    page = Client()
    page.force_login(creator)
    url = f"/generation/jobs/{finished_job.pk}/to-scenario"
    for field in ("seed", "sample", "max_pairs_per_item", "overlap"):
        form = {"type": "comparison", field: "²", "repetitions": ["²"], "models": ["9" * 5000]}
        shown = page.post(f"{url}/preview", form)
        assert shown.status_code == 200 and "cannot be made" in shown.content.decode(), field
        made = page.post(url, form | {"name": f"Odd {field}"})
        assert made.status_code == 400 and not Scenario.objects.filter(name=f"Odd {field}")
