from __future__ import annotations

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from generation.models import GenerationJob
from tests.generation.conftest import job_body


@pytest.mark.django_db(transaction=True)
def test_admin_lists_acts_and_exports_within_the_team(api, team_a, team_b, member, creator, setup):
    manager = member(team_a, Role.MANAGER, username="max")
    job_id = api(creator).post("/api/generation/jobs", job_body(setup), format="json").json()["id"]
    other = member(team_b, Role.MANAGER, username="olga")
    client = Client()
    client.force_login(manager)
    listing = client.get("/admin/generation/generationjob/")
    assert listing.status_code == 200 and "Study" in listing.content.decode()
    assert client.get(f"/admin/generation/generationjob/{job_id}/change/").status_code == 200

    page = client.post(
        "/admin/generation/generationjob/",
        {"action": "start", "_selected_action": [job_id]},
        follow=True,
    )
    assert GenerationJob.objects.get(pk=job_id).status == "running"
    assert any("started or queued" in str(m) for m in page.context["messages"])
    client.post(
        "/admin/generation/generationjob/", {"action": "pause", "_selected_action": [job_id]}
    )
    assert GenerationJob.objects.get(pk=job_id).status == "paused"
    again = client.post(
        "/admin/generation/generationjob/",
        {"action": "pause", "_selected_action": [job_id]},
        follow=True,
    )
    assert any("cannot pause" in str(m) for m in again.context["messages"])

    export = client.post(
        "/admin/generation/generationjob/", {"action": "export_csv", "_selected_action": [job_id]}
    )
    header = b"".join(export.streaming_content).decode().splitlines()[0]
    assert header.startswith("output_id,source_item_id,prompt_variant,model_name")

    outsider = Client()
    outsider.force_login(other)
    assert outsider.get(f"/admin/generation/generationjob/{job_id}/change/").status_code == 404
    assert "Study" not in outsider.get("/admin/generation/generationjob/").content.decode()
