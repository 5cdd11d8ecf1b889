from __future__ import annotations

import re

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from generation.models import GenerationJob
from tests.helpers.generation import job_body


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


@pytest.mark.django_db(transaction=True)
def test_admin_deletes_a_job_through_the_service_and_refuses_a_running_one(
    api, team_a, member, creator, setup
):
    from django.contrib.admin.models import LogEntry

    from evalplatform.accounts.models import AuditEvent

    manager = member(team_a, Role.MANAGER, username="max")
    client = Client()
    client.force_login(manager)
    jobs = [
        api(creator).post("/api/generation/jobs", job_body(setup), format="json").json()["id"]
        for _ in range(2)
    ]
    running, idle = jobs
    api(creator).post(f"/api/generation/jobs/{running}/start")
    listing = client.get("/admin/generation/generationjob/")
    assert "delete_selected" not in listing.content.decode()  # one at a time, by the rules

    confirm = client.get(f"/admin/generation/generationjob/{idle}/delete/")
    assert confirm.status_code == 200 and "Yes, I" in confirm.content.decode()
    # A summary of what goes, not one line per output.
    assert "outputs, with their items" in confirm.content.decode()
    assert not re.search(r"generationoutput/\d+", confirm.content.decode())
    done = client.post(f"/admin/generation/generationjob/{idle}/delete/", {"post": "yes"})
    assert done.status_code == 302 and not GenerationJob.objects.filter(pk=idle).exists()
    assert AuditEvent.objects.filter(action="generation.job.delete").count() == 1
    assert LogEntry.objects.filter(object_id=str(idle), action_flag=3).count() == 1

    refused = client.post(
        f"/admin/generation/generationjob/{running}/delete/", {"post": "yes"}, follow=True
    )
    assert refused.status_code == 200 and GenerationJob.objects.filter(pk=running).exists()
    assert any("cannot be deleted" in str(m) for m in refused.context["messages"])
    assert not LogEntry.objects.filter(object_id=str(running), action_flag=3).exists()
