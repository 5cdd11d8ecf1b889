"""The audit log: who started, paused, cancelled, exported, invited, ran judges and changed
memberships and tokens; readable by the team's account managers only, through the API and
the admin; no secret in it."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from evalplatform.accounts.models import AuditEvent, Membership
from evalplatform.accounts.roles import Role
from tests.helpers.evaluations import open_scenario
from tests.helpers.generation import job_body

JOBS = "/api/generation/jobs"


@pytest.mark.django_db
def test_actions_are_recorded_and_readable_by_account_managers_only(
    api, creator, setup, finished_job, team_a, team_b, member
):
    admin = member(team_a, Role.ADMIN)
    manager = member(team_a, Role.MANAGER)
    outsider = member(team_b, Role.ADMIN)
    made = api(creator).post(JOBS, job_body(setup, name="Audited"), format="json").json()
    for step in ("start", "pause", "cancel"):
        assert api(creator).post(f"{JOBS}/{made['id']}/{step}").status_code == 200
    api(creator).post(f"{JOBS}/{finished_job.pk}/export/csv")
    scenario = open_scenario(api, creator, finished_job, manager)
    api(manager).post(f"/api/scenarios/{scenario.pk}/export/json")
    api(manager).post(
        f"/api/scenarios/{scenario.pk}/invitations", {"emails": ["x@example.org"]}, format="json"
    )
    created = api(creator).post("/api/tokens", {"name": "ci"}, format="json").json()
    api(creator).delete(f"/api/tokens/{created['id']}")
    client = Client()
    client.force_login(admin)
    membership = Membership.objects.get(user=manager)
    client.post(
        f"/admin/accounts/membership/{membership.pk}/change/",
        {"user": manager.pk, "team": team_a.pk, "role": Role.CREATOR},
    )

    actions = list(AuditEvent.objects.order_by("pk").values_list("action", "username"))
    cora = creator.username
    for expected in [
        ("generation.job.start", cora),
        ("generation.job.pause", cora),
        ("generation.job.cancel", cora),
        ("generation.job.export", cora),
        ("scenario.open", manager.username),
        ("scenario.export", manager.username),
        ("scenario.invite", manager.username),
        ("accounts.token.create", cora),
        ("accounts.token.revoke", cora),
        ("accounts.membership.change", admin.username),
    ]:
        assert expected in actions, expected
    change = AuditEvent.objects.get(action="accounts.membership.change")
    assert change.detail == {"member": manager.username, "role": "creator"}

    listed = api(admin).get("/api/audit?action=generation.job").json()
    assert {row["action"] for row in listed["results"]} == {
        "generation.job.start",
        "generation.job.pause",
        "generation.job.cancel",
        "generation.job.export",
    }
    assert api(creator).get("/api/audit").status_code == 403
    assert api(outsider).get("/api/audit").json()["count"] == 0
    # The token's key is shown once to its owner, and never written to the log.
    assert created["key"] not in json.dumps(list(AuditEvent.objects.values()), default=str)
    page = client.get("/admin/accounts/auditevent/")
    assert page.status_code == 200 and "generation.job.start" in page.content.decode()
