"""The budget scheduler decides trust from the judges' cards whatever analysis options were
stored (issue 36, point 5: until a worker stored the analysis of the default options, it
planned for a judge the gate excludes), and under a gate leaves a judge without any card
out until a manager opts it in."""

from __future__ import annotations

import pytest

from evaluations.analytics import results
from evaluations.planner import selectors
from tests.helpers.evaluations import PAIR, create_judge, mock_judge_model

pytestmark = pytest.mark.django_db(transaction=True)


def test_trust_comes_from_any_stored_card_and_a_judge_without_one_waits(
    api, people, team_a, biased, monkeypatch
):
    scenario, first = biased  # a judge that always picks the first shown, in both orders
    manager, viewer = api(people["manager"]), api(people["viewer"])
    gate = manager.put(
        f"/api/scenarios/{scenario.pk}/trust-gate", {"max_flip_rate": 0.1}, format="json"
    )
    assert gate.status_code == 200, gate.json()
    # Cards stored under options that are not the default ones (a reader's choice).
    read = viewer.get(f"/api/scenarios/{scenario.pk}/analytics?resamples=50")
    assert read.status_code == 200 and read.json()["analysis"]["status"] == "done"
    # The default analysis is no longer computed in a request: a worker's, not yet run.
    monkeypatch.setattr(results, "INLINE_WORK", 0)
    monkeypatch.setattr(results, "INLINE_JUDGMENTS", 0)
    fresh = create_judge(
        api, people["manager"], scenario, name="Fresh", model=mock_judge_model(team_a).pk
    )

    left = {row["judge"]: row for row in selectors.judges_left_out(scenario)}
    assert left[first["id"]]["reason"] == "untrusted"
    assert any("flip rate" in r for r in left[first["id"]]["reasons"])
    assert left[fresh["id"]]["reason"] == "no_card"
    plan = manager.post(
        f"/api/scenarios/{scenario.pk}/plan",
        {**PAIR, "budget_usd": 1, "budget_hours": 0, "hourly_rate_usd": 0},
        format="json",
    )
    assert plan.status_code == 201, plan.json()
    proposal = plan.json()["proposal"]
    assert {r["judge"] for r in proposal["judges_left_out"]} == {first["id"], fresh["id"]}
    used = {r.get("judge") for r in proposal.get("raters", [])}
    assert not used & {first["id"], fresh["id"]}

    opted = manager.post(
        f"/api/judges/{fresh['id']}/trust-opt-in",
        {"include_untrusted": True, "reason": "calibrating it"},
        format="json",
    )
    assert opted.status_code == 200, opted.json()
    left = {row["judge"] for row in selectors.judges_left_out(scenario)}
    assert left == {first["id"]}
