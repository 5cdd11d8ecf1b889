from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

import factory
from django.contrib.auth import get_user_model

from evalplatform.accounts.models import Membership, Team
from evalplatform.accounts.roles import Role
from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
from evalplatform.providers.models import LLMModel, ProviderConnection, ProviderKind
from evaluations.models import Judgment, LLMJudge, RaterKind
from generation.models import GenerationJob
from scenarios.models import Scenario, Task


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.PostGenerationMethodCall("set_password", "pw-Secret-123")

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")
    slug = factory.Sequence(lambda n: f"team-{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = Role.VIEWER


class ConnectionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ProviderConnection

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"conn-{n}")
    kind = ProviderKind.MOCK


class LLMModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LLMModel

    connection = factory.SubFactory(ConnectionFactory)
    model_id = factory.Sequence(lambda n: f"model-{n}")
    display_name = factory.LazyAttribute(lambda m: m.model_id.title())
    input_price_per_mtok = Decimal("1.00")
    output_price_per_mtok = Decimal("4.00")


class PromptTemplateFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PromptTemplate

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"prompt-{n}")


def make_version(
    template: PromptTemplate, blocks: list[tuple[str, str]], **fields
) -> PromptVersion:
    number = template.versions.count() + 1
    version = PromptVersion.objects.create(template=template, number=number, **fields)
    for position, (title, body) in enumerate(blocks):
        PromptBlock.objects.create(version=version, position=position, title=title, body=body)
    return version


def member_of(team: Team, role: str = Role.VIEWER, **user_fields) -> Any:
    """A new user holding ``role`` in ``team``."""
    user = UserFactory(**user_fields)
    MembershipFactory(user=user, team=team, role=role)
    return user


# Generation jobs


class GenerationJobFactory(factory.Factory):
    """A generation job made as the API makes one (``generation.planning.job_plan``, then
    ``generation.services.job_create``), not started: ``items`` texts of a manual source,
    through ``prompt_version`` and ``llm_model`` (by default a new prompt and a mock model of
    ``team``), by ``created_by`` (by default a new creator of ``team``). Any other keyword
    is a field of the API's body (``temperatures``, ``repetitions``, ``source``...)."""

    class Meta:
        model = GenerationJob

    team = factory.SubFactory(TeamFactory)
    created_by = factory.LazyAttribute(lambda o: member_of(o.team, Role.CREATOR))
    llm_model = factory.LazyAttribute(
        lambda o: LLMModelFactory(connection=ConnectionFactory(team=o.team, kind="mock"))
    )
    prompt_version = factory.LazyAttribute(
        lambda o: make_version(PromptTemplateFactory(team=o.team), [("", "Answer: {{content}}")])
    )
    name = factory.Sequence(lambda n: f"Job {n}")
    items = 3

    @classmethod
    def _create(cls, model_class, *, team, created_by, llm_model, prompt_version, items, **body):
        from generation import planning, services

        texts = [{"id": f"s{n}", "content": f"Text number {n} about rivers."} for n in range(items)]
        data = {
            "team": team.slug,
            "source": {"type": "manual", "format": "json", "content": json.dumps(texts)},
            "prompt_versions": [prompt_version.pk],
            "models": [llm_model.pk],
            "max_tokens": 100,
        } | body
        plan = planning.job_plan(user=created_by, data=data)
        return services.job_create(user=created_by, plan=plan)


# Scenarios: one factory per type, each with a working default configuration.

SCENARIO_CONFIGS: dict[str, dict[str, Any]] = {
    "rating": {"dimensions": [{"name": "quality", "min": 1, "max": 5}]},
    "ranking": {},
    "comparison": {"ties": True},
    "labeling": {"labels": ["good", "bad"]},
}


def scenario_rows(items: int = 3, variants: tuple[str, ...] = ("a", "b")) -> list[dict]:
    """Upload rows: ``items`` items of one text per variant, ``model-<variant>`` each."""
    return [
        {
            "item_id": f"i{n}",
            "variant_id": variant,
            "content": f"Answer {variant} to item {n}",
            "model": f"model-{variant}",
        }
        for n in range(items)
        for variant in variants
    ]


