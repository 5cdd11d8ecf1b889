"""A team's default trust gate (issue 21, point 3) through the API and the pages: it holds
every scenario of the team without a gate of its own, a scenario's own gate overrides it
entirely, its changes reach the judge cards, the rankings and the trust API at once (the
stored analyses go stale), its rights are a scenario gate's at team level, bad bodies are
field errors that write nothing; the budget scheduler plans no work for an untrusted judge
until a manager opts in, and says which judges it left out and why."""

from __future__ import annotations

import pytest
from django.test import Client

from evalplatform.accounts.models import AuditEvent
from evaluations.models import TeamTrustGate, TrustGate
from tests.helpers.evaluations import card_of, judge_scenario

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def judged(people, team_a, mock_judge):
    """``judge_scenario``: a comparison scenario answered by an evaluator and a mock judge
    (``biased``, the other scenario these tests use, is the analytics' conftest's)."""
    return judge_scenario(people, team_a, mock_judge)


FLIPS = {"max_flip_rate": 0.1}


def test_the_teams_gate_holds_a_scenario_without_its_own_and_its_own_overrides_it(
    api, people, team_a, biased
):
    scenario, judge = biased
    manager, viewer = api(people["manager"]), api(people["viewer"])
    team_url = f"/api/teams/{team_a.slug}/trust-gate"
    scenario_url = f"/api/scenarios/{scenario.pk}/trust-gate"
    analytics = f"/api/scenarios/{scenario.pk}/analytics?raters=all&resamples=0"
    assert viewer.get(team_url).json() == {"gate": None, "source": None, "team": team_a.slug}
    assert viewer.get(scenario_url).json() == {"gate": None, "source": None}
    assert viewer.get(analytics).json()["raters"]["judgments_in_rankings"] == 60
    _, card = card_of(api, people["viewer"], judge)
    assert card["trust"]["state"] == "ungated"

    # The team's gate: the scenario (no gate of its own) is held to it at once.
    made = manager.put(team_url, FLIPS, format="json")
    assert made.status_code == 200, made.json()
    assert made.json()["source"] == "team" and made.json()["gate"]["max_flip_rate"] == 0.1
    event = AuditEvent.objects.get(action="team.trust_gate.set")
    assert event.team_id == team_a.pk and event.detail["max_flip_rate"] == 0.1
    applied = viewer.get(scenario_url).json()
    assert applied["source"] == "team" and applied["gate"]["max_flip_rate"] == 0.1
    after = viewer.get(analytics).json()
    assert after["analysis"]["fresh"] is True
    assert after["raters"]["judgments_in_rankings"] == 12  # the people's only
    assert after["trust"]["gate"]["source"] == "team"
    body, card = card_of(api, people["viewer"], judge)
    assert body["trust"]["state"] == "untrusted" and not card["trust"]["counted_in_rankings"]
    assert "flip rate 1 is above 0.1" in " ".join(card["trust"]["reasons"])
    listed = viewer.get(f"/api/scenarios/{scenario.pk}/judges").json()[0]
    assert listed["trust"]["state"] == "untrusted"
    # The team's opt-in counts every judge of its scenarios, by the team's word.
    manager.put(team_url, FLIPS | {"include_untrusted": True}, format="json")
    _, card = card_of(api, people["viewer"], judge)
    assert card["trust"]["counted_in_rankings"] and card["trust"]["opt_in"] == "team"
    assert viewer.get(analytics).json()["raters"]["judgments_in_rankings"] == 60
    manager.put(team_url, FLIPS, format="json")

    # The scenario's own gate overrides the team's entirely (here: no flip limit at all).
    own = manager.put(scenario_url, {"min_self_consistency": 0.5}, format="json")
    assert own.status_code == 200 and own.json()["source"] == "scenario"
    assert viewer.get(scenario_url).json()["gate"]["max_flip_rate"] is None
    _, card = card_of(api, people["viewer"], judge)
    assert card["trust"]["state"] == "trusted"
    assert viewer.get(analytics).json()["raters"]["judgments_in_rankings"] == 60
    # Removed: the team's applies again.
    assert manager.delete(scenario_url).status_code == 204
    assert viewer.get(scenario_url).json()["source"] == "team"
    assert card_of(api, people["viewer"], judge)[0]["trust"]["state"] == "untrusted"
    assert viewer.get(analytics).json()["raters"]["judgments_in_rankings"] == 12

    # Pages: the analytics page says whose gate applies; the team's page shows and sets it.
    browser = Client()
    browser.force_login(people["manager"])
    page = browser.get(f"/scenarios/{scenario.pk}/analytics").content.decode()
    assert 'data-gate-source="team"' in page and "Untrusted" in page
    team_page = browser.get(f"/teams/{team_a.slug}/trust-gate").content.decode()
    assert "Most flip rate: 0.1" in team_page and "csrfmiddlewaretoken" in team_page
    assert f'/teams/{team_a.slug}/trust-gate"' in browser.get("/").content.decode()
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(people["manager"])
    assert csrf.post(f"/teams/{team_a.slug}/trust-gate", {"max_flip_rate": "1"}).status_code == 403
    assert TeamTrustGate.objects.get(team=team_a).max_flip_rate == 0.1
    saved = browser.post(
        f"/teams/{team_a.slug}/trust-gate", {"action": "set", "max_flip_rate": "1"}
    )
    assert saved.status_code == 302
    assert TeamTrustGate.objects.get(team=team_a).max_flip_rate == 1.0
    assert card_of(api, people["viewer"], judge)[0]["trust"]["state"] == "trusted"
    # A bad form value: a message naming the field, nothing changed.
    browser.post(f"/teams/{team_a.slug}/trust-gate", {"action": "set", "min_kappa": "7"})
    assert TeamTrustGate.objects.get(team=team_a).min_kappa is None
    browser.post(f"/teams/{team_a.slug}/trust-gate", {"action": "delete"})
    assert not TeamTrustGate.objects.exists()
    assert AuditEvent.objects.filter(action="team.trust_gate.delete").count() == 1
    assert viewer.get(scenario_url).json() == {"gate": None, "source": None}
    assert card_of(api, people["viewer"], judge)[0]["trust"]["state"] == "ungated"


