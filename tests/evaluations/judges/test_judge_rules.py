"""The rules around judge runs: one unfinished run per judge, a task asked once per judge,
retrying failed calls only, deleting judges safely, judge jobs made by the judge service
only, configuration checks; progress and draft edits with judges about."""

from __future__ import annotations

import pytest
from django.test import Client

from evaluations.models import Invitation, Judgment
from generation.models import GenerationJob, GenerationOutput, JobStatus
from scenarios import services as scenario_services
from scenarios.models import Scenario
from tests.helpers.evaluations import create_judge, make_scenario, run

pytestmark = pytest.mark.django_db(transaction=True)


def start(api, user, judge, **body):
    return api(user).post(f"/api/judges/{judge['id']}/run", body, format="json")


def test_one_unfinished_run_per_judge_and_each_task_asked_once(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    manager = api(people["manager"])
    first = start(api, people["manager"], judge, tasks=[scenario.tasks.first().pk])
    assert first.status_code == 201
    job = GenerationJob.objects.get(pk=first.json()["job"])
    manager.post(f"/api/generation/jobs/{job.pk}/pause")
    again = start(api, people["manager"], judge)
    assert again.status_code == 409  # the paused run first: resume or cancel it
    manager.post(f"/api/generation/jobs/{job.pk}/cancel")
    second = start(api, people["manager"], judge)
    assert second.status_code == 201 and second.json()["calls"] == 9  # the cancelled task too
    run(second.json()["job"])
    assert Judgment.objects.filter(judge_id=judge["id"]).count() == 9
    asked = start(api, people["manager"], judge, tasks=[scenario.tasks.first().pk])
    assert asked.status_code == 400 and "already" in asked.json()["errors"]["tasks"][0]


def test_retry_failed_keeps_a_paused_run_paused(api, people, team_a, mock_judge, settings):
    settings.GENERATION_FAIL_AFTER = 0  # failed cells in a row do not fail this run
    scenario = make_scenario(people, team_a, "comparison", {})
    connection = mock_judge.connection
    connection.options = {"failure_rate": 0.6}
    connection.save()
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    job_id = start(api, people["manager"], judge).json()["job"]
    run(job_id)
    job = GenerationJob.objects.get(pk=job_id)
    failed = job.failed_cells
    assert job.status == JobStatus.COMPLETED and failed > 0
    GenerationJob.objects.filter(pk=job_id).update(status=JobStatus.PAUSED)
    retried = api(people["manager"]).post(f"/api/judges/{judge['id']}/retry-failed")
    assert retried.status_code == 200 and retried.json()["retried"] == failed
    job.refresh_from_db()
    assert job.status == JobStatus.PAUSED and job.failed_cells == 0
    assert GenerationOutput.objects.filter(job=job, status="pending").count() == failed


def test_deleting_a_judge_waits_for_its_runs_and_late_replies_are_harmless(
    api, people, team_a, mock_judge
):
    scenario = make_scenario(people, team_a, "comparison", {})
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    manager = api(people["manager"])
    job_id = start(api, people["manager"], judge).json()["job"]
    manager.post(f"/api/generation/jobs/{job_id}/pause")
    assert manager.delete(f"/api/judges/{judge['id']}").status_code == 409
    manager.post(f"/api/generation/jobs/{job_id}/cancel")
    assert manager.delete(f"/api/judges/{judge['id']}").status_code == 204
    # The job stays; if its calls still came back, they would be recorded as plain outputs.
    GenerationJob.objects.filter(pk=job_id).update(status=JobStatus.RUNNING)
    run(job_id)
    assert GenerationJob.objects.get(pk=job_id).completed_cells == 9
    assert not Judgment.objects.exists()


def test_a_scenario_is_not_deleted_while_a_judge_of_it_runs(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    manager = api(people["manager"])
    job_id = start(api, people["manager"], judge).json()["job"]
    refused = manager.delete(f"/api/scenarios/{scenario.pk}")
    assert refused.status_code == 409 and "judges" in refused.json()["detail"]
    assert Scenario.objects.filter(pk=scenario.pk).exists()
    manager.post(f"/api/generation/jobs/{job_id}/cancel")
    assert manager.delete(f"/api/scenarios/{scenario.pk}").status_code == 204
    assert not Scenario.objects.filter(pk=scenario.pk).exists()


def test_a_drafts_tasks_are_not_made_again_once_a_judge_ran_on_them(
    api, people, team_a, mock_judge
):
    scenario = make_scenario(people, team_a, "comparison", {})
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    manager = api(people["manager"])
    before = set(scenario.tasks.values_list("pk", flat=True))
    job_id = start(api, people["manager"], judge).json()["job"]
    manager.post(f"/api/generation/jobs/{job_id}/cancel")  # finished, but it could run again
    again = manager.post(f"/api/scenarios/{scenario.pk}/regenerate", {"seed": 7}, format="json")
    assert again.status_code == 409 and "judge" in again.json()["detail"]
    assert set(scenario.tasks.values_list("pk", flat=True)) == before


def test_judge_jobs_come_from_the_judge_service_only(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    body = {
        "team": "team-a",
        "name": "Sneaky",
        "source": {"type": "judge", "judge": judge["id"]},
        "prompt_versions": [judge["prompt_version"]],
        "models": [mock_judge.pk],
    }
    made = api(people["manager"]).post("/api/generation/jobs", body, format="json")
    assert made.status_code == 400 and "source.type" in made.json()["errors"]


def test_judge_settings_the_runs_set_are_refused(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    url = f"/api/scenarios/{scenario.pk}/judges"
    manager = api(people["manager"])
    reserved = manager.post(
        url, {"name": "T", "model": mock_judge.pk, "params": {"temperature": 1}}, format="json"
    )
    assert reserved.status_code == 400 and "params" in reserved.json()["errors"]
    grid = manager.post(
        url,
        {"grid": {"models": [{"model": mock_judge.pk, "params": "thinking"}]}},
        format="json",
    )
    assert grid.status_code == 400 and not scenario.judges.exists()
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    from evalplatform.prompts.models import PromptVersion

    assert PromptVersion.objects.get(pk=judge["prompt_version"]).locked_at is not None


def test_progress_counts_people_and_drafts_with_judgments_keep_their_configuration(
    api, people, team_a, mock_judge
):
    scenario = make_scenario(people, team_a, "rating", {"dimensions": [{"name": "x"}]})
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    run(start(api, people["manager"], judge).json()["job"])
    client = Client()
    client.force_login(people["manager"])
    page = client.get(f"/scenarios/{scenario.pk}").content.decode()
    assert "0 of 9 judgments" in page
    listing = client.get("/scenarios/").content.decode()
    assert "0 · 9" in listing
    changed = api(people["manager"]).patch(
        f"/api/scenarios/{scenario.pk}",
        {"config": {"dimensions": [{"name": "y"}]}},
        format="json",
    )
    assert changed.status_code == 409
    renamed = api(people["manager"]).patch(
        f"/api/scenarios/{scenario.pk}", {"name": "Renamed"}, format="json"
    )
    assert renamed.status_code == 200


def test_an_invitation_to_a_closed_scenario_makes_no_account(api, people, team_a):
    from django.contrib.auth import get_user_model

    scenario = make_scenario(people, team_a, "comparison", {})
    scenario = scenario_services.scenario_open(user=people["manager"], scenario=scenario)
    made = api(people["manager"]).post(
        f"/api/scenarios/{scenario.pk}/invitations", {"emails": ["x@example.org"]}, format="json"
    )
    path = made.json()[0]["link"].split("testserver", 1)[1]
    scenario_services.scenario_close(user=people["manager"], scenario=scenario)
    users = get_user_model().objects.count()
    page = Client().get(path)
    assert page.status_code == 410 and "closed" in page.content.decode()
    posted = Client().post(
        path, {"username": "late", "password1": "a-long-pass", "password2": "a-long-pass"}
    )
    assert posted.status_code == 410
    assert get_user_model().objects.count() == users
    assert Invitation.objects.get().accepted_by is None


def test_judge_runs_of_one_scenario_run_side_by_side(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    judges = [
        create_judge(api, people["manager"], scenario, name=f"J{n}", model=mock_judge.pk)
        for n in range(3)
    ]
    jobs = [start(api, people["manager"], judge).json()["job"] for judge in judges]
    statuses = set(GenerationJob.objects.filter(pk__in=jobs).values_list("status", flat=True))
    assert statuses == {JobStatus.RUNNING}  # none queued behind another
    for job_id in jobs:
        run(job_id)
    assert Judgment.objects.filter(judge_id__in=[j["id"] for j in judges]).count() == 27
