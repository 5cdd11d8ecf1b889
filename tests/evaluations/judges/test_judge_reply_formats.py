"""Reply formats of LLM judges: the seeds' own reply shapes, end to end through the fake
provider (its replies fixed per test): the essay-scoring seed's rubric JSON
(``content_score``, ..., ``total_score``, fenced in markdown) and pairwiseLLM's
``<BETTER_SAMPLE>SAMPLE_1</BETTER_SAMPLE>`` tags. Without the format they are parse failures;
with it, judgments."""

from __future__ import annotations

import json

import pytest

from evalplatform.providers.models import LLMModel, ProviderConnection
from evaluations.models import JudgeRun, Judgment, ParseStatus
from tests.factories import PromptTemplateFactory, make_version
from tests.helpers.evaluations import create_judge, make_scenario, run

pytestmark = pytest.mark.django_db(transaction=True)

ESSAY_REPLY = """```json
{"content_score": 4, "content_justification": "Clear thesis, good evidence.",
 "organization_score": 3, "organization_justification": "Some jumps.",
 "language_score": 5, "language_justification": "Precise.", "total_score": 12}
```"""
ESSAY_FORMAT = {
    "kind": "json",
    "fields": {
        "scores": {
            "content": "content_score",
            "organization": "organization_score",
            "language": "language_score",
        },
        "rationale": "content_justification",
    },
}
TAG_REPLY = "<BETTER_SAMPLE>SAMPLE_2</BETTER_SAMPLE>\nSample 2 answers the question."
TAG_FORMAT = {
    "kind": "tags",
    "fields": {"winner": "BETTER_SAMPLE"},
    "values": {"SAMPLE_1": "A", "SAMPLE_2": "B"},
}


@pytest.fixture
def fake_judge(team_a, fake_provider):
    connection = ProviderConnection.objects.create(
        team=team_a, name="fake", kind="openai", base_url=fake_provider.url
    )
    return LLMModel.objects.create(connection=connection, model_id="judge", display_name="J")


def _run(api, people, scenario, **judge):
    made = create_judge(api, people["manager"], scenario, **judge)
    job = api(people["manager"]).post(f"/api/judges/{made['id']}/run", {}, format="json")
    run(job.json()["job"])
    return list(Judgment.objects.filter(judge_id=made["id"]))


def test_the_essay_seeds_rubric_reply_is_read_by_its_field_mapping(
    api, people, team_a, fake_provider, fake_judge
):
    fake_provider.config.reply = lambda request: ESSAY_REPLY
    dimensions = [{"name": n, "min": 1, "max": 6} for n in ("content", "organization", "language")]
    scenario = make_scenario(people, team_a, "rating", {"dimensions": dimensions})
    plain = _run(api, people, scenario, name="Plain", model=fake_judge.pk)
    assert plain and all(j.parse_status == ParseStatus.FAILED for j in plain)
    mapped = _run(api, people, scenario, name="Mapped", model=fake_judge.pk,
                  reply_format=ESSAY_FORMAT)  # fmt: skip
    assert mapped and all(j.parse_status != ParseStatus.FAILED for j in mapped)
    assert {json.dumps(j.payload["scores"], sort_keys=True) for j in mapped} == {
        json.dumps({"content": 4, "language": 5, "organization": 3}, sort_keys=True)
    }
    assert mapped[0].rationale == "Clear thesis, good evidence."
    shown = api(people["manager"]).get(f"/api/judges/{mapped[0].judge_id}").json()
    assert shown["reply_format"] == ESSAY_FORMAT


def test_pairwise_llms_tag_replies_are_read_by_a_tag_pattern(
    api, people, team_a, fake_provider, fake_judge
):
    fake_provider.config.reply = lambda request: TAG_REPLY
    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    plain = _run(api, people, scenario, name="Plain", model=fake_judge.pk)
    assert plain and all(j.parse_status == ParseStatus.FAILED for j in plain)
    tagged = _run(api, people, scenario, name="Tags", model=fake_judge.pk, swap=True,
                  reply_format=TAG_FORMAT)  # fmt: skip
    assert tagged and all(j.parse_status != ParseStatus.FAILED for j in tagged), [
        (j.parse_error, j.rationale) for j in tagged[:2]
    ]
    # SAMPLE_2 is the second shown ("B", the presented order kept beside it), in each order.
    assert {j.payload["winner"] for j in tagged} == {"B"}
    assert {j.swapped for j in tagged} == {False, True}


def test_a_bad_reply_format_is_a_400_naming_it(api, people, team_a, fake_judge):
    scenario = make_scenario(people, team_a, "rating", {"dimensions": [{"name": "clarity"}]})
    for bad in (
        {"kind": "xml"},
        {"kind": "json", "fields": {"scores": {"nope": "x"}}},
        {"kind": "tags", "fields": {"winner": "\x00"}},
        {"kind": "json", "fields": {"winner": 7}},
        {"kind": "json", "values": {"a": ["b"]}},
        "json",
    ):
        answer = api(people["manager"]).post(
            f"/api/scenarios/{scenario.pk}/judges",
            {"name": "J", "model": fake_judge.pk, "reply_format": bad},
            format="json",
        )
        assert answer.status_code == 400, bad
        assert any(key.startswith("reply_format") for key in answer.json()["errors"]), bad