def test_the_teams_gate_is_its_managers_and_another_teams_is_missing(api, people, team_a, team_b):
    url = f"/api/teams/{team_a.slug}/trust-gate"
    assert api(people["viewer"]).get(url).status_code == 200
    assert api(people["viewer"]).put(url, FLIPS, format="json").status_code == 403
    assert api(people["viewer"]).delete(url).status_code == 403
    assert api(people["evaluator"]).get(url).status_code == 404
    # team B's admin: team A's gate is not there; nor is a team that does not exist.
    assert api(people["outsider"]).get(url).status_code == 404
    assert api(people["outsider"]).put(url, FLIPS, format="json").status_code == 404
    assert api(people["manager"]).get("/api/teams/nope/trust-gate").status_code == 404
    assert (
        api(people["manager"])
        .put(f"/api/teams/{team_b.slug}/trust-gate", FLIPS, format="json")
        .status_code
        == 404
    )
    assert not TeamTrustGate.objects.exists()
    viewer = Client()
    viewer.force_login(people["viewer"])
    page = viewer.get(f"/teams/{team_a.slug}/trust-gate")
    assert page.status_code == 200 and "Save the team" not in page.content.decode()
    assert viewer.post(f"/teams/{team_a.slug}/trust-gate", FLIPS).status_code == 403
    outsider = Client()
    outsider.force_login(people["outsider"])
    assert outsider.get(f"/teams/{team_a.slug}/trust-gate").status_code == 404
    assert not TeamTrustGate.objects.exists()


