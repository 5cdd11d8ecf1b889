"""The budget scheduler (issue 21, point 4) through its API and its page: a proposal with
its projected cost and width, accepted into people's tasks and a judge's run, refused when
stale, re-planned from the new verdicts; bad input, permissions, escaping."""

from __future__ import annotations

import copy
import math
import re
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from evaluations.models import BudgetPlan, JudgeRun, Judgment, RaterKind
from scenarios import services as scenario_services
from scenarios.models import Scenario, Task
from tests.factories import TeamFactory
from tests.helpers.accounts import committed_rows, team_people
from tests.helpers.evaluations import (
    PAIR,
    answer_all,
    create_judge,
    judge_scenario,
    make_scenario,
    mock_judge_model,
    rows,
    run,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def judged(people, team_a, mock_judge):
    """``judge_scenario`` for a transactional test of its own."""
    return judge_scenario(people, team_a, mock_judge)


def test_a_proposal_is_priced_accepted_and_refused_once_stale(api, people, judged):
    scenario, judge = judged
    manager = api(people["manager"])
    url = f"/api/scenarios/{scenario.pk}/plan"
    # A little money for the judge, people's hours unpaid: both kinds of work are bought.
    body = {
        **PAIR,
        "budget_usd": 0.005,
        "budget_hours": 0.1,
        "hourly_rate_usd": 0,
    }
    made = manager.post(url, body, format="json")
    assert made.status_code == 201, made.json()
    plan = made.json()
    proposal = plan["proposal"]
    assert plan["status"] == "proposed" and plan["stale"] is False
    assert proposal["entities"] == ["model-bad", "model-good", "model-ok"]
    # Priced before anything is submitted, within the budget; the interval narrows.
    assert 0 < float(proposal["cost"]["usd"]) <= 0.005
    assert 0 < proposal["cost"]["human_hours"] <= 0.1
    assert proposal["after"]["width"] < proposal["before"]["width"]
    assert proposal["tasks"] == sum(w["tasks"] for w in proposal["work"]) > 0
    raters = {r["rater"]: r for r in proposal["raters"]}
    assert set(raters) == {"human", f"judge:{judge['id']}"}
    # People's time per judgment is the median measured (40 s).
    assert raters["human"]["seconds_per_judgment"] == 40
    assert raters["human"]["hours_per_task"] == round(40 / 3600, 6)
    assert raters[f"judge:{judge['id']}"]["measured_against_people"] is True
    # Its raw agreement with people on the nine tasks both answered, beside the reliability.
    assert raters[f"judge:{judge['id']}"]["compared_with_people"] == 9
    assert 0 <= raters[f"judge:{judge['id']}"]["agreement_with_people"] <= 1
    # The work touches the question's pair first.
    assert any(
        {w["entity_a"], w["entity_b"]} == {"model-good", "model-ok"} for w in proposal["work"]
    )
    before_tasks = Task.objects.filter(scenario=scenario).count()
    assert Task.objects.filter(scenario=scenario).count() == before_tasks  # nothing submitted

    # A second proposal from the same state; the first is accepted.
    other = manager.post(url, {**body, "max_tasks": 3}, format="json").json()
    listed = manager.get(url).json()["plans"]
    assert [p["id"] for p in listed] == [other["id"], plan["id"]]
    assert api(people["viewer"]).get(f"{url}/{plan['id']}").json()["id"] == plan["id"]

    accepted = manager.post(f"{url}/{plan['id']}/accept", {}, format="json")
    assert accepted.status_code == 200, accepted.json()
    submitted = accepted.json()["submitted"]
    assert accepted.json()["status"] == "accepted"
    new = Task.objects.filter(scenario=scenario).order_by("position")[before_tasks:]
    assert len(new) == proposal["tasks"]
    by_rater = submitted["tasks"]
    human_ids = set(by_rater.get("human", []))
    judge_ids = set(by_rater.get(f"judge:{judge['id']}", []))
    assert human_ids | judge_ids == {t.pk for t in new}
    # People's tasks are handed out; the judge's are held for it alone.
    for task in new:
        assert task.taken == (0 if task.pk in human_ids else scenario.overlap)
        planned = {task.variant_a.model_label, task.variant_b.model_label}
        assert len(planned) == 2
    assert judge_ids and human_ids
    (entry,) = submitted["judge_runs"]
    run_row = JudgeRun.objects.get(pk=entry["run"])
    assert run_row.tasks == "listed" and run_row.job.total_cells == len(judge_ids)
    run(run_row.job_id)
    judged_now = set(
        Judgment.objects.filter(judge_id=judge["id"], task_id__in=judge_ids).values_list(
            "task_id", flat=True
        )
    )
    assert judged_now == judge_ids
    # Accepted once only; the other proposal is stale now (tasks and verdicts changed).
    assert manager.post(f"{url}/{plan['id']}/accept").status_code == 409
    assert manager.get(f"{url}/{other['id']}").json()["stale"] is True
    stale = manager.post(f"{url}/{other['id']}/accept")
    assert stale.status_code == 409 and "propose again" in stale.json()["detail"]
    assert Task.objects.filter(scenario=scenario).count() == before_tasks + len(new)
    # Re-planned from the current verdicts: the new proposal counts the judge's new ones.
    again = manager.post(url, body, format="json").json()
    counted = {r["rater"]: r["verdicts"] for r in again["proposal"]["raters"]}
    assert counted[f"judge:{judge['id']}"] == raters[f"judge:{judge['id']}"]["verdicts"] + len(
        judge_ids
    )
    assert again["stale"] is False


@pytest.fixture(scope="class")
def one_judged(django_db_setup, django_db_blocker):
    """``judged`` built once for ``TestOneJudgedScenario``, committed (the judge's run reads
    it from threads); the database is emptied after the class. The people's and the
    judge's ids."""
    with committed_rows(django_db_blocker):
        team_a = TeamFactory(name="Team A", slug="team-a")
        people = team_people(team_a, TeamFactory(name="Team B", slug="team-b"))
        scenario, judge = judge_scenario(people, team_a, mock_judge_model(team_a))
        yield {name: user.pk for name, user in people.items()}, scenario.pk, judge


@pytest.mark.django_db
class TestOneJudgedScenario:
    """The tests that only read ``judged`` or write in their own transaction, rolled back
    after each: one judged scenario for them all (``one_judged``), each test's people and
    scenario read afresh."""

    @pytest.fixture
    def people(self, one_judged):
        assert connection.in_atomic_block, "the shared scenario is for tests rolled back"
        User = get_user_model()
        return {name: User.objects.get(pk=pk) for name, pk in one_judged[0].items()}

    @pytest.fixture
    def judged(self, one_judged):
        return Scenario.objects.get(pk=one_judged[1]), copy.deepcopy(one_judged[2])

    def test_each_question_and_the_hours_only_budget(self, api, people, judged):
        scenario, judge = judged
        url = f"/api/scenarios/{scenario.pk}/plan"
        manager = api(people["manager"])
        top = manager.post(
            url,
            {"question": "top_k", "k": 1, "budget_usd": 0.05, **{"hourly_rate_usd": 30}},
            format="json",
        )
        assert top.status_code == 201, top.json()
        # People's pay: the median 40 s a judgment at the rate given.
        humans = next(r for r in top.json()["proposal"]["raters"] if r["rater"] == "human")
        assert humans["usd_per_task"] == "0.3333"
        # Money only: people cost hours, so only the judge is asked.
        assert {w["rater"] for w in top.json()["proposal"]["work"]} <= {f"judge:{judge['id']}"}
        ranking = manager.post(
            url,
            {"question": "ranking", "tau": 0.95, "budget_hours": 0.5, "raters": ["human"]},
            format="json",
        )
        assert ranking.status_code == 201, ranking.json()
        data = ranking.json()["proposal"]
        assert {w["rater"] for w in data["work"]} == {"human"}
        assert "expected_tau" in data["after"] and data["cost"]["human_hours"] <= 0.5
        assert data["after"]["expected_tau"] >= data["before"]["expected_tau"]

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({}, "question"),
            ({"question": "best"}, "question"),
            ({"question": "pair", "a": "model-good"}, "b"),
            ({"question": "pair", "a": "model-good", "b": "model-good"}, "b"),
            ({"question": "pair", "a": "nobody", "b": "model-ok"}, "a"),
            ({"question": "top_k", "k": 3}, "k"),
            ({"question": "top_k", "k": "x"}, "k"),
            ({"question": "ranking", "tau": 1.5}, "tau"),
            ({"question": "ranking", "budget_usd": 0, "budget_hours": 0}, "budget_usd"),
            ({"question": "ranking", "budget_usd": -1}, "budget_usd"),
            ({"question": "ranking", "budget_usd": "NaN"}, "budget_usd"),
            ({"question": "ranking", "budget_hours": 1e20}, "budget_hours"),
            ({"question": "ranking", "hourly_rate_usd": True}, "hourly_rate_usd"),
            ({"question": "ranking", "target_width": 0}, "target_width"),
            ({"question": "ranking", "max_tasks": 501}, "max_tasks"),
            ({"question": "ranking", "raters": ["judge:999999"]}, "raters"),
            ({"question": "ranking", "raters": "human"}, "raters"),
        ],
    )
    def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(
        self, api, people, judged, body, field
    ):
        scenario, _ = judged
        full = {"budget_usd": 1, **body} if "budget" not in str(body) else body
        response = api(people["manager"]).post(
            f"/api/scenarios/{scenario.pk}/plan", full, format="json"
        )
        assert response.status_code == 400, response.json()
        assert field in response.json()["errors"], response.json()
        assert not BudgetPlan.objects.exists()

    def test_permissions_follow_the_scenario(self, api, people, judged):
        scenario, _ = judged
        url = f"/api/scenarios/{scenario.pk}/plan"
        body = {"question": "ranking", "budget_usd": 1}
        assert api(people["viewer"]).post(url, body, format="json").status_code == 403
        assert api(people["outsider"]).post(url, body, format="json").status_code == 404
        assert api(people["outsider"]).get(url).status_code == 404
        plan = api(people["manager"]).post(url, body, format="json").json()
        assert api(people["outsider"]).get(f"{url}/{plan['id']}").status_code == 404
        assert api(people["outsider"]).post(f"{url}/{plan['id']}/accept").status_code == 404
        assert api(people["viewer"]).post(f"{url}/{plan['id']}/accept").status_code == 403
        assert api(people["viewer"]).get(f"{url}/{plan['id']}").status_code == 200
        # Another scenario's plan id under this scenario: not found.
        other = make_scenario(people, scenario.team, "ranking", {}, data=rows(2))
        assert (
            api(people["manager"]).get(f"/api/scenarios/{other.pk}/plan/{plan['id']}").status_code
            == 404
        )
        assert BudgetPlan.objects.get().status == "proposed"

    def test_people_answer_the_accepted_tasks(self, api, people, judged):
        """The people's part of an accepted proposal reaches evaluators as ordinary tasks, and
        their verdicts make the next proposal."""
        scenario, _ = judged
        manager = api(people["manager"])
        url = f"/api/scenarios/{scenario.pk}/plan"
        body = {
            "question": "ranking",
            "budget_hours": 0.2,
            "hourly_rate_usd": 0,
            "raters": ["human"],
        }
        plan = manager.post(url, body, format="json").json()
        assert plan["proposal"]["tasks"] > 0
        accepted = manager.post(f"{url}/{plan['id']}/accept").json()
        before = Judgment.objects.filter(rater_kind=RaterKind.HUMAN).count()
        answer_all(api, people["evaluator"], scenario)
        after = Judgment.objects.filter(rater_kind=RaterKind.HUMAN).count()
        assert after - before == len(accepted["submitted"]["tasks"]["human"])
        again = manager.post(url, body, format="json").json()
        humans = next(r for r in again["proposal"]["raters"] if r["rater"] == "human")
        assert humans["verdicts"] == after

    def test_the_list_of_proposals_reads_a_constant_number_of_queries(self, api, people, judged):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        scenario, _ = judged
        manager = api(people["manager"])
        url = f"/api/scenarios/{scenario.pk}/plan"
        body = {"question": "ranking", "budget_usd": 0.001}
        counts = []
        for _ in range(2):
            for _ in range(3):
                assert manager.post(url, body, format="json").status_code == 201
            with CaptureQueriesContext(connection) as queries:
                listed = manager.get(url)
            counts.append(len(queries))
        assert len(listed.json()["plans"]) == 6
        assert counts[0] == counts[1]


