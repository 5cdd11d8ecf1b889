"""Jobs through the API: create (validated whole), estimate, the state machine, permissions."""

from __future__ import annotations

import json

import pytest
from django_q.brokers import get_broker

from evalplatform.accounts.roles import Role
from generation.models import GenerationJob, GenerationOutput
from tests.helpers.generation import job_body

JOBS = "/api/generation/jobs"


def create(api, user, setup, **extra):
    return api(user).post(JOBS, job_body(setup, **extra), format="json")


@pytest.mark.django_db
def test_create_builds_every_cell_with_a_deterministic_custom_id(api, creator, setup):
    response = create(api, creator, setup)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "created" and body["total_cells"] == 3 * 2 * 2 * 2 * 2
    job = GenerationJob.objects.get(pk=body["id"])
    outputs = GenerationOutput.objects.filter(job=job)
    assert outputs.count() == 48 and outputs.filter(status="pending").count() == 48
    ids = set(outputs.values_list("custom_id", flat=True))
    assert len(ids) == 48 and f"j{job.pk}-i0-p0-m0-r0-t0" in ids
    assert all(len(i) <= 64 for i in ids)
    assert all(p.locked_at for p in setup["prompts"] for p in [type(p).objects.get(pk=p.pk)])
    assert [m["label"] for m in body["models"]] == ["Small", "Large"]
    assert body["estimate"]["cells"] == 48 and len(body["estimate"]["per_model"]) == 2


@pytest.mark.django_db
def test_missing_variables_are_reported_for_every_item_and_nothing_is_written(api, creator, setup):
    items = [{"id": "a", "content": "x"}, {"id": "b", "text": "only text"}]
    body = job_body(
        setup, source={"type": "manual", "format": "json", "content": json.dumps(items)}
    )
    response = api(creator).post(JOBS, body, format="json")
    assert response.status_code == 400
    missing = {(m["item_id"], m["variable"]) for m in response.json()["missing"]}
    # Both prompts need the main content (``input`` is its alias); language has a default.
    assert missing == {("b (Summary v1)", "content"), ("b (Short v1)", "input")}
    assert GenerationJob.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": ""}, "name"),
        ({"temperatures": [3]}, "temperatures"),
        ({"temperatures": []}, "temperatures"),
        ({"repetitions": 0}, "repetitions"),
        ({"prompt_versions": [999999]}, "prompt_versions[0]"),
        ({"models": [999999]}, "models[0]"),
        ({"budget_usd": "-1"}, "budget_usd"),
        ({"mode": "sometimes"}, "mode"),
        ({"source": {"type": "manual", "format": "jsonl", "content": "{bad"}}, "line 1"),
        ({"source": {"type": "nowhere"}}, "source.type"),
    ],
)
def test_bad_configurations_are_400_and_create_nothing(api, creator, setup, change, field):
    response = create(api, creator, setup, **change)
    assert response.status_code == 400
    assert field in response.json()["errors"], response.json()
    assert GenerationJob.objects.count() == 0


