"""Re-planning as results arrive (issue 21, point 4): a judge run of an accepted plan that
completes, or people's answers on its tasks (debounced), make a fresh proposal for the same
question with the budget the chain has left; never accepted by itself; skipped, with the
reason, once the budget is spent. The admin lists the plans of the user's teams only."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.test import Client
from django_q.conf import Conf

from evaluations.models import BudgetPlan, JudgeRun, Judgment, PlanStatus
from evaluations.planner import replan
from generation.models import GenerationJob
from scenarios import services as scenario_services
from tests.helpers.evaluations import (
    PAIR,
    answer_all,
    answer_next,
    create_judge,
    make_scenario,
    run,
)

pytestmark = pytest.mark.django_db(transaction=True)


def answer(api, user, scenario, count, *, seconds=40):
    """The evaluator answers ``count`` tasks they are handed (the better model winning)."""
    client = api(user)
    for _ in range(count):
        assert answer_next(client, scenario, seconds=seconds), "no task was handed out"


def accept_people_plan(api, people, scenario):
    """A manager proposes and accepts people's work on A vs B (unpaid hours, up to six
    tasks): the manager's client, the plans' URL, the proposal and the accept's JSON."""
    manager = api(people["manager"])
    url = f"/api/scenarios/{scenario.pk}/plan"
    body = {
        **PAIR,
        "target_width": 0.05,
        "budget_hours": 1.0,
        "hourly_rate_usd": 0,
        "max_tasks": 6,
        "raters": ["human"],
    }
    plan = manager.post(url, body, format="json").json()
    accepted = manager.post(f"{url}/{plan['id']}/accept")
    assert accepted.status_code == 200, accepted.content
    return manager, url, plan, accepted.json()


@pytest.fixture
def judged(api, people, team_a, mock_judge):
    """An open comparison scenario (three models on three items) answered by an evaluator
    and by a mock judge (as in test_planner)."""
    scenario = make_scenario(people, team_a, "comparison", {})
    scenario = scenario_services.scenario_open(user=people["manager"], scenario=scenario)
    answer_all(api, people["evaluator"], scenario)
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    run(
        api(people["manager"])
        .post(f"/api/judges/{judge['id']}/run", {}, format="json")
        .json()["job"]
    )
    return scenario, judge


def replans(plan_id):
    return list(BudgetPlan.objects.filter(chain_id=plan_id).order_by("pk"))


def test_a_finished_judge_run_re_plans_with_the_remaining_budget(
    api, people, team_a, fake_provider, monkeypatch
):
    from tests.helpers.generation import drive_until_done, model_for

    fake_provider.config.batch_duration_s = 0
    model = model_for(team_a, fake_provider)
    scenario = make_scenario(people, team_a, "comparison", {})
    scenario = scenario_services.scenario_open(user=people["manager"], scenario=scenario)
    answer_all(api, people["evaluator"], scenario)
    judge = create_judge(
        api, people["manager"], scenario, name="Judge", model=model.pk, max_tokens=200
    )
    manager = api(people["manager"])
    url = f"/api/scenarios/{scenario.pk}/plan"
    body = {
        "question": "ranking",
        "budget_usd": 0.01,
        "max_tasks": 3,
        "raters": [f"judge:{judge['id']}"],
    }
    plan = manager.post(url, body, format="json").json()
    assert plan["chain"] == {
        "root": plan["id"],
        "predecessor": None,
        "trigger": None,
        "new_verdicts": 0,
        "spending": None,
        "reason": None,
        "reason_text": None,
    }
    accepted = manager.post(f"{url}/{plan['id']}/accept").json()
    assert replans(plan["id"]) == []  # accepting is no result
    monkeypatch.setattr(Conf, "SYNC", True)  # the queued re-plan runs at once
    (entry,) = accepted["submitted"]["judge_runs"]
    job = drive_until_done(JudgeRun.objects.get(pk=entry["run"]).job_id)
    assert job.status == "completed", job.status_message

    (again,) = replans(plan["id"])
    assert again.status == PlanStatus.PROPOSED  # a proposal only: never accepted by itself
    shown = manager.get(f"{url}/{again.pk}").json()
    chain = shown["chain"]
    assert chain["root"] == plan["id"] and chain["predecessor"] == plan["id"]
    assert chain["trigger"] == "judge_run"
    asked = accepted["submitted"]["tasks"][f"judge:{judge['id']}"]
    made = Judgment.objects.filter(judge_id=judge["id"], task_id__in=asked).count()
    assert made >= len(asked) and chain["new_verdicts"] == made
    committed = Decimal(plan["proposal"]["cost"]["usd"])
    spent = GenerationJob.objects.get(pk=job.pk).cost_usd
    charged = max(committed, spent)
    assert Decimal(chain["spending"]["committed"]["usd"]) == committed
    assert Decimal(chain["spending"]["spent"]["usd"]) == spent.quantize(
        Decimal("0.0001"), rounding=ROUND_HALF_UP
    )
    remaining = (Decimal("0.01") - charged).quantize(Decimal("0.0001"))
    assert Decimal(chain["spending"]["remaining"]["usd"]) == remaining
    assert Decimal(str(shown["budget"]["usd"])) == remaining
    assert Decimal(shown["proposal"]["cost"]["usd"]) <= remaining
    assert shown["question"] == plan["question"] and not shown["stale"]
    # The chain is on the list and on the plan page.
    listed = {p["id"]: p for p in manager.get(url).json()["plans"]}
    assert listed[again.pk]["chain"]["predecessor"] == plan["id"]
    client = Client()
    client.force_login(people["manager"])
    page = client.get(f"/scenarios/{scenario.pk}/plan/{again.pk}").content.decode()
    assert f"re-planned after {chain['new_verdicts']} new verdicts" in page
    assert f"remaining: ${remaining}" in page
    # Accepting the re-plan continues the chain.
    taken = manager.post(f"{url}/{again.pk}/accept")
    assert taken.status_code == 200, taken.json()
    assert BudgetPlan.objects.get(pk=again.pk).status == PlanStatus.ACCEPTED