@pytest.mark.parametrize(
    "body,fields",
    [
        ({"min_kappa": 1.5}, {"min_kappa"}),
        (
            {"max_flip_rate": -0.1, "min_shared_items": 10**20},
            {"max_flip_rate", "min_shared_items"},
        ),
        ({"include_untrusted": "yes", "surprise": 1}, {"include_untrusted", "surprise"}),
        ([1, 2], {"non_field_errors"}),
    ],
)
def test_bad_team_gates_are_refused_field_by_field_and_write_nothing(
    api, people, team_a, body, fields
):
    response = api(people["manager"]).put(
        f"/api/teams/{team_a.slug}/trust-gate", body, format="json"
    )
    assert response.status_code == 400
    assert set(response.json()["errors"]) == fields
    assert not TeamTrustGate.objects.exists()
    assert not AuditEvent.objects.filter(action="team.trust_gate.set").exists()


def test_the_scheduler_plans_no_work_for_an_untrusted_judge_until_a_manager_opts_in(
    api, people, team_a, judged
):
    scenario, judge = judged
    manager = api(people["manager"])
    url = f"/api/scenarios/{scenario.pk}/plan"
    body = {"question": "ranking", "budget_usd": 0.05, "budget_hours": 0.1, "hourly_rate_usd": 0}
    key = f"judge:{judge['id']}"

    def proposal():
        made = manager.post(url, body, format="json")
        assert made.status_code == 201, made.json()
        return made.json()["proposal"]

    trusted = proposal()
    assert key in {r["rater"] for r in trusted["raters"]}
    assert trusted["judges_left_out"] == []
    # The team asks for 1000 items shared with people: the judge (9) is untrusted.
    gate = {"min_shared_items": 1000}
    assert (
        manager.put(f"/api/teams/{team_a.slug}/trust-gate", gate, format="json").status_code == 200
    )
    held = proposal()
    assert key not in {r["rater"] for r in held["raters"]}
    assert key not in {w["rater"] for w in held["work"]}
    (left,) = held["judges_left_out"]
    assert left["judge"] == judge["id"] and left["reason"] == "untrusted"
    assert "the gate asks for 1000" in " ".join(left["reasons"])
    # Asking for it by name is refused: it is not on offer.
    named = manager.post(url, body | {"raters": [key]}, format="json")
    assert named.status_code == 400 and "raters" in named.json()["errors"]
    # The page says who was left out and why.
    browser = Client()
    browser.force_login(people["manager"])
    plan = scenario.budget_plans.order_by("-pk").first()
    page = browser.get(f"/scenarios/{scenario.pk}/plan/{plan.pk}").content.decode()
    assert 'id="judges-left-out"' in page and "the gate asks for 1000" in page
    # A manager opts in for the judge: it is planned for again.
    opted = manager.post(
        f"/api/judges/{judge['id']}/trust-opt-in", {"include_untrusted": True}, format="json"
    )
    assert opted.status_code == 200
    again = proposal()
    assert key in {r["rater"] for r in again["raters"]} and again["judges_left_out"] == []
    # ... or the gate's opt-in, for every judge.
    manager.post(
        f"/api/judges/{judge['id']}/trust-opt-in", {"include_untrusted": False}, format="json"
    )
    assert proposal()["judges_left_out"]
    manager.put(
        f"/api/teams/{team_a.slug}/trust-gate", gate | {"include_untrusted": True}, format="json"
    )
    assert key in {r["rater"] for r in proposal()["raters"]}
    # The scenario's own gate overrides the team's: without one on shared items, trusted.
    manager.put(f"/api/teams/{team_a.slug}/trust-gate", gate, format="json")
    manager.put(f"/api/scenarios/{scenario.pk}/trust-gate", {"min_kappa": -1}, format="json")
    assert TrustGate.objects.filter(scenario=scenario).exists()
    assert proposal()["judges_left_out"] == []