def test_the_page_proposes_shows_the_cost_and_accepts_with_csrf(api, people, team_a, mock_judge):
    data = rows()
    for row in data:
        if row["variant_id"] == "bad":
            row["model"] = "<script>alert(1)</script>"
    scenario = make_scenario(people, team_a, "comparison", {}, data=data)
    scenario = scenario_services.scenario_open(user=people["manager"], scenario=scenario)
    create_judge(api, people["manager"], scenario, name="<b>J</b>", model=mock_judge.pk)
    manager = Client(enforce_csrf_checks=True)
    manager.force_login(people["manager"])
    analytics = manager.get(f"/scenarios/{scenario.pk}/analytics?resamples=0")
    assert analytics.status_code == 200
    assert f'href="/scenarios/{scenario.pk}/plan"' in analytics.content.decode()
    page = manager.get(f"/scenarios/{scenario.pk}/plan")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<b>J</b>" not in html
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    # Without the token: refused.
    assert (
        manager.post(f"/scenarios/{scenario.pk}/plan", {"question": "ranking"}).status_code == 403
    )
    bad = manager.post(
        f"/scenarios/{scenario.pk}/plan",
        {"csrfmiddlewaretoken": token, "question": "pair", "a": "model-good", "budget_usd": "1"},
    )
    assert bad.status_code == 400 and "One of the scenario" in bad.content.decode()
    assert not BudgetPlan.objects.exists()
    made = manager.post(
        f"/scenarios/{scenario.pk}/plan",
        {
            "csrfmiddlewaretoken": token,
            "question": "pair",
            "a": "model-good",
            "b": "model-ok",
            "budget_usd": "1",
            "budget_hours": "0.5",
            "hourly_rate_usd": "20",
            "raters": ["human", f"judge:{scenario.judges.get().pk}"],
        },
        follow=True,
    )
    assert made.status_code == 200
    plan = BudgetPlan.objects.get()
    shown = made.content.decode()
    assert "Projected cost" in shown and f"${plan.proposal['cost']['usd']}" in shown
    assert "&lt;script&gt;" not in shown or "<script>alert" not in shown
    assert "<script>alert(1)</script>" not in shown
    before = Task.objects.filter(scenario=scenario).count()
    done = manager.post(
        f"/scenarios/{scenario.pk}/plan/{plan.pk}/accept",
        {"csrfmiddlewaretoken": token},
        follow=True,
    )
    assert done.status_code == 200 and "Submitted:" in done.content.decode()
    assert Task.objects.filter(scenario=scenario).count() == before + plan.proposal["tasks"]
    # Accepted, the proposal's state is gone: the page offers the same question again.
    again = manager.get(f"/scenarios/{scenario.pk}/plan").content.decode()
    assert 'name="budget_hours" min="0" step="any" value="0.5"' in again
    assert '<option value="model-ok" selected>' in again
    viewer = Client()
    viewer.force_login(people["viewer"])
    assert viewer.get(f"/scenarios/{scenario.pk}/plan/{plan.pk}").status_code == 200
    assert viewer.post(f"/scenarios/{scenario.pk}/plan/{plan.pk}/accept").status_code == 403
    outsider = Client()
    outsider.force_login(people["outsider"])
    assert outsider.get(f"/scenarios/{scenario.pk}/plan").status_code == 404