def test_the_add_judge_form_takes_a_reply_format(people, team_a, fake_judge):
    from django.test import Client

    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    client = Client()
    client.force_login(people["manager"])
    url = f"/scenarios/{scenario.pk}/judges"
    base = {"name": "Tags", "model": str(fake_judge.pk), "temperatures": "0", "mode": "live"}
    bad = client.post(url, base | {"reply_format": "{not json"}, follow=True)
    assert "reply_format" in bad.content.decode() and not scenario.judges.exists()
    client.post(url, base | {"reply_format": json.dumps(TAG_FORMAT)})
    assert scenario.judges.get().reply_format == TAG_FORMAT


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_structured_output_sends_each_providers_schema(api, people, team_a, fake_provider, kind):
    """The platform's verdict schema goes out as the provider takes one (OpenAI's strict
    response_format, Anthropic's forced tool, Gemini's responseSchema), and the replies
    (an Anthropic tool call's input) are read as verdicts."""
    connection = ProviderConnection.objects.create(
        team=team_a, name=kind, kind=kind, base_url=fake_provider.url
    )
    model = LLMModel.objects.create(connection=connection, model_id=f"{kind}-j", display_name=kind)
    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    made = _run(api, people, scenario, name="S", model=model.pk,
                reply_format={"kind": "structured"})  # fmt: skip
    assert made and all(j.parse_status != ParseStatus.FAILED for j in made)
    assert {j.payload["winner"] for j in made} <= {"A", "B"}
    # The run's model configuration holds the verdict schema in no provider's words; the
    # judge's params stay as written.
    job_id = JudgeRun.objects.get(judge_id=made[0].judge_id).job_id
    run_models = api(people["manager"]).get(f"/api/generation/jobs/{job_id}")
    [configuration] = run_models.json()["models"]
    assert configuration["params"] == {}
    assert configuration["response_schema"]["name"] == "verdict"
    assert configuration["response_schema"]["schema"]["properties"]["winner"]["enum"] == [
        "A",
        "B",
    ]
    body = json.loads(fake_provider.app.bodies[-1][1])
    if kind == "openai":
        schema = body["response_format"]["json_schema"]
        assert schema["strict"] is True
        assert schema["schema"]["properties"]["winner"]["enum"] == ["A", "B"]
    elif kind == "anthropic":
        assert body["tool_choice"] == {"type": "tool", "name": "verdict"}
        assert body["tools"][0]["input_schema"]["required"] == ["winner", "rationale"]
    else:
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        assert "additionalProperties" not in json.dumps(config["responseSchema"])


