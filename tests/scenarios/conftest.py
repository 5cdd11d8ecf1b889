from __future__ import annotations

import pytest

from generation.models import GenerationJob, GenerationOutput
from tests.generation.conftest import creator, job_body, setup  # noqa: F401 (shared fixtures)

JOBS = "/api/generation/jobs"


@pytest.fixture
def finished_job(api, creator, setup):  # noqa: F811
    """A generation job of 3 items x 2 prompts x 2 models x 2 repetitions x 2 temperatures,
    every output completed with a text of its own."""
    response = api(creator).post(JOBS, job_body(setup), format="json")
    assert response.status_code == 201, response.json()
    job = GenerationJob.objects.get(pk=response.json()["id"])
    for output in job.outputs.all():
        GenerationOutput.objects.filter(pk=output.pk).update(
            status="completed", content=f"Answer number {output.pk}"
        )
    return job
