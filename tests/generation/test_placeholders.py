"""Placeholders in jobs: names of any letters and dotted paths into JSON items reach the
provider substituted; a prompt version with a malformed placeholder (saved before they were
checked) stops the job before anything is created or sent."""

from __future__ import annotations

import json

import pytest

from generation.models import GenerationJob
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version
from tests.helpers.generation import create_job, job_body, run

JOBS = "/api/generation/jobs"


@pytest.mark.django_db(transaction=True)
def test_unicode_names_and_json_paths_are_substituted_in_the_request(
    api, creator, team_a, fake_provider
):
    connection = ConnectionFactory(team=team_a, kind="openai", base_url=fake_provider.url)
    model = LLMModelFactory(connection=connection, model_id="gpt-fake")
    version = make_version(
        PromptTemplateFactory(team=team_a),
        [
            ("System", "Antworte auf {{sprache}}."),
            ("", "{{inhalt_ä}} | {{body.messages.0.content}}"),
        ],
        default_variables={"sprache": "Deutsch"},
    )
    items = [
        {
            "id": "m1",
            "inhalt_ä": "Grüße",
            "body": {"messages": [{"role": "user", "content": "Wie geht's?"}]},
        }
    ]
    body = {
        "team": "team-a",
        "name": "Paths",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0],
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    }
    job = create_job(api, creator, body)
    api(creator).post(f"{JOBS}/{job.pk}/start")
    run(job.pk)
    job.refresh_from_db()
    assert job.completed_cells == 1
    [(_, raw)] = list(fake_provider.app.bodies)
    messages = json.loads(raw)["messages"]
    assert messages == [
        {"role": "system", "content": "Antworte auf Deutsch."},
        {"role": "user", "content": "Grüße | Wie geht's?"},
    ]


@pytest.mark.django_db
def test_an_item_without_the_path_is_named_before_anything_is_created(api, creator, team_a, setup):
    version = make_version(
        PromptTemplateFactory(team=team_a), [("", "{{body.messages.0.content}}")]
    )
    items = [{"id": "ok", "body": {"messages": [{"content": "x"}]}}, {"id": "short", "body": {}}]
    body = job_body(
        setup,
        prompt_versions=[version.pk],
        source={"type": "manual", "format": "json", "content": json.dumps(items)},
    )
    response = api(creator).post(JOBS, body, format="json")
    assert response.status_code == 400
    assert response.json()["missing"] == [
        {"item_id": f"short ({version.template.name} v1)", "variable": "body.messages.0.content"}
    ]
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db
def test_a_version_with_malformed_placeholders_cannot_run(api, creator, team_a, setup):
    # Saved directly (as versions were before placeholders were checked on save).
    legacy = make_version(
        PromptTemplateFactory(team=team_a, name="Legacy"),
        [("Intro", "Hi {{content}}"), ("Task", "Use {{ a..b }} and {{email}")],
    )
    body = job_body(setup, prompt_versions=[setup["prompts"][0].pk, legacy.pk])
    for url in (JOBS, "/api/generation/estimate"):
        response = api(creator).post(url, body, format="json")
        assert response.status_code == 400
        [message] = response.json()["errors"]["prompt_versions[1]"]
        assert message.startswith("Legacy v1 has placeholders that are no variable")
        assert "block 2 (Task): '{{ a..b }}' is not a variable" in message
        assert "block 2 (Task): '{{email}' has no closing '}}'." in message
    assert not GenerationJob.objects.exists()