def test_the_judges_part_goes_through_the_providers_batch_api(api, people, team_a, fake_provider):
    """A judge whose model has a batch API (the fake provider's OpenAI batches) is priced at
    the batch rate and its tasks are submitted as a batch run, though the judge itself runs
    live; its verdicts come back and count in the next proposal."""
    from tests.helpers.generation import drive_until_done, model_for

    fake_provider.config.batch_duration_s = 0
    model = model_for(team_a, fake_provider)
    scenario = make_scenario(people, team_a, "comparison", {})
    scenario = scenario_services.scenario_open(user=people["manager"], scenario=scenario)
    answer_all(api, people["evaluator"], scenario)
    judge = create_judge(
        api, people["manager"], scenario, name="Live judge", model=model.pk, max_tokens=200
    )
    assert judge["mode"] == "live"
    manager = api(people["manager"])
    url = f"/api/scenarios/{scenario.pk}/plan"
    body = {"question": "ranking", "budget_usd": 0.002, "raters": [f"judge:{judge['id']}"]}
    plan = manager.post(url, body, format="json").json()
    (rater,) = plan["proposal"]["raters"]
    assert rater["mode"] == "batch" and rater["tokens_measured"] is False
    # The batch price (half the live one) of the typical call: the default judge prompt's
    # 1,200 characters and two outputs of the mean length, a token per 4 characters; a
    # 150-token reply.
    contents = [v.content for v in scenario.variants.all()]
    tokens = math.ceil((1200 + 2 * sum(map(len, contents)) / len(contents)) / 4)
    batch = model.cost_usd(tokens, 150, batch=True)
    assert Decimal(rater["usd_per_task"]) == batch.quantize(Decimal("0.0001"), ROUND_HALF_UP)
    assert batch * 2 == model.cost_usd(tokens, 150)
    accepted = manager.post(f"{url}/{plan['id']}/accept")
    assert accepted.status_code == 200, accepted.json()
    (entry,) = accepted.json()["submitted"]["judge_runs"]
    assert entry["mode"] == "batch"
    run_row = JudgeRun.objects.select_related("job").get(pk=entry["run"])
    assert run_row.job.mode == "batch"
    job = drive_until_done(run_row.job_id)
    assert job.status == "completed", job.status_message
    asked = accepted.json()["submitted"]["tasks"][f"judge:{judge['id']}"]
    assert Judgment.objects.filter(judge_id=judge["id"], task_id__in=asked).count() == len(asked)
    again = manager.post(url, body, format="json").json()
    (rater,) = again["proposal"]["raters"]
    assert rater["verdicts"] >= len(asked) and rater["tokens_measured"] is True


