from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from generation.models import GenerationJob, GenerationOutput


@pytest.mark.django_db(transaction=True)
def test_demo_runs_the_loop_offline_and_is_idempotent():
    out = io.StringIO()
    call_command("demo", stdout=out)
    text = out.getvalue()
    assert "Demo user demo-manager /" in text and "completed, 320/320 outputs" in text
    job = GenerationJob.objects.get(name__startswith="Demo:")
    assert job.status == "completed" and job.cost_usd > 0
    first = {o.custom_id: o.content for o in GenerationOutput.objects.filter(job=job)}
    assert len(first) == 320 and all(first.values())
    assert "Scenario 'Demo: which feedback helps more' (comparison, 25 tasks, open)" in text
    assert "Scenario 'Demo: feedback quality' (rating, 40 tasks, open)" in text

    again = io.StringIO()
    call_command("demo", stdout=again)
    assert "Demo user" not in again.getvalue() and "completed, 320/320" in again.getvalue()
    assert GenerationJob.objects.count() == 1
    from scenarios.models import Scenario

    assert Scenario.objects.count() == 2  # made once
    assert {o.custom_id: o.content for o in GenerationOutput.objects.filter(job=job)} == first
