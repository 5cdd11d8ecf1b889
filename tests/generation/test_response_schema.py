"""A model configuration's ``response_schema``: stored in no provider's words, written by
each provider's adapter (live and in batches), shown by the jobs API, refused where the
provider has no structured output; judge runs use it for their verdict schema."""

from __future__ import annotations

import json

import pytest

from generation.models import GenerationJob
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version
from tests.helpers.generation import (
    batch_job,
    create_job,
    drive_until_done,
    job_body,
    model_for,
    run,
)

JOBS = "/api/generation/jobs"
SCORES = {
    "name": "essay_scores",
    "schema": {
        "type": "object",
        "properties": {"total_score": {"type": "integer"}, "rationale": {"type": "string"}},
        "required": ["total_score", "rationale"],
        "additionalProperties": False,
    },
}


def _job(api, creator, team, url, kind, schema):
    connection = ConnectionFactory(team=team, kind=kind, base_url=url)
    model = LLMModelFactory(connection=connection, model_id=f"{kind}-fake")
    version = make_version(PromptTemplateFactory(team=team), [("", "Score {{content}}")])
    body = {
        "team": "team-a",
        "name": "Scored",
        "prompt_versions": [version.pk],
        "models": [{"model": model.pk, "response_schema": schema}],
        "temperatures": [0.0],
        "concurrency": 1,
        "source": {"type": "manual", "format": "json", "content": '[{"id": "a", "content": "hi"}]'},
    }
    return create_job(api, creator, body)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_each_provider_gets_the_schema_in_its_own_words(api, creator, team_a, fake_provider, kind):
    job = _job(api, creator, team_a, fake_provider.url, kind, SCORES)
    shown = api(creator).get(f"{JOBS}/{job.pk}").json()["models"][0]
    assert shown["response_schema"] == SCORES and shown["params"] == {}
    api(creator).post(f"{JOBS}/{job.pk}/start")
    run(job.pk)
    job.refresh_from_db()
    assert job.completed_cells == 1, list(job.outputs.values("error_message"))
    body = json.loads(fake_provider.app.bodies[-1][1])
    if kind == "openai":
        sent = body["response_format"]["json_schema"]
        assert sent["name"] == "essay_scores" and sent["strict"] is True
        assert sent["schema"]["required"] == ["total_score", "rationale"]
    elif kind == "anthropic":
        assert body["tool_choice"] == {"type": "tool", "name": "essay_scores"}
        assert body["tools"][0]["input_schema"]["required"] == ["total_score", "rationale"]
    else:
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        assert config["responseSchema"]["required"] == ["total_score", "rationale"]


@pytest.mark.django_db(transaction=True)
def test_a_schema_without_a_name_is_called_reply(api, creator, team_a, fake_provider):
    job = _job(api, creator, team_a, fake_provider.url, "anthropic", {"schema": SCORES["schema"]})
    api(creator).post(f"{JOBS}/{job.pk}/start")
    run(job.pk)
    body = json.loads(fake_provider.app.bodies[-1][1])
    assert body["tool_choice"] == {"type": "tool", "name": "reply"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object"}, "is {"),
        ({"schema": "object"}, "is {"),
        ({"schema": {}, "strict": True}, "is {"),
        ([SCORES], "is {"),
        ({"name": "two words", "schema": {}}, "1 to 64 letters"),
        ({"name": "x" * 65, "schema": {}}, "1 to 64 letters"),
        ({"name": 7, "schema": {}}, "1 to 64 letters"),
        ({"schema": {"description": "x" * 60_000}}, "at most 50,000"),
    ],
)
def test_a_bad_schema_is_a_400_naming_it(api, creator, setup, schema, message):
    models = [{"model": setup["models"][0].pk, "response_schema": schema}]
    response = api(creator).post(JOBS, job_body(setup, models=models), format="json")
    assert response.status_code == 400
    assert message in response.json()["errors"]["models[0].response_schema"][0]
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db
def test_a_provider_without_structured_output_is_refused(api, creator, setup):
    mock = setup["models"][0]  # the setup's models are the mock's
    assert mock.connection.kind == "mock"
    models = [{"model": mock.pk, "response_schema": SCORES}]
    response = api(creator).post(JOBS, job_body(setup, models=models), format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["models[0].response_schema"] == [
        f"{mock.display_name} takes no output schema here."
    ]
    null = [{"model": mock.pk, "response_schema": None}]
    made = create_job(api, creator, job_body(setup, models=null))
    assert made.models.get().response_schema is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_batch_lines_carry_the_schema_too(api, creator, team_a, fake_provider, kind):
    fake_provider.config.batch_duration_s = 0
    model = model_for(team_a, fake_provider, kind)
    models = [{"model": model.pk, "response_schema": SCORES}]
    job_id = batch_job(api, creator, team_a, model, ["one", "two"], models=models)
    job = drive_until_done(job_id)
    assert job.completed_cells == 4
    submitted = [
        raw for path, raw in fake_provider.app.bodies if "batch" in path or "files" in path
    ]
    sent = b"".join(r if isinstance(r, bytes) else r.encode() for r in submitted)
    words = {"openai": b'"json_schema"', "anthropic": b'"tool_choice"', "gemini": b"responseSchema"}
    assert words[kind] in sent and b"total_score" in sent
