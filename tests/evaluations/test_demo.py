from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from evaluations.models import Judgment
from generation.models import GenerationJob, GenerationOutput
from scenarios.models import Scenario


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
    assert GenerationJob.objects.count() == 3  # the generation job and two judge runs
    assert Scenario.objects.count() == 2  # made once
    assert {o.custom_id: o.content for o in GenerationOutput.objects.filter(job=job)} == first


@pytest.mark.django_db(transaction=True)
def test_the_demo_judges_its_scenarios_in_both_orders_at_two_temperatures():
    call_command("demo", stdout=io.StringIO())
    comparison = Scenario.objects.get(type="comparison")
    judged = Judgment.objects.filter(scenario=comparison, rater_kind="judge")
    # 25 pairs x both orders x 2 repetitions x 2 temperatures, every reply a verdict.
    assert judged.count() == 200 and not judged.filter(parse_status="failed").exists()
    assert {(j.swapped, j.temperature, j.repetition) for j in judged} == {
        (s, t, r) for s in (False, True) for t in (0.0, 1.0) for r in (0, 1)
    }
    # The mock judge's position bias shows: the first-shown answer wins more than half.
    firsts = judged.filter(payload__winner="A").count()
    seconds = judged.filter(payload__winner="B").count()
    assert firsts > seconds
    rating = Scenario.objects.get(type="rating")
    rated = Judgment.objects.filter(scenario=rating, rater_kind="judge")
    assert rated.count() == 160 and not rated.filter(parse_status="failed").exists()
    assert set(rated.first().payload["scores"]) == {"Helpfulness", "Specificity"}


@pytest.mark.django_db(transaction=True)
def test_the_demo_analytics_find_the_mock_judges_position_bias():
    from evaluations.analytics.analyze import analyze

    call_command("demo", stdout=io.StringIO())
    result = analyze(Scenario.objects.get(type="comparison"), resamples=100)
    (judge,) = result["judges"]
    assert [t["temperature"] for t in judge["by_temperature"]] == [0.0, 1.0]
    assert judge["first_position_share"] > 0.5 and judge["reverse_pairs"] == 100
    assert result["position_bias"]["overall"]["p_value"] < 0.05
    rating = analyze(Scenario.objects.get(type="rating"), resamples=0)
    stable, noisy = rating["stability"][0]["conditions"]
    assert stable["temperature"] == 0.0 and stable["share_identical"] == 1.0
    assert noisy["mean_item_sd"] > stable["mean_item_sd"]


@pytest.mark.django_db(transaction=True)
def test_the_demo_adds_each_seeds_workflow_with_seeds():
    from evaluations.models import JudgeBatch, LLMJudge
    from generation.selectors import consistency_for

    out = io.StringIO()
    call_command("demo", "--seeds", stdout=out)
    text = out.getvalue()
    assert "Essay scoring: 400/400 replies read into fields" in text
    essays = GenerationJob.objects.get(name__startswith="Demo seed: essay scoring")
    found = consistency_for(essays, "total_score")
    by_condition = {c["condition"].rsplit(" · ", 1)[1]: c for c in found["by_condition"]}
    assert by_condition["temperature 0"]["items_with_sd_0"] == 10
    assert by_condition["no temperature sent"]["mean_sd"] > 0
    [pair] = found["rank_agreement"]
    assert pair["items"] == 10 and pair["spearman"] > 0.5
    judge = LLMJudge.objects.get(name__startswith="pairwiseLLM")
    assert judge.judgments.count() == 50 and not judge.judgments.filter(parse_status="failed")
    batch = JudgeBatch.objects.get()
    assert (batch.status, batch.completed, batch.failed) == ("completed", 40, 0)
    assert f"Judge file {batch.public_id}: completed, 40 replies" in text
    # A second mock connection with the same catalog (loaded in the admin) changes nothing.
    from evalplatform.providers.models import ProviderConnection
    from evalplatform.providers.services import catalog_load

    team = essays.team
    other = ProviderConnection.objects.create(team=team, name="Another mock", kind="mock")
    catalog_load(team=team, connection=other)
    again = io.StringIO()
    call_command("demo", "--seeds", stdout=again)
    assert JudgeBatch.objects.count() == 1 and LLMJudge.objects.count() == 3
    assert GenerationJob.objects.filter(name__startswith="Demo seed").count() == 1