class ScenarioFactory(factory.Factory):
    """A scenario made as an upload makes one (``scenarios.services.scenario_from_upload``:
    its items, variants and tasks by the type's design): ``rows`` the uploaded rows (dicts
    of ``item_id``, ``variant_id``, ``content`` and optionally ``model``, ``prompt``,
    ``context``), ``config`` the type's settings (by default ``SCENARIO_CONFIGS``'),
    ``created_by`` a manager of ``team`` (by default a new one), opened when ``open_it``.
    Any other keyword (``overlap``, ``seed``, ``context_fields``...) is a field of the
    upload. Use the type's own factory below."""

    class Meta:
        model = Scenario

    team = factory.SubFactory(TeamFactory)
    created_by = factory.LazyAttribute(lambda o: member_of(o.team, Role.MANAGER))
    type = "rating"
    name = factory.Sequence(lambda n: f"Scenario {n}")
    config = factory.LazyAttribute(lambda o: copy.deepcopy(SCENARIO_CONFIGS[o.type]))
    rows = factory.LazyFunction(scenario_rows)
    open_it = False

    @classmethod
    def _create(cls, model_class, *, team, created_by, rows, open_it, **data):
        from scenarios import services

        raw = "\n".join(json.dumps(row) for row in rows).encode()
        scenario = services.scenario_from_upload(
            user=created_by, team=team, data=data | {"format": "jsonl"}, raw=raw
        )
        if open_it:
            scenario = services.scenario_open(user=created_by, scenario=scenario)
        return scenario


class RatingScenarioFactory(ScenarioFactory):
    type = "rating"


class RankingScenarioFactory(ScenarioFactory):
    type = "ranking"
    rows = factory.LazyFunction(lambda: scenario_rows(variants=("a", "b", "c")))


class ComparisonScenarioFactory(ScenarioFactory):
    type = "comparison"


class LabelingScenarioFactory(ScenarioFactory):
    type = "labeling"


# LLM judges and judgments


class LLMJudgeFactory(factory.Factory):
    """A judge of ``scenario`` made by the judge service (``judges.services.judge_create``,
    the team's default judge prompt unless ``prompt_version`` is given): ``llm_model`` by
    default the mock provider's judge model in the scenario's team, ``created_by`` the
    scenario's creator. Any other keyword is a field of the API's body (``temperatures``,
    ``repetitions``, ``swap``, ``mode``...)."""

    class Meta:
        model = LLMJudge

    scenario = factory.SubFactory(ComparisonScenarioFactory)
    created_by = factory.LazyAttribute(lambda o: o.scenario.created_by)
    llm_model = factory.LazyAttribute(
        lambda o: LLMModelFactory(
            connection=ConnectionFactory(team=o.scenario.team, kind="mock"),
            model_id="mock-judge",
            display_name="Judge",
        )
    )
    name = factory.Sequence(lambda n: f"Judge {n}")

    @classmethod
    def _create(cls, model_class, *, scenario, created_by, llm_model, **data):
        from evaluations.judges import services

        data = {"model": llm_model.pk} | data
        if "prompt_version" in data and isinstance(data["prompt_version"], PromptVersion):
            data["prompt_version"] = data["prompt_version"].pk
        return services.judge_create(user=created_by, scenario=scenario, data=data)


def presented_order(task: Task) -> list[int]:
    """A task's variant ids in the order it shows them (a pair's A then B)."""
    return list(task.order) or [v for v in (task.variant_a_id, task.variant_b_id) if v]


def default_payload(task: Task, presented: list[int]) -> dict[str, Any]:
    """A valid answer to ``task`` in its type's shape: the first shown wins (or is ranked
    first), the lowest score on every dimension, the first label."""
    scenario = task.scenario
    if scenario.type == "comparison":
        return {"winner": "A"}
    if scenario.type == "ranking":
        return {"ranking": list(presented)}
    if scenario.type == "labeling":
        return {"labels": scenario.config["labels"][:1]}
    return {"scores": {d["name"]: d["min"] for d in scenario.config["dimensions"]}}


class JudgmentFactory(factory.django.DjangoModelFactory):
    """A person's judgment of ``task`` (by default the first task of a new comparison
    scenario), stored as is (no service: any rater kind, any payload): shown in the task's
    order, answered with ``default_payload``."""

    class Meta:
        model = Judgment

    task = factory.LazyFunction(lambda: ComparisonScenarioFactory().tasks.first())
    scenario = factory.LazyAttribute(lambda o: o.task.scenario)
    rater_kind = RaterKind.HUMAN
    evaluator = factory.LazyAttribute(
        lambda o: (
            member_of(o.task.scenario.team, Role.EVALUATOR)
            if o.rater_kind == RaterKind.HUMAN
            else None
        )
    )
    presented = factory.LazyAttribute(lambda o: presented_order(o.task))
    payload = factory.LazyAttribute(lambda o: default_payload(o.task, o.presented))