def test_a_proposal_goes_stale_when_a_judge_or_its_price_changes(api, people, judged):
    """A proposal is priced from its judges' configuration and prices: when either changes,
    accepting it would run work it never priced (409, nothing made); the fingerprint the
    reader saw must be the proposal's; judges' tasks wait for a draft to open."""
    from evalplatform.providers.models import LLMModel
    from evaluations.models import LLMJudge

    scenario, judge = judged
    manager = api(people["manager"])
    url = f"/api/scenarios/{scenario.pk}/plan"
    body = {
        **PAIR,
        "budget_usd": 0.005,
        "budget_hours": 0,
        "hourly_rate_usd": 0,
    }
    before = Task.objects.filter(scenario=scenario).count()

    plan = manager.post(url, body, format="json").json()
    assert plan["proposal"]["work"] and plan["stale"] is False
    LLMJudge.objects.filter(pk=judge["id"]).update(repetitions=3)
    assert manager.get(f"{url}/{plan['id']}").json()["stale"] is True
    refused = manager.post(f"{url}/{plan['id']}/accept", {}, format="json")
    assert refused.status_code == 409 and "propose again" in refused.json()["detail"]

    plan = manager.post(url, body, format="json").json()
    model = LLMModel.objects.filter(pk=LLMJudge.objects.get(pk=judge["id"]).llm_model_id)
    price = model.get().output_price_per_mtok
    model.update(output_price_per_mtok=Decimal("99"))
    assert manager.post(f"{url}/{plan['id']}/accept", {}, format="json").status_code == 409
    model.update(output_price_per_mtok=price)  # a proposal of the budget's size again

    plan = manager.post(url, body, format="json").json()
    seen = manager.post(
        f"{url}/{plan['id']}/accept", {"fingerprint": "v0:0/t0:0/jx"}, format="json"
    )
    assert seen.status_code == 409 and "since you read it" in seen.json()["detail"]
    assert Task.objects.filter(scenario=scenario).count() == before

    # The same proposal accepted with the fingerprint it was read with.
    ok = manager.post(
        f"{url}/{plan['id']}/accept", {"fingerprint": plan["fingerprint"]}, format="json"
    )
    assert ok.status_code == 200, ok.json()
    assert Task.objects.filter(scenario=scenario).count() > before