@pytest.mark.django_db
def test_upload_as_multipart_and_prompt_only(api, creator, setup):
    from django.core.files.uploadedfile import SimpleUploadedFile

    config = job_body(setup)
    del config["source"]
    upload = SimpleUploadedFile("items.csv", b"id,content,text\nr1,hello,hi\nr2,bye,ciao\n")
    response = api(creator).post(
        JOBS, {"config": json.dumps(config), "file": upload}, format="multipart"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["source_meta"]["format"] == "csv"
    assert response.json()["total_cells"] == 2 * 2 * 2 * 2 * 2

    from tests.factories import PromptTemplateFactory, make_version

    solo = make_version(
        PromptTemplateFactory(team=setup["connection"].team, name="Solo"),
        [("", "Write a haiku about {{subject}}.")],
        default_variables={"subject": "autumn"},
    )
    response = create(
        api,
        creator,
        setup,
        source={"type": "prompt_only"},
        prompt_versions=[solo.pk],
        repetitions=1,
        temperatures=[0.5],
    )
    assert response.status_code == 201 and response.json()["total_cells"] == 2


@pytest.mark.django_db
def test_estimate_endpoint_creates_nothing(api, creator, setup):
    response = api(creator).post("/api/generation/estimate", job_body(setup), format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["cells"] == 48 and body["mode"] == "live"
    small, large = body["per_model"]
    assert small["requests"] == large["requests"] == 24
    assert float(large["live_usd"]) > float(small["live_usd"]) > 0
    assert float(small["batch_usd"]) == pytest.approx(float(small["live_usd"]) / 2, rel=1e-3)
    assert GenerationJob.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_state_machine_and_one_running_job_per_user(api, creator, setup):
    client = api(creator)
    broker = get_broker()
    broker.purge_queue()
    first = create(api, creator, setup).json()["id"]
    second = create(api, creator, setup, name="Second").json()["id"]

    started = client.post(f"{JOBS}/{first}/start")
    assert started.status_code == 200 and started.json()["status"] == "running"
    assert broker.queue_size() == 1  # the runner task was queued after the commit
    queued = client.post(f"{JOBS}/{second}/start")
    assert queued.json()["status"] == "queued"

    again = client.post(f"{JOBS}/{first}/start")
    assert again.status_code == 409 and "running job cannot start" in again.json()["detail"]
    assert client.delete(f"{JOBS}/{first}").status_code == 409
    assert client.patch(f"{JOBS}/{first}", {"budget_usd": "5"}, format="json").status_code == 409

    paused = client.post(f"{JOBS}/{first}/pause").json()
    assert paused["status"] == "paused"
    # Pausing the running job lets the queued one start by itself.
    assert client.get(f"{JOBS}/{second}").json()["status"] == "running"
    resumed = client.post(f"{JOBS}/{first}/start").json()
    assert resumed["status"] == "queued"
    assert client.post(f"{JOBS}/{second}/cancel").json()["status"] == "cancelled"
    assert client.get(f"{JOBS}/{first}").json()["status"] == "running"
    assert client.post(f"{JOBS}/{second}/cancel").status_code == 409
    assert client.post(f"{JOBS}/{second}/pause").status_code == 409
    assert client.delete(f"{JOBS}/{second}").status_code == 204


@pytest.mark.django_db
def test_permissions_and_team_scoping(api, team_a, team_b, member, creator, setup):
    job_id = create(api, creator, setup).json()["id"]
    viewer = member(team_a, Role.VIEWER)
    evaluator = member(team_a, Role.EVALUATOR)
    outsider = member(team_b, Role.ADMIN)

    assert api(viewer).get(f"{JOBS}/{job_id}").status_code == 200
    assert api(viewer).get(f"{JOBS}/{job_id}/outputs").status_code == 200
    assert api(viewer).post(f"{JOBS}/{job_id}/start").status_code == 403
    assert api(viewer).post(f"{JOBS}/{job_id}/export/csv").status_code == 403
    assert create(api, viewer, setup).status_code == 403
    assert api(evaluator).get(JOBS).status_code == 403

    output_id = GenerationOutput.objects.filter(job_id=job_id).first().pk
    for path in (
        f"{JOBS}/{job_id}",
        f"{JOBS}/{job_id}/outputs",
        f"{JOBS}/{job_id}/statistics",
        f"/api/generation/outputs/{output_id}",
    ):
        assert api(outsider).get(path).status_code == 404, path
    for path in ("start", "pause", "cancel", "export/csv", "export/json"):
        assert api(outsider).post(f"{JOBS}/{job_id}/{path}").status_code == 404, path
    assert api(outsider).delete(f"{JOBS}/{job_id}").status_code == 404
    assert api(outsider).get(JOBS).json()["results"] == []
    # Another team's prompt or model is unknown when creating.
    response = api(outsider).post(JOBS, job_body(setup, team="team-b"), format="json")
    assert response.status_code == 400
    assert {"prompt_versions[0]", "models[0]"} <= set(response.json()["errors"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"source": "a string"}, "source"),
        ({"prompt_versions": [{}]}, "prompt_versions"),
        ({"budget_usd": "1e20"}, "budget_usd"),
        ({"budget_usd": "0.000000001"}, "budget_usd"),
        ({"mode": "batch"}, "models[0]"),  # the mock has no batch API
        ({"mode": "later"}, "mode"),
        ({"models": [{"model": 0, "params": {"max_completion_tokens": 100000}}]}, "models[0]"),
    ],
)
def test_more_bad_inputs_are_400_not_500(api, creator, setup, change, field):
    if "models" in change:
        change = {
            "models": [{"model": setup["models"][0].pk, "params": change["models"][0]["params"]}]
        }
        field = "models[0].params"
    response = create(api, creator, setup, **change)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]
    assert GenerationJob.objects.count() == 0


@pytest.mark.django_db
def test_start_flag_must_be_true_to_start(api, creator, setup):
    assert create(api, creator, setup, start="no").json()["status"] == "created"


@pytest.mark.django_db
def test_list_endpoints_run_a_constant_number_of_queries(api, creator, setup):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count(path):
        with CaptureQueriesContext(connection) as ctx:
            fresh = type(creator).objects.get(pk=creator.pk)
            assert api(fresh).get(path).status_code == 200
        return len(ctx.captured_queries)

    first = create(api, creator, setup).json()["id"]
    few_jobs, few_outputs = count(JOBS), count(f"{JOBS}/{first}/outputs?page_size=5")
    for i in range(4):
        create(api, creator, setup, name=f"more {i}")
    assert count(JOBS) == few_jobs
    assert count(f"{JOBS}/{first}/outputs?page_size=40") == few_outputs