def test_structured_output_needs_a_provider_that_takes_a_schema(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    answer = api(people["manager"]).post(
        f"/api/scenarios/{scenario.pk}/judges",
        {"name": "M", "model": mock_judge.pk, "reply_format": {"kind": "structured"}},
        format="json",
    )
    assert answer.status_code == 400 and "schema" in answer.json()["errors"]["reply_format"][0]


PAIRWISE_LLM_TEMPLATE = (
    "You are comparing two writing samples. Respond with "
    "<BETTER_SAMPLE>SAMPLE_1</BETTER_SAMPLE> or <BETTER_SAMPLE>SAMPLE_2</BETTER_SAMPLE>, then "
    "one sentence.\n\nSAMPLE 1:\n{{response_a}}\n\nSAMPLE 2:\n{{response_b}}"
)
ESSAY_RUBRIC = (
    "Score the response on content, organization and language, each from 1-6. Return only "
    "a JSON object with content_score, content_justification, organization_score, "
    "organization_justification, language_score, language_justification and total_score."
    "\n\n{{response}}"
)


@pytest.mark.parametrize("where", ["mock", "fake_provider"])
def test_the_seeds_prompts_parse_on_the_offline_providers(
    api, people, team_a, fake_provider, where
):
    """pairwiseLLM's template and the essay rubric answered in their own shapes, with no
    reply fixed: every verdict parses, and at temperature 0 repeats agree."""
    if where == "mock":
        connection = ProviderConnection.objects.create(team=team_a, name="m", kind="mock")
    else:
        connection = ProviderConnection.objects.create(
            team=team_a, name="f", kind="openai", base_url=fake_provider.url
        )
    model = LLMModel.objects.create(connection=connection, model_id="j", display_name="J")
    tags = make_version(
        PromptTemplateFactory(team=team_a, name="pairwiseLLM"), [("", PAIRWISE_LLM_TEMPLATE)]
    )
    pairwise = make_scenario(people, team_a, "comparison", {"ties": False})
    tagged = _run(api, people, pairwise, name="Tags", model=model.pk, swap=True,
                  prompt_version=tags.pk, reply_format=TAG_FORMAT)  # fmt: skip
    assert tagged and all(j.parse_status != ParseStatus.FAILED for j in tagged), [
        (j.parse_error, j.rationale) for j in tagged[:2]
    ]
    assert {j.payload["winner"] for j in tagged} <= {"A", "B"}
    rubric = make_version(PromptTemplateFactory(team=team_a, name="Essay"), [("", ESSAY_RUBRIC)])
    dimensions = [{"name": n, "min": 1, "max": 6} for n in ("content", "organization", "language")]
    rating = make_scenario(people, team_a, "rating", {"dimensions": dimensions})
    scored = _run(api, people, rating, name="Essay", model=model.pk, repetitions=3,
                  temperatures=[0.0], prompt_version=rubric.pk,
                  reply_format=ESSAY_FORMAT)  # fmt: skip
    assert scored and all(j.parse_status != ParseStatus.FAILED for j in scored)
    by_task: dict[int, set[str]] = {}
    for j in scored:
        assert all(1 <= v <= 6 for v in j.payload["scores"].values())
        by_task.setdefault(j.task_id, set()).add(json.dumps(j.payload["scores"], sort_keys=True))
    assert all(len(answers) == 1 for answers in by_task.values())  # SD 0 at temperature 0


def test_a_rating_judges_repeated_calls_per_task(api, people, team_a):
    """The per-task consistency of a judge's repetitions: SD 0 at temperature 0, spread at
    1, the tasks' rank order compared between the two, another type refused."""
    connection = ProviderConnection.objects.create(team=team_a, name="m", kind="mock")
    model = LLMModel.objects.create(connection=connection, model_id="j", display_name="J")
    rubric = make_version(PromptTemplateFactory(team=team_a, name="Essay"), [("", ESSAY_RUBRIC)])
    dimensions = [{"name": n, "min": 1, "max": 6} for n in ("content", "organization", "language")]
    rating = make_scenario(people, team_a, "rating", {"dimensions": dimensions})
    scored = _run(api, people, rating, name="Essay", model=model.pk, repetitions=4,
                  temperatures=[0.0, 1.0], prompt_version=rubric.pk,
                  reply_format=ESSAY_FORMAT)  # fmt: skip
    judge_id = scored[0].judge_id
    client = api(people["viewer"])
    found = client.get(f"/api/judges/{judge_id}/consistency").json()
    assert found["fields"] == ["content", "organization", "language"]
    assert found["field"] == "content"
    by_condition = {c["condition"]: c for c in found["by_condition"]}
    cold, warm = by_condition["Essay · temperature 0"], by_condition["Essay · temperature 1"]
    tasks = rating.tasks.count()
    assert cold["items"] == warm["items"] == tasks and cold["calls"] == 4 * tasks
    assert cold["items_with_sd_0"] == tasks and warm["mean_sd"] > 0
    one = next(i for i in found["items"] if i["condition"] == "Essay · temperature 1")
    calls = [
        j.payload["scores"]["content"]
        for j in scored
        if f"task {j.task_id}" == one["item"] and j.temperature == 1.0
    ]
    assert one["n"] == 4 and one["mean"] == pytest.approx(sum(calls) / 4, abs=1e-4)
    [pair] = found["rank_agreement"]
    assert pair["items"] == tasks and pair["spearman"] is not None
    bad = client.get(f"/api/judges/{judge_id}/consistency", {"field": "style"})
    assert bad.status_code == 400 and "field" in bad.json()["errors"]
    from django.test import Client

    browser = Client()
    browser.force_login(people["viewer"])
    page = browser.get(f"/judges/{judge_id}", {"field": "language"}).content.decode()
    assert "Repeated calls per task" in page and 'value="language" selected' in page
    assert "Essay · temperature 1" in page and "Rank order of items" in page
    pairwise = make_scenario(people, team_a, "comparison", {"ties": False})
    other = create_judge(api, people["manager"], pairwise, name="P", model=model.pk)
    assert "Repeated calls per task" not in browser.get(f"/judges/{other['id']}").content.decode()
    refused = client.get(f"/api/judges/{other['id']}/consistency")
    assert refused.status_code == 400 and "judge" in refused.json()["errors"]


def test_the_add_judge_form_offers_only_prompts_that_fit_the_type(people, team_a):
    from django.test import Client

    pairwise = make_version(
        PromptTemplateFactory(team=team_a, name="pairwiseLLM"), [("", PAIRWISE_LLM_TEMPLATE)]
    )
    rubric = make_version(PromptTemplateFactory(team=team_a, name="Essay"), [("", ESSAY_RUBRIC)])
    generation = make_version(
        PromptTemplateFactory(team=team_a, name="Summaries"), [("", "Summarize: {{content}}")]
    )
    browser = Client()
    browser.force_login(people["manager"])

    def offered(kind, config):
        scenario = make_scenario(people, team_a, kind, config)
        page = browser.get(f"/scenarios/{scenario.pk}").content.decode()
        form = page.split('name="prompt_version"', 1)[1].split("</select>", 1)[0]
        return {v.pk for v in (pairwise, rubric, generation) if f'value="{v.pk}"' in form}

    assert offered("comparison", {"ties": False}) == {pairwise.pk}
    dimensions = [{"name": "content", "min": 1, "max": 6}]
    assert offered("rating", {"dimensions": dimensions}) == {rubric.pk}
