from __future__ import annotations

import pytest

from evalplatform.accounts.roles import Role
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version


@pytest.fixture
def creator(team_a, member):
    return member(team_a, Role.CREATOR, username="cora")


@pytest.fixture
def setup(team_a):
    """Two prompt versions and two mock models in team A."""
    connection = ConnectionFactory(team=team_a, kind="mock", name="mock")
    models = [
        LLMModelFactory(
            connection=connection,
            model_id="mock-small",
            display_name="Small",
            input_price_per_mtok="1.00",
            output_price_per_mtok="2.00",
        ),
        LLMModelFactory(
            connection=connection,
            model_id="mock-large",
            display_name="Large",
            input_price_per_mtok="3.00",
            output_price_per_mtok="6.00",
        ),
    ]
    summary = PromptTemplateFactory(team=team_a, name="Summary")
    short = PromptTemplateFactory(team=team_a, name="Short")
    prompts = [
        make_version(summary, [("System", "You summarize."), ("", "Summarize: {{content}}")]),
        make_version(
            short,
            [("", "In one line ({{language}}): {{input}}")],
            default_variables={"language": "English"},
        ),
    ]
    return {"connection": connection, "models": models, "prompts": prompts}


def job_body(setup, **extra):
    items = [{"id": f"s{i}", "content": f"Text number {i} about rivers."} for i in range(3)]
    import json

    body = {
        "team": "team-a",
        "name": "Study",
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
        "prompt_versions": [p.pk for p in setup["prompts"]],
        "models": [m.pk for m in setup["models"]],
        "repetitions": 2,
        "temperatures": [0.0, 1.0],
        "max_tokens": 100,
    }
    return body | extra