def test_people_answering_re_plans_once_per_n_answers(api, people, judged, settings, monkeypatch):
    settings.PLANNER_REPLAN_EVERY_ANSWERS = 2
    scenario, _ = judged
    manager, url, plan, accepted = accept_people_plan(api, people, scenario)
    assert len(accepted["submitted"]["tasks"]["human"]) >= 5
    monkeypatch.setattr(Conf, "SYNC", True)
    assert replan.sweep() == []  # no answer yet
    answer(api, people["evaluator"], scenario, 1)
    assert replan.sweep() == [] and replans(plan["id"]) == []  # fewer than 2 new verdicts
    answer(api, people["evaluator"], scenario, 1)
    assert replans(plan["id"]) == []  # answering itself computes nothing
    assert replan.sweep() == [plan["id"]]
    (first,) = replans(plan["id"])
    assert (first.trigger, first.new_verdicts, first.replans_id) == ("answers", 2, plan["id"])
    assert first.status == PlanStatus.PROPOSED and first.verdicts_seen == 2
    assert replan.sweep() == []  # nothing new since
    answer(api, people["evaluator"], scenario, 1)
    assert replan.sweep() == []  # debounced: one more is not enough
    answer(api, people["evaluator"], scenario, 1)
    assert replan.sweep() == [plan["id"]]
    (refreshed,) = replans(plan["id"])  # one pending re-plan per chain: refreshed in place
    assert refreshed.pk == first.pk and refreshed.new_verdicts == 2
    assert refreshed.verdicts_seen == 4 and refreshed.status == PlanStatus.PROPOSED
    # Fewer than 2 new verdicts are re-planned once the chain has been idle long enough.
    answer(api, people["evaluator"], scenario, 1)
    settings.PLANNER_REPLAN_IDLE_MINUTES = 0
    assert replan.sweep() == [plan["id"]]
    assert replans(plan["id"])[0].verdicts_seen == 5
    spending = manager.get(f"{url}/{first.pk}").json()["chain"]["spending"]
    # Five answers of 40 s spent; the plan's projected hours committed.
    assert spending["spent"]["hours"] == round(5 * 40 / 3600, 4)
    committed = plan["proposal"]["cost"]["human_hours"]
    assert spending["committed"]["hours"] == committed
    assert spending["remaining"]["hours"] == round(1.0 - max(committed, 5 * 40 / 3600), 4)


