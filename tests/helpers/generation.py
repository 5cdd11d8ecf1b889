"""Generation jobs through the API and the live runner."""

from __future__ import annotations

import asyncio
import json
import threading
from decimal import Decimal

from django.db import connections
from django.db.models import Sum

from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.runs.engine import run_live
from generation.models import GenerationJob, JobStatus
from generation.runners import batch as batch_runner
from generation.runners.live import GenerationWork
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version


def generation_setup(team):
    """Two prompt versions and two mock models in ``team`` (the ``setup`` fixture)."""
    connection = ConnectionFactory(team=team, kind="mock", name="mock")
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
    summary = PromptTemplateFactory(team=team, name="Summary")
    short = PromptTemplateFactory(team=team, name="Short")
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


JOBS = "/api/generation/jobs"


class FakeSleep:
    def __init__(self):
        self.waits = []

    async def __call__(self, seconds):
        self.waits.append(seconds)


def run(job_id, *, max_retries=3, sleep=None):
    policy = RetryPolicy(max_retries=max_retries, sleep=sleep or FakeSleep())
    return asyncio.run(run_live(GenerationWork(job_id, retry=policy)))


def run_in_background(job_id):
    """Run the job in a thread (as a worker would); returns (thread, result dict)."""
    result = {}

    def runner():
        try:
            result["summary"] = run(job_id, sleep=asyncio.sleep)
        finally:
            connections.close_all()  # this thread's own connection

    thread = threading.Thread(target=runner)
    thread.start()
    return thread, result


def started_job(api, user, setup, **extra):
    response = api(user).post(JOBS, job_body(setup, **extra), format="json")
    assert response.status_code == 201, response.json()
    job_id = response.json()["id"]
    assert api(user).post(f"{JOBS}/{job_id}/start").json()["status"] == "running"
    return job_id


def create_job(api, user, body):
    """A job made through the API from ``body``."""
    response = api(user).post(JOBS, body, format="json")
    assert response.status_code == 201, response.json()
    return GenerationJob.objects.get(pk=response.json()["id"])


def wizard_form(setup, **extra):
    items = [{"id": f"w{i}", "content": f"Wizard text {i}"} for i in range(2)]
    form = {
        "team": "team-a",
        "source_type": "manual",
        "content": json.dumps(items),
        "format": "",
        "prompt_versions": [str(p.pk) for p in setup["prompts"]],
        "models": [str(m.pk) for m in setup["models"]],
        "name": "From the wizard",
        "temperatures": "0, 1",
        "repetitions": "2",
        "max_tokens": "50",
        "budget_usd": "",
        "max_retries": "3",
        "concurrency": "4",
        "mode": "live",
    }
    return form | extra


def job_on(api, user, team, base_url, items=6, **connection):
    conn = ConnectionFactory(team=team, kind="openai", base_url=base_url, **connection)
    model = LLMModelFactory(connection=conn, model_id="gpt-fake")
    version = make_version(PromptTemplateFactory(team=team), [("", "Answer {{content}}")])
    body = {
        "team": team.slug,
        "name": "Doomed",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0],
        "max_tokens": 50,
        "concurrency": 1,
        "source": {
            "type": "manual",
            "format": "json",
            "content": json.dumps([{"content": f"x{n}"} for n in range(items)]),
        },
        "start": True,
    }
    made = api(user).post(JOBS, body, format="json")
    assert made.status_code == 201, made.json()
    return made.json()["id"]


# --- batch mode against the fake provider's batch APIs ---------------------------------------
MODEL_IDS = {"openai": "gpt-fake", "anthropic": "claude-fake", "gemini": "gemini-fake"}


def model_for(team, fake, kind="openai", **fields):
    connection = ConnectionFactory(team=team, kind=kind, base_url=fake.url, name=f"{kind}-fake")
    fields = {"supports_batch": True, "batch_discount": Decimal("0.5")} | fields
    return LLMModelFactory(connection=connection, model_id=MODEL_IDS[kind], **fields)


def batch_job(api, user, team, model, contents, **extra):
    version = make_version(PromptTemplateFactory(team=team), [("", "Answer: {{content}}")])
    items = [{"id": f"i{n}", "content": c} for n, c in enumerate(contents)]
    body = {
        "team": team.slug,
        "name": "Batch study",
        "mode": "batch",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0, 1.0],
        "max_tokens": 60,
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    } | extra
    response = api(user).post(JOBS, body, format="json")
    assert response.status_code == 201, response.json()
    job_id = response.json()["id"]
    assert api(user).post(f"{JOBS}/{job_id}/start").json()["status"] == "running"
    return job_id


def drive(job_id=None):
    return asyncio.run(batch_runner.drive(job_id))


def drive_until_done(job_id, passes=8):
    for _ in range(passes):
        drive(job_id)
        if GenerationJob.objects.get(pk=job_id).status != JobStatus.RUNNING:
            break
    return GenerationJob.objects.get(pk=job_id)


def cost_counted_once(job):
    spent = job.outputs.aggregate(s=Sum("cost_usd"))["s"] or Decimal(0)
    assert job.cost_usd == spent and job.reserved_usd == 0
