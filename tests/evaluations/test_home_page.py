"""The home page shows my work: my open tasks, my recent jobs, the recent scenarios of my
teams; each only to whom may open it, and never another team's."""

from __future__ import annotations

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from tests.helpers.evaluations import open_scenario


def home(user):
    client = Client()
    client.force_login(user)
    return client.get("/").content.decode()


@pytest.mark.django_db
def test_the_home_page_shows_my_tasks_jobs_and_scenarios(
    api, creator, finished_job, team_a, team_b, member
):
    manager = member(team_a, Role.MANAGER)
    scenario = open_scenario(api, creator, finished_job, manager, name="Kindness study")
    mine = home(creator)
    assert "Your recent jobs" in mine and f"/generation/jobs/{finished_job.pk}" in mine
    assert "Recent scenarios" in mine and f"/scenarios/{scenario.pk}" in mine
    eve = member(team_a, Role.EVALUATOR)
    hers = home(eve)
    assert "Your open tasks" in hers and f"/evaluate/scenarios/{scenario.pk}" in hers
    assert "Your recent jobs" not in hers and "Recent scenarios" not in hers
    # The manager owns no job: no job section, but the team's scenarios.
    theirs = home(manager)
    assert "Your recent jobs" not in theirs and "Kindness study" in theirs
    outsider = home(member(team_b, Role.ADMIN))
    assert "Kindness study" not in outsider and "Your open tasks" not in outsider


@pytest.mark.django_db
def test_an_evaluator_is_shown_no_api_and_no_command(team_a, member):
    evaluator = home(member(team_a, Role.EVALUATOR))
    assert 'href="/api/docs/"' not in evaluator and "/api/tokens" not in evaluator
    assert "manage.py" not in evaluator
    creator = home(member(team_a, Role.CREATOR))
    assert 'href="/api/docs/"' in creator and "POST /api/tokens" in creator
    assert "manage.py" not in creator


@pytest.mark.django_db
def test_not_found_and_not_allowed_are_pages_of_the_site(team_a, member):
    client = Client()
    client.force_login(member(team_a, Role.EVALUATOR))
    missing = client.get("/generation/jobs/987654")
    page = missing.content.decode()
    assert missing.status_code == 404 and "<h1>Not found</h1>" in page
    assert 'href="/evaluate/"' in page and "site.css" in page  # the site's nav and style
    refused = client.post("/prompts/preview", {"block_title": [""], "block_body": ["x"]})
    page = refused.content.decode()
    assert refused.status_code == 403 and "<h1>Not allowed</h1>" in page
    assert 'href="/evaluate/"' in page
    api = client.get("/api/no-such-route")  # the API still answers JSON
    assert api.status_code == 404 and api.json() == {"detail": "Not found."}
