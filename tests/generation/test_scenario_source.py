"""The spec's "From Scenario" source: a job over the items of a scenario of its team, their
fields as the prompt's variables; through the API and the wizard. Internal sources (a judge's)
are never offered, accepted or named."""

from __future__ import annotations

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from generation.models import GenerationJob
from scenarios.models import Scenario, ScenarioItem
from tests.helpers.generation import job_body

JOBS = "/api/generation/jobs"
ESTIMATE = "/api/generation/estimate"


def scenario(team, user, name, contexts):
    made = Scenario.objects.create(team=team, created_by=user, name=name, type="rating")
    ScenarioItem.objects.bulk_create(
        ScenarioItem(scenario=made, position=n, item_id=item_id, context=context)
        for n, (item_id, context) in enumerate(contexts)
    )
    return made


@pytest.fixture
def study(team_a, creator):
    return scenario(
        team_a,
        creator,
        "Study",
        [("doc-1", {"content": "Rivers flow.", "language": "German"}), ("doc-2", {"text": "Seas"})],
    )


@pytest.mark.django_db
def test_a_job_from_a_scenarios_items(api, creator, setup, study):
    ScenarioItem.objects.filter(item_id="doc-2").update(context={"thread": "Seas are deep."})
    body = job_body(setup, source={"type": "scenario", "scenario": study.pk}, repetitions=1)
    response = api(creator).post(JOBS, body, format="json")
    assert response.status_code == 201, response.json()
    job = GenerationJob.objects.get(pk=response.json()["id"])
    assert job.source_kind == "scenario" and job.source_meta == {"scenario": study.pk}
    items = list(job.items.values_list("item_id", "data"))
    assert items == [
        ("doc-1", {"content": "Rivers flow.", "language": "German"}),
        ("doc-2", {"thread": "Seas are deep."}),
    ]
    assert job.total_cells == 2 * 2 * 2 * 2


@pytest.mark.django_db
def test_the_scenarios_fields_are_the_variables(api, creator, setup, study):
    # doc-2 has no "content" (nor an alias of it): named before anything is created.
    body = job_body(setup, source={"type": "scenario", "scenario": study.pk})
    response = api(creator).post(ESTIMATE, body, format="json")
    assert response.status_code == 400
    missing = response.json()["missing"]
    assert {"item_id": "doc-2 (Summary v1)", "variable": "content"} in missing


@pytest.mark.django_db
@pytest.mark.parametrize("bad", ["other-team", 10**9, "1", None, True, 2**70, [1]])
def test_an_unusable_scenario_is_a_400_naming_the_field(
    api, creator, setup, study, team_b, member, bad
):
    theirs = scenario(team_b, member(team_b, Role.CREATOR), "Theirs", [("x", {"content": "x"})])
    scenario_id = theirs.pk if bad == "other-team" else bad
    body = job_body(setup, source={"type": "scenario", "scenario": scenario_id})
    response = api(creator).post(JOBS, body, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors["source.scenario"] == [
        "Not found: give the id of a scenario of this team you can read."
    ]
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db
def test_an_empty_scenario_is_refused(api, creator, setup, team_a):
    empty = scenario(team_a, creator, "Empty", [])
    body = job_body(setup, source={"type": "scenario", "scenario": empty.pk})
    response = api(creator).post(JOBS, body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["source.scenario"] == ["“Empty” has no items."]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["judge", "judge_file", "nonsense", ["scenario"], {"a": 1}, 3])
def test_internal_sources_are_neither_accepted_nor_named(api, creator, setup, kind):
    response = api(creator).post(JOBS, job_body(setup, source={"type": kind}), format="json")
    assert response.status_code == 400
    message = response.json()["errors"]["source.type"][0]
    assert message == "One of: manual, prompt_only, scenario."


@pytest.mark.django_db
def test_the_wizard_offers_the_teams_scenarios_and_no_judge(creator, setup, study, team_b, member):
    scenario(team_b, member(team_b, Role.CREATOR), "Not ours", [("x", {"content": "x"})])
    client = Client()
    client.force_login(creator)
    page = client.get("/generation/new").content.decode()
    assert 'value="scenario"' in page and "From scenario" in page
    assert f'<option value="{study.pk}">Study · 2 items</option>' in page
    assert "Not ours" not in page
    assert 'value="judge' not in page and "From judge" not in page


@pytest.mark.django_db
def test_the_wizard_without_scenarios_says_so(creator, setup):
    client = Client()
    client.force_login(creator)
    page = client.get("/generation/new").content.decode()
    assert "From scenario <small>(none in this team that you can read)</small>" in page


@pytest.mark.django_db
def test_a_job_from_a_scenario_through_the_wizard(creator, setup, study):
    from tests.helpers.generation import wizard_form

    ScenarioItem.objects.filter(item_id="doc-2").update(context={"content": "Seas are deep."})
    client = Client()
    client.force_login(creator)
    form = wizard_form(setup, source_type="scenario", scenario=str(study.pk), content="")
    fragment = client.post("/generation/new/estimate", form).content.decode()
    assert "2 items (scenario)" in fragment
    response = client.post("/generation/new", form)
    assert response.status_code == 302
    job = GenerationJob.objects.get()
    assert list(job.items.values_list("item_id", flat=True)) == ["doc-1", "doc-2"]
    # An error keeps the choice and names the field on step 1.
    bad = client.post("/generation/new", form | {"scenario": "999999"})
    html = bad.content.decode()
    assert bad.status_code == 400 and 'data-open-step="1"' in html
    assert "Not found: give the id of a scenario of this team you can read." in html
