"""The seeded team the API fuzz and its siblings send requests about (``tests/core``: the
fixtures ``seeded_world`` and ``fuzz_world`` in its conftest.py)."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from evalplatform.accounts.roles import Role
from evalplatform.accounts.services import notify, token_create
from tests.factories import (
    ConnectionFactory,
    LLMModelFactory,
    MembershipFactory,
    PromptTemplateFactory,
    TeamFactory,
    UserFactory,
    make_version,
)


@dataclass
class World:
    """The seeded team: the token's key, and the ids each path parameter may take."""

    key: str
    ids: dict[str, list[Any]] = field(default_factory=dict)


@contextmanager
def rolled_back() -> Iterator[None]:
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def is_loopback(host: Any) -> bool:
    if host in ("localhost", "localhost.", None):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def seed_world(fake_url: str) -> World:
    from evaluations.invitations import services as invitations
    from evaluations.judges import services as judges
    from evaluations.workspace import services as evaluation_services
    from generation import planning
    from generation import services as generation_services
    from generation.models import GenerationOutput
    from scenarios import services as scenario_services

    team = TeamFactory(name="Fuzz", slug="fuzz")
    admin = UserFactory(username="fuzz-admin")
    MembershipFactory(user=admin, team=team, role=Role.ADMIN)
    # Another team's objects: fuzzed ids may land on them, and must answer 404 alike.
    TeamFactory(name="Other", slug="other")

    connection = ConnectionFactory(
        team=team, kind="openai", name="fake", base_url=fake_url, timeout_s=5
    )
    connection.set_api_key("sk-fuzz-0123456789abcdef")
    connection.save()
    model = LLMModelFactory(connection=connection, model_id="fuzz-model", display_name="Fuzz")
    template = PromptTemplateFactory(team=team, name="Summary")
    version = make_version(template, [("System", "You summarize."), ("", "{{content}}")])
    # Unused objects beside the used ones (which refuse edits and deletes with 409), so
    # fuzzed edits and deletes can succeed too.
    spare_connection = ConnectionFactory(
        team=team, kind="openai", name="spare", base_url=fake_url, timeout_s=5
    )
    spare_model = LLMModelFactory(connection=connection, model_id="spare-model")
    spare_template = PromptTemplateFactory(team=team, name="Spare")
    spare_version = make_version(
        spare_template, [("", "Say {{thing}}.")], sample_item={"thing": "hello"}
    )
    draft_version = make_version(template, [("", "Summarize: {{content}}")])

    rows = [{"id": f"s{n}", "content": f"Text number {n} about rivers."} for n in range(3)]
    plan = planning.job_plan(
        user=admin,
        data={
            "team": "fuzz",
            "name": "Study",
            "source": {"type": "manual", "format": "json", "content": json.dumps(rows)},
            "prompt_versions": [version.pk],
            "models": [model.pk],
            "repetitions": 1,
            "temperatures": [0.0],
            "max_tokens": 50,
        },
    )
    job = generation_services.job_create(user=admin, plan=plan)
    outputs = list(job.outputs.order_by("pk"))
    GenerationOutput.objects.filter(pk__in=[o.pk for o in outputs]).update(
        status="completed", content="An answer."
    )

    answers = {"good": "A careful, complete answer.", "bad": "No."}
    upload = "\n".join(
        json.dumps({"item_id": f"q{n}", "variant_id": name, "content": f"{text} ({n})"})
        for n in range(3)
        for name, text in answers.items()
    ).encode()
    draft = scenario_services.scenario_from_upload(
        user=admin,
        team=team,
        data={"name": "Draft", "type": "comparison", "config": {}, "format": "jsonl"},
        raw=upload,
    )
    scenario = scenario_services.scenario_from_upload(
        user=admin,
        team=team,
        data={"name": "Open", "type": "comparison", "config": {}, "format": "jsonl"},
        raw=upload,
    )
    scenario = scenario_services.scenario_open(user=admin, scenario=scenario)
    answered = evaluation_services.next_task(user=admin, scenario=scenario)
    assert answered is not None
    evaluation_services.submit(user=admin, assignment=answered, data={"answer": {"winner": "A"}})
    pending = evaluation_services.next_task(user=admin, scenario=scenario)
    assert pending is not None
    judge = judges.judge_create(
        user=admin, scenario=scenario, data={"name": "Fuzz judge", "model": model.pk}
    )
    judges.judge_run(user=admin, judge=judge, data={})  # queued on commit: never runs
    idle_judge = judges.judge_create(
        user=admin, scenario=scenario, data={"name": "Idle judge", "model": model.pk}
    )
    [(invitation, _)] = invitations.invite(
        user=admin, scenario=scenario, emails=["guest@example.org"], link_for=lambda t: t
    )
    notification = notify(user=admin, team=team, kind="info", message="Hello")
    spare, _ = token_create(user=admin, name="spare")
    _, key = token_create(user=admin, name="fuzz")
    return World(
        key=key,
        ids={
            "job": [job.pk],
            "output": [o.pk for o in outputs[:2]],
            "judge": [judge.pk, idle_judge.pk],
            "assignment": [answered.pk, pending.pk],
            "scenario": [scenario.pk, draft.pk],
            "invitation": [invitation.pk],
            "notification": [notification.pk],
            "template": [template.pk, spare_template.pk],
            "version": [version.pk, draft_version.pk, spare_version.pk],
            "connection": [connection.pk, spare_connection.pk],
            "model": [model.pk, spare_model.pk],
            "token": [spare.pk],
        },
    )


def generated_schema() -> dict[str, Any]:
    """The schema ``/api/schema/`` serves (``test_the_fuzzed_schema_is_the_served_one``),
    generated in-process: schemathesis needs it when pytest collects the tests, before any
    database exists."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document, renderer_context={}))
