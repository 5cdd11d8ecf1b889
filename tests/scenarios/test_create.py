"""Scenarios from a generation job and from uploads, through the API: the four types, the
seeded comparison design, validation (400, nothing created), permissions, lifecycle."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.test import override_settings

from evalplatform.accounts.roles import Role
from scenarios.models import Scenario, Task, Variant

SCENARIOS = "/api/scenarios"
RUBRIC = {
    "dimensions": [
        {"name": "Clarity", "min": 1, "max": 5, "anchors": {"1": "unclear", "5": "crystal"}},
        {"name": "Accuracy", "min": 0, "max": 10, "justification": True},
    ]
}


def convert(api, user, job, **body):
    return api(user).post(f"/api/generation/jobs/{job.pk}/to-scenario", body, format="json")


def created(response):
    assert response.status_code == 201, response.json()
    return Scenario.objects.get(pk=response.json()["id"])


@pytest.mark.django_db
def test_each_type_from_a_generation_job(api, creator, finished_job):
    first_model = finished_job.models.order_by("position").first().pk
    first_prompt = finished_job.prompts.order_by("position").first().pk
    only_one = {"models": [first_model], "prompts": [first_prompt]}

    rating = created(convert(api, creator, finished_job, name="R", type="rating", config=RUBRIC))
    assert rating.items.count() == 3 and rating.variants.count() == 48
    assert rating.tasks.count() == 48 and not rating.tasks.filter(variant_a=None).exists()
    assert rating.config["dimensions"][1]["justification"] is True
    variant = rating.variants.select_related("source_output").first()
    assert variant.model_label and variant.prompt_label
    assert variant.content == f"Answer number {variant.source_output.pk}"
    assert rating.source["kind"] == "generation_job" and rating.status == "draft" and rating.blind

    ranking = created(convert(api, creator, finished_job, name="K", type="ranking"))
    tasks = list(ranking.tasks.select_related("item"))
    assert len(tasks) == 3
    for task in tasks:
        assert sorted(task.order) == sorted(task.item.variants.values_list("pk", flat=True))

    labels = {"labels": ["good", "bad", "off-topic"], "multiple": True}
    labeling = created(
        convert(api, creator, finished_job, name="L", type="labeling", config=labels)
    )
    assert labeling.tasks.count() == 48 and labeling.config["multiple"] is True

    comparison = created(
        convert(
            api,
            creator,
            finished_job,
            name="C",
            type="comparison",
            outputs=only_one,
            config={"ties": False},
        )
    )
    # 4 variants an item (2 repetitions x 2 temperatures): 6 pairs an item, 3 items.
    assert comparison.variants.count() == 12 and comparison.tasks.count() == 18
    for task in comparison.tasks.select_related("variant_a", "variant_b"):
        assert task.variant_a.item_id == task.variant_b.item_id == task.item_id
    assert comparison.config["ties"] is False

    listed = api(creator).get(SCENARIOS).json()["results"]
    assert sorted(s["name"] for s in listed) == ["C", "K", "L", "R"]


def pairs_of(scenario):
    return [
        (t.variant_a.variant_id, t.variant_b.variant_id, t.reverse_of_id is not None)
        for t in scenario.tasks.select_related("variant_a", "variant_b").order_by("position")
    ]


@pytest.mark.django_db
def test_the_comparison_design_is_seeded_sampled_and_reversible(api, creator, finished_job):
    def make(name, **config):
        body = {"name": name, "type": "comparison", "seed": config.pop("seed", 7)}
        return created(convert(api, creator, finished_job, **body, config=config))

    full = make("all")
    assert full.tasks.count() == 3 * 120  # every pair of an item's 16 variants
    again, other = make("again"), make("other", seed=8)
    assert pairs_of(full) == pairs_of(again) and pairs_of(full) != pairs_of(other)
    # Presentation order is drawn per pair: about half show the earlier variant first.
    earlier_first = sum(
        t.variant_a.position < t.variant_b.position
        for t in full.tasks.select_related("variant_a", "variant_b")
    )
    assert 0.4 < earlier_first / 360 < 0.6

    assert make("fifty", sample_count=50).tasks.count() == 50
    assert make("half", sample_share=0.5).tasks.count() == 180

    reversed_ = make("rev", sample_count=40, reverse_share=0.25)
    tasks = list(reversed_.tasks.select_related("reverse_of"))
    mirrors = [t for t in tasks if t.reverse_of_id is not None]
    assert len(tasks) == 50 and len(mirrors) == 10
    for task in mirrors:
        original = task.reverse_of
        assert (task.variant_a_id, task.variant_b_id) == (
            original.variant_b_id,
            original.variant_a_id,
        )
    unordered = Counter(frozenset((t.variant_a_id, t.variant_b_id)) for t in tasks)
    assert sorted(unordered.values()).count(2) == 10  # each mirrored pair asked twice
    positions = [t.position for t in tasks]
    assert positions == list(range(50))


@pytest.mark.django_db
def test_pairs_across_the_whole_variant_set(api, creator, finished_job):
    first_model = finished_job.models.order_by("position").first().pk
    first_prompt = finished_job.prompts.order_by("position").first().pk
    scenario = created(
        convert(
            api,
            creator,
            finished_job,
            name="Across",
            type="comparison",
            outputs={"models": [first_model], "prompts": [first_prompt]},
            config={"pairing": "across"},
        )
    )
    assert scenario.tasks.count() == 66  # 12 variants, every pair
    assert scenario.tasks.filter(item=None).count() == 66


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "rating", "config": {}}, "config.dimensions"),
        (
            {"type": "rating", "config": {"dimensions": [{"name": "x", "min": 5, "max": 5}]}},
            "config.dimensions[0].scale",
        ),
        (
            {"type": "rating", "config": {"dimensions": [{"name": "x"}, {"name": "x"}]}},
            "config.dimensions[1].name",
        ),
        ({"type": "labeling", "config": {"labels": ["only"]}}, "config.labels"),
        (
            {"type": "comparison", "config": {"sample_count": 5, "sample_share": 0.5}},
            "config.sample_count",
        ),
        ({"type": "comparison", "config": {"reverse_share": 2}}, "config.reverse_share"),
        ({"type": "essay"}, "type"),
        ({"type": "ranking", "overlap": 0}, "overlap"),
        ({"type": "ranking", "outputs": {"models": [999999]}}, "outputs.models"),
        ({"type": "ranking", "outputs": {"status": ["done"]}}, "outputs.status"),
        ({"type": "ranking", "outputs": {"status": ["failed"]}}, "items"),
    ],
)
def test_bad_conversions_are_400_and_create_nothing(api, creator, finished_job, body, field):
    response = convert(api, creator, finished_job, name="Bad", **body)
    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"], response.json()
    assert not Scenario.objects.exists() and not Variant.objects.exists()


@pytest.mark.django_db
def test_a_ranking_needs_two_variants_an_item(api, creator, finished_job):
    first_model = finished_job.models.order_by("position").first().pk
    first_prompt = finished_job.prompts.order_by("position").first().pk
    finished_job.outputs.exclude(
        model_config_id=first_model, prompt_id=first_prompt, repetition=0, temperature=0.0
    ).update(status="failed")
    response = convert(api, creator, finished_job, name="Thin", type="ranking")
    assert response.status_code == 400
    assert "at least two variants" in response.json()["errors"]["items"][0]
    assert "s0, s1, s2" in response.json()["errors"]["items"][0]


@pytest.mark.django_db
def test_who_may_convert(api, creator, finished_job, team_a, team_b, member):
    body = {"name": "P", "type": "ranking"}
    viewer = member(team_a, Role.VIEWER)
    assert convert(api, viewer, finished_job, **body).status_code == 403
    outsider = member(team_b, Role.ADMIN)
    assert convert(api, outsider, finished_job, **body).status_code == 404
    evaluator = member(team_a, Role.EVALUATOR)
    assert convert(api, evaluator, finished_job, **body).status_code == 404
    assert api(evaluator).get(SCENARIOS).status_code == 403  # evaluators work blind elsewhere
    scenario = created(convert(api, creator, finished_job, **body))
    assert api(outsider).get(f"{SCENARIOS}/{scenario.pk}").status_code == 404
    assert api(outsider).get(f"{SCENARIOS}/{scenario.pk}/variants").status_code == 404
    assert api(viewer).get(f"{SCENARIOS}/{scenario.pk}/variants").status_code == 200
    assert not Scenario.objects.exclude(pk=scenario.pk).exists()


CSV = """item_id,variant_id,content,model,prompt,context
q1,a,First answer to q1,gpt,short,"{""question"": ""Why?""}"
q1,b,Second answer to q1,claude,short,"{""question"": ""Why?""}"
q2,a,First answer to q2,gpt,short,{}
q2,b,Second answer to q2,claude,short,{}
q2,c,Third answer to q2,claude,long,{}
"""


@pytest.mark.django_db
def test_a_scenario_from_an_upload(api, creator, team_a):
    from django.core.files.uploadedfile import SimpleUploadedFile

    config = {"team": "team-a", "name": "Uploaded", "type": "comparison", "seed": 1}
    response = api(creator).post(
        SCENARIOS,
        {
            "file": SimpleUploadedFile("pairs.csv", CSV.encode(), "text/csv"),
            "config": json.dumps(config),
        },
        format="multipart",
    )
    scenario = created(response)
    assert scenario.items.count() == 2 and scenario.variants.count() == 5
    assert scenario.tasks.count() == 1 + 3
    q1 = scenario.items.get(item_id="q1")
    assert q1.context == {"question": "Why?"}
    assert set(q1.variants.values_list("model_label", flat=True)) == {"gpt", "claude"}
    assert scenario.source == {
        "kind": "upload",
        "filename": "pairs.csv",
        "format": "csv",
        "rows": 5,
    }

    jsonl = "\n".join(
        json.dumps({"item_id": "x", "variant_id": v, "content": f"text {v}"}) for v in "abc"
    )
    body = {"team": "team-a", "name": "Lines", "type": "ranking", "format": "jsonl"}
    ranking = created(api(creator).post(SCENARIOS, body | {"content": jsonl}, format="json"))
    (task,) = ranking.tasks.all()
    assert len(task.order) == 3


@pytest.mark.django_db
def test_bad_upload_rows_are_named_by_line_and_nothing_is_created(api, creator, team_a):
    bad = "item_id,variant_id,content\nq1,a,fine\n,b,no item\nq1,a,twice\nq2,c,\n"
    body = {"team": "team-a", "name": "Bad", "type": "rating", "config": RUBRIC, "format": "csv"}
    response = api(creator).post(SCENARIOS, body | {"content": bad}, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors["line 3"] == ["item_id is missing."]
    assert errors["line 4"] == ["variant a of item q1 appears twice."]
    assert errors["line 5"] == ["content is missing."]
    assert not Scenario.objects.exists()
    missing = api(creator).post(SCENARIOS, body, format="json")
    assert missing.status_code == 400 and "content" in missing.json()["errors"]


@pytest.mark.django_db
def test_an_upload_past_the_rows_a_scenario_holds_is_refused_while_read(api, creator, team_a):
    rows = "\n".join(f"q{n // 2},v{n % 2},answer {n}" for n in range(2_000))
    body = {"team": "team-a", "name": "Big", "type": "comparison", "config": {}, "format": "csv"}
    with override_settings(SCENARIO_MAX_VARIANTS=500):
        response = api(creator).post(
            SCENARIOS, body | {"content": "item_id,variant_id,content\n" + rows}, format="json"
        )
        assert response.status_code == 400
        assert response.json()["errors"]["source.file"] == [
            "More than 500 rows: a scenario's upload holds at most 500 (one variant each)."
        ]
        assert not Scenario.objects.exists()
        fits = "\n".join(rows.splitlines()[:500])
        made = api(creator).post(
            SCENARIOS, body | {"content": "item_id,variant_id,content\n" + fits}, format="json"
        )
        assert made.status_code == 201, made.json()


@pytest.mark.django_db
def test_the_lifecycle(api, creator, finished_job, team_a, member):
    scenario = created(convert(api, creator, finished_job, name="Life", type="ranking"))
    client = api(creator)
    url = f"{SCENARIOS}/{scenario.pk}"
    assert client.post(f"{url}/open").status_code == 403  # creators do not manage
    manager = api(member(team_a, Role.MANAGER))
    changed = manager.patch(url, {"name": "Life 2", "overlap": 3}, format="json")
    assert changed.status_code == 200 and changed.json()["overlap"] == 3
    assert manager.patch(url, {"type": "rating"}, format="json").status_code == 400
    assert manager.post(f"{url}/close").status_code == 409
    opened = manager.post(f"{url}/open").json()
    assert opened["status"] == "open" and opened["opened_at"]
    assert manager.patch(url, {"name": "Late"}, format="json").status_code == 409
    assert manager.delete(url).status_code == 409
    assert manager.post(f"{url}/open").status_code == 409
    assert manager.post(f"{url}/close").json()["status"] == "closed"
    tasks = manager.get(f"{url}/tasks").json()
    assert tasks["count"] == 3 and len(tasks["results"][0]["order"]) == 16
    assert Task.objects.filter(scenario=scenario).count() == 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"), [("seed", 10**20), ("seed", -1), ("overlap", 10**20), ("overlap", 0)]
)
def test_numbers_past_every_column_are_field_errors(api, creator, finished_job, field, value):
    body = {"name": "Bounded", "type": "comparison", field: value}
    response = convert(api, creator, finished_job, **body)
    assert response.status_code == 400 and field in response.json()["errors"]
    assert not Scenario.objects.filter(name="Bounded").exists()
    edge = {"seed": 2**31 - 1, "overlap": 50}[field]
    assert created(convert(api, creator, finished_job, **{**body, field: edge})).pk