def test_a_spent_budget_records_why_nothing_was_re_planned(
    api, people, judged, settings, monkeypatch
):
    settings.PLANNER_REPLAN_EVERY_ANSWERS = 2
    scenario, _ = judged
    manager = api(people["manager"])
    url = f"/api/scenarios/{scenario.pk}/plan"
    body = {"question": "ranking", "budget_hours": 0.2, "hourly_rate_usd": 0, "raters": ["human"]}
    plan = manager.post(url, body, format="json").json()
    manager.post(f"{url}/{plan['id']}/accept")
    monkeypatch.setattr(Conf, "SYNC", True)
    answer(api, people["evaluator"], scenario, 2, seconds=600)  # 20 minutes: over 0.2 h
    assert replan.sweep() == [plan["id"]]
    (skipped,) = replans(plan["id"])
    shown = manager.get(f"{url}/{skipped.pk}").json()
    assert shown["status"] == "skipped"
    assert shown["chain"]["reason"] == "budget_exhausted"
    assert shown["chain"]["spending"]["remaining"] == {"usd": "0.0000", "hours": 0.0}
    assert shown["proposal"] == {}
    refused = manager.post(f"{url}/{skipped.pk}/accept")
    assert refused.status_code == 409
    client = Client()
    client.force_login(people["manager"])
    page = client.get(f"/scenarios/{scenario.pk}/plan/{skipped.pk}").content.decode()
    assert "Not re-planned: The chain&#x27;s budget is spent." in page


def test_the_admin_lists_only_the_plans_of_ones_teams(api, people, judged):
    scenario, _ = judged
    url = f"/api/scenarios/{scenario.pk}/plan"
    plan = api(people["manager"]).post(url, {"question": "ranking", "budget_usd": 1}, format="json")
    plan_id = plan.json()["id"]
    own = Client()
    own.force_login(people["manager"])
    listing = own.get("/admin/evaluations/budgetplan/")
    assert listing.status_code == 200
    assert f"/admin/evaluations/budgetplan/{plan_id}/change/" in listing.content.decode()
    shown = own.get(f"/admin/evaluations/budgetplan/{plan_id}/change/")
    assert shown.status_code == 200
    # Read only: no change is saved.
    own.post(f"/admin/evaluations/budgetplan/{plan_id}/change/", {"status": "accepted"})
    assert BudgetPlan.objects.get(pk=plan_id).status == PlanStatus.PROPOSED
    assert own.post(f"/admin/evaluations/budgetplan/{plan_id}/delete/", {"post": "yes"})
    assert BudgetPlan.objects.filter(pk=plan_id).exists()
    outsider = Client()
    outsider.force_login(people["outsider"])
    listed = outsider.get("/admin/evaluations/budgetplan/").content.decode()
    assert f"/admin/evaluations/budgetplan/{plan_id}/change/" not in listed
    assert outsider.get(f"/admin/evaluations/budgetplan/{plan_id}/change/").status_code == 404


def test_the_debounce_counts_from_the_latest_refresh(api, people, judged, settings, monkeypatch):
    """A refreshed re-plan debounces from its refresh, not from when it was first made."""
    from datetime import timedelta

    from django.utils import timezone

    settings.PLANNER_REPLAN_EVERY_ANSWERS = 2
    settings.PLANNER_REPLAN_IDLE_MINUTES = 5
    scenario, _ = judged
    _, _, plan, _ = accept_people_plan(api, people, scenario)
    monkeypatch.setattr(Conf, "SYNC", True)
    answer(api, people["evaluator"], scenario, 2)
    assert replan.sweep() == [plan["id"]]
    # Ten minutes pass; two more answers refresh the re-plan.
    long_ago = timezone.now() - timedelta(minutes=10)
    BudgetPlan.objects.filter(pk=plan["id"]).update(accepted_at=long_ago)
    BudgetPlan.objects.filter(chain_id=plan["id"]).update(created_at=long_ago)
    answer(api, people["evaluator"], scenario, 2)
    assert replan.sweep() == [plan["id"]]
    (refreshed,) = replans(plan["id"])
    assert refreshed.created_at > long_ago + timedelta(minutes=9)
    # One answer right after the refresh waits (not idle since the refresh).
    answer(api, people["evaluator"], scenario, 1)
    assert replan.sweep() == []
