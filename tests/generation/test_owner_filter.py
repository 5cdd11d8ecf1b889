"""Mine and my team's (issue 37, item 8): ``GET /api/generation/jobs?owner=`` takes ``me``, a
user's id or ``all``, refuses anything else field by field, and never reaches past the
teams the user may see; the hub opens on the user's own jobs with the team's a click away
(a viewer, who has none, sees the team's at once)."""

from __future__ import annotations

import pytest

from evalplatform.accounts.roles import Role
from generation.models import GenerationJob
from tests.helpers.accounts import browser
from tests.helpers.generation import JOBS, job_body

pytestmark = pytest.mark.django_db


def _job(api, user, setup, name):
    made = api(user).post(JOBS, job_body(setup, name=name), format="json")
    assert made.status_code == 201, made.json()
    return made.json()["id"]


def test_the_jobs_list_and_the_hub_by_owner(api, creator, setup, team_a, team_b, member):
    colleague = member(team_a, Role.CREATOR)
    mine = _job(api, creator, setup, "Cora's job")
    theirs = _job(api, colleague, setup, "A colleague's job")
    stranger = GenerationJob.objects.create(
        team=team_b, owner=member(team_b, Role.ADMIN), name="Elsewhere", source_kind="manual"
    )

    def ids(query: str) -> list[int]:
        response = api(creator).get(f"{JOBS}{query}")
        assert response.status_code == 200, response.json()
        return sorted(j["id"] for j in response.json()["results"])

    assert ids("") == ids("?owner=all") == sorted([mine, theirs])
    assert ids("?owner=me") == [mine]
    assert ids(f"?owner={colleague.pk}") == [theirs]
    assert ids(f"?owner={stranger.owner_id}") == []  # another team's jobs stay out of reach
    assert ids("?owner=me&status=created") == [mine]
    for bad in ("you", "-1", "1e3", "9" * 40):
        refused = api(creator).get(f"{JOBS}?owner={bad}")
        assert refused.status_code == 400 and "owner" in refused.json()["errors"], bad

    page = browser(creator).get("/generation/").content.decode()
    assert "Cora&#x27;s job" in page and "A colleague&#x27;s job" not in page
    assert 'href="?jobs=team"' in page
    team = browser(creator).get("/generation/?jobs=team").content.decode()
    assert "Cora&#x27;s job" in team and "A colleague&#x27;s job" in team
    assert "Elsewhere" not in team and colleague.get_username() in team
    viewer = browser(member(team_a, Role.VIEWER)).get("/generation/").content.decode()
    assert "Cora&#x27;s job" in viewer and "A colleague&#x27;s job" in viewer