def test_judges_tasks_wait_for_a_draft_scenario_to_open(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    manager = api(people["manager"])
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    url = f"/api/scenarios/{scenario.pk}/plan"
    body = {
        **PAIR,
        "budget_usd": 0.005,
        "budget_hours": 0,
        "hourly_rate_usd": 0,
        "raters": [f"judge:{judge['id']}"],
    }
    made = manager.post(url, body, format="json")
    assert made.status_code == 201, made.json()
    plan = made.json()
    assert plan["proposal"]["work"]
    before = Task.objects.filter(scenario=scenario).count()
    refused = manager.post(f"{url}/{plan['id']}/accept", {}, format="json")
    assert refused.status_code == 409 and "Open the scenario" in refused.json()["detail"]
    assert Task.objects.filter(scenario=scenario).count() == before


def test_too_many_judges_for_the_models_is_a_400_on_raters(api, people, judged, monkeypatch):
    """The joint fit has a parameter per judge and model: past ``MAX_PARAMETERS`` a
    proposal is refused (400 on ``raters``, nothing stored); naming fewer raters plans."""
    from evaluations.planner import services as planner

    scenario, _ = judged
    monkeypatch.setattr(planner, "MAX_PARAMETERS", 6)  # 3 models: people alone fit
    url = f"/api/scenarios/{scenario.pk}/plan"
    body = {"question": "ranking", "budget_usd": 1}
    refused = api(people["manager"]).post(url, body, format="json")
    assert refused.status_code == 400
    assert "at most 0 judges" in refused.json()["errors"]["raters"][0]
    assert not BudgetPlan.objects.exists()
    people_only = api(people["manager"]).post(url, body | {"raters": ["human"]}, format="json")
    assert people_only.status_code == 201, people_only.json()
    monkeypatch.undo()  # the bound itself: 100 models and 10 judges fit, 11 do not
    assert planner.too_many_parameters(100, ["human", *(f"judge:{k}" for k in range(10))]) is None
    assert planner.too_many_parameters(100, [f"judge:{k}" for k in range(11)])
