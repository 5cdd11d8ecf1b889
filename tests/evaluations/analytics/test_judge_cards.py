"""Judge cards and trust gates (issue 21, points 2 and 3), through the API and the pages:
the card's kappa and alpha against scikit-learn's ``cohen_kappa_score`` and the
``krippendorff`` package; a judge that always picks the first shown has a flip rate of 1
and, below its scenario's gate, is left out of the rankings until a manager opts in
(audited); the gate's validation and permissions; parse failures, cost and whether the
thinking asked for was honoured (reasoning tokens the provider reported); a card goes stale
when the judge's model changes; the regression report leaves an untrusted judge's batch out.
"""

from __future__ import annotations

import csv
import io

import krippendorff
import pytest
from django.test import Client
from sklearn.metrics import cohen_kappa_score

from evalplatform.accounts.models import AuditEvent
from evaluations.models import Judgment, ParseStatus, TrustGate
from generation.models import GenerationOutput
from tests.factories import ConnectionFactory, LLMModelFactory
from tests.helpers.evaluations import (
    card_of,
    create_judge,
    import_people,
    make_scenario,
    rows,
    run_judge,
)

pytestmark = pytest.mark.django_db(transaction=True)


def name(judgment_variant) -> str:
    return f"{judgment_variant.item.item_id}/{judgment_variant.variant_id}"


def test_the_cards_kappa_and_alpha_are_scikit_learns_and_krippendorffs(api, people, team_a):
    connection = ConnectionFactory(team=team_a, kind="mock", name="fair")
    model = LLMModelFactory(connection=connection, model_id="mock-fair", display_name="Fair")
    scenario = make_scenario(people, team_a, "comparison", {"ties": False}, rows(items=10))
    assert import_people(api, people["manager"], scenario) == 30
    judge = create_judge(api, people["manager"], scenario, name="Fair", model=model.pk)
    run_judge(api, people["manager"], judge)
    body, card = card_of(api, people["viewer"], judge)
    # The same figures from the judgments: each pair of variants (named, sorted) with the
    # person's and the judge's winner as the pair's first or second.
    pairs: dict[tuple[str, str], dict[str, str]] = {}
    valid = Judgment.objects.filter(scenario=scenario).exclude(parse_status=ParseStatus.FAILED)
    for j in valid:
        shown = [scenario.variants.select_related("item").get(pk=pk) for pk in j.presented]
        unit = tuple(sorted(name(v) for v in shown))
        winner = name(shown["AB".index(j.payload["winner"])])
        who = "judge" if j.judge_id else "people"
        pairs.setdefault(unit, {})[who] = "first" if winner == unit[0] else "second"
    people_side = [p["people"] for p in pairs.values() if len(p) == 2]
    judge_side = [p["judge"] for p in pairs.values() if len(p) == 2]
    # (The mock calls a pair it cannot tell apart a tie, which this scenario refuses.)
    failed = Judgment.objects.filter(judge_id=judge["id"], parse_status=ParseStatus.FAILED)
    assert len(people_side) == 30 - failed.count() >= 20 and len(set(judge_side)) == 2
    agreement = card["human_agreement"]
    assert agreement["shared_items"] == len(people_side)
    expected = cohen_kappa_score(people_side, judge_side)
    assert agreement["kappa"] == pytest.approx(expected, abs=1e-6)
    codes = {"first": 0, "second": 1}
    alpha = krippendorff.alpha(
        reliability_data=[[codes[v] for v in people_side], [codes[v] for v in judge_side]],
        level_of_measurement="nominal",
    )
    assert agreement["alpha"] == pytest.approx(alpha, abs=1e-6)
    low, high = agreement["kappa_ci"]
    assert low <= agreement["kappa"] <= high
    first = people_side.count("first") / len(people_side)
    assert agreement["base_rates"]["first"] == pytest.approx(first, abs=1e-6)
    assert agreement["base_rate"] == pytest.approx(max(first, 1 - first), abs=1e-6)
    assert agreement["humans_blind"] is True
    # No gate: the judge is ungated and counts; the card says what it was measured with.
    assert card["trust"]["state"] == "ungated" and body["trust"]["state"] == "ungated"
    assert card["measured_with"]["recorded"] is True
    assert card["measured_with"]["configurations"][0]["model"] == "mock-fair"
    assert card["measured_with"]["model_snapshots"] == [
        {"model": "mock-fair", "judgments": len(people_side)}
    ]
    assert card["stale"] is False and card["judgments"] == len(people_side)
    # The analytics JSON has the same card under judge_cards.
    analytics = api(people["viewer"]).get(f"/api/scenarios/{scenario.pk}/analytics?resamples=1000")
    assert analytics.json()["judge_cards"][0]["human_agreement"] == agreement


def test_a_judge_that_always_picks_the_first_shown_is_gated_out_until_a_manager_opts_in(
    api, people, biased
):
    scenario, judge = biased
    manager, viewer = api(people["manager"]), api(people["viewer"])
    _, card = card_of(api, people["viewer"], judge)
    assert card["flip_rate"]["pairs"] == 12 * 2 and card["flip_rate"]["flips"] == 24
    assert card["flip_rate"]["rate"] == 1.0 and card["flip_rate"]["ci_high"] == 1.0
    assert 0.8 < card["flip_rate"]["ci_low"] < 1.0  # Clopper-Pearson, 24 of 24
    assert card["self_consistency"]["rate"] == 1.0  # the same verdict on each repeat
    assert card["parse_failures"] == {"calls": 48, "failures": 0, "rate": 0.0}
    assert card["cost"]["per_judgment_usd"] > 0
    url = f"/api/scenarios/{scenario.pk}/analytics?raters=all&resamples=0"
    before = viewer.get(url).json()
    assert before["raters"]["judgments_in_rankings"] == 12 + 48
    assert "judge:First" in before["joint_model"]["by_rater"]

    gate = {"min_kappa": 0.2, "min_shared_items": 10, "max_flip_rate": 0.1}
    response = manager.put(f"/api/scenarios/{scenario.pk}/trust-gate", gate, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["gate"]["max_flip_rate"] == 0.1
    assert AuditEvent.objects.filter(action="scenario.trust_gate.set").count() == 1
    after = viewer.get(url).json()
    (card,) = after["judge_cards"]
    assert card["trust"]["state"] == "untrusted" and not card["trust"]["counted_in_rankings"]
    reasons = " ".join(card["trust"]["reasons"])
    # Its verdicts in both orders contradict each other on every item: counted per verdict,
    # half agree with the people whatever they say (kappa 0), none is dropped.
    assert "flip rate 1 is above 0.1" in reasons and "Kappa with people 0 is below" in reasons
    # Out of every ranking: the comparisons, Bradley-Terry, Elo, the joint model.
    assert after["raters"]["judgments_in_rankings"] == 12
    assert after["trust"]["excluded"] == [
        {"judge": judge["id"], "name": "First", "temperature": 0.0}
    ]
    assert "judge:First" not in after["joint_model"]["by_rater"]
    assert sum(r["judgments"] for r in after["by_model"]["bradley_terry"]) == 2 * 12
    # ... never out of the judge's own figures.
    assert after["judges"][0]["judgments"] == 48 and after["judges"][0]["trust"]["state"] == (
        "untrusted"
    )
    # Marked on every page and in the judge API.
    listed = viewer.get(f"/api/scenarios/{scenario.pk}/judges").json()[0]
    assert listed["trust"]["state"] == "untrusted" and listed["trust"]["reasons"]
    assert viewer.get(f"/api/judges/{judge['id']}").json()["trust"]["state"] == "untrusted"
    browser = Client()
    browser.force_login(people["manager"])
    for page in (
        f"/scenarios/{scenario.pk}",
        f"/scenarios/{scenario.pk}/analytics",
        f"/judges/{judge['id']}",
    ):
        html = browser.get(page).content.decode()
        assert "Untrusted" in html, page
    assert (
        "Position-swap flip rate 1 is above 0.1."
        in browser.get(f"/judges/{judge['id']}").content.decode()
    )

    # A manager opts in for this judge: it counts again, audited with the reason.
    opted = manager.post(
        f"/api/judges/{judge['id']}/trust-opt-in",
        {"include_untrusted": True, "reason": "we checked its verdicts by hand"},
        format="json",
    )
    assert opted.status_code == 200 and opted.json()["include_untrusted"] is True
    event = AuditEvent.objects.get(action="evaluations.judge.opt_in")
    assert event.detail == {"reason": "we checked its verdicts by hand"}
    counted = viewer.get(url).json()
    assert counted["raters"]["judgments_in_rankings"] == 60
    assert counted["judge_cards"][0]["trust"] | {"reasons": []} == {
        "state": "untrusted",
        "reasons": [],
        "unchecked": [],
        "counted_in_rankings": True,
        "opt_in": "judge",
    }
    # A viewer may not opt in; another team's manager finds no judge.
    denied = viewer.post(
        f"/api/judges/{judge['id']}/trust-opt-in", {"include_untrusted": False}, format="json"
    )
    assert denied.status_code == 403
    hidden = api(people["outsider"]).post(
        f"/api/judges/{judge['id']}/trust-opt-in", {"include_untrusted": False}, format="json"
    )
    assert hidden.status_code == 404
    assert api(people["outsider"]).get(f"/api/judges/{judge['id']}/card").status_code == 404
    # Opted out through the page's form (CSRF-checked), then the whole scenario opted in.
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(people["manager"])
    assert csrf.post(f"/judges/{judge['id']}/trust-opt-in", {}).status_code == 403
    browser.post(f"/judges/{judge['id']}/trust-opt-in", {"include_untrusted": "0"})
    assert viewer.get(url).json()["raters"]["judgments_in_rankings"] == 12
    manager.put(
        f"/api/scenarios/{scenario.pk}/trust-gate",
        gate | {"include_untrusted": True},
        format="json",
    )
    both = viewer.get(url).json()
    assert both["raters"]["judgments_in_rankings"] == 60
    assert both["judge_cards"][0]["trust"]["opt_in"] == "scenario"
    # No gate at all: ungated, counted.
    assert manager.delete(f"/api/scenarios/{scenario.pk}/trust-gate").status_code == 204
    assert viewer.get(f"/api/scenarios/{scenario.pk}/trust-gate").json() == {
        "gate": None,
        "source": None,
    }
    assert viewer.get(url).json()["judge_cards"][0]["trust"]["state"] == "ungated"


@pytest.mark.parametrize(
    "body,fields",
    [
        ({"min_kappa": 1.5}, {"min_kappa"}),
        ({"min_kappa": "high", "max_flip_rate": -0.1}, {"min_kappa", "max_flip_rate"}),
        ({"min_shared_items": 10**20}, {"min_shared_items"}),
        (
            {"min_shared_items": 2.5, "include_untrusted": "yes"},
            {"min_shared_items", "include_untrusted"},
        ),
        ({"max_parse_failure_rate": 2, "surprise": 1}, {"max_parse_failure_rate", "surprise"}),
        ([1, 2], {"non_field_errors"}),
    ],
)
def test_bad_gates_are_refused_field_by_field_and_write_nothing(api, people, team_a, body, fields):
    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    response = api(people["manager"]).put(
        f"/api/scenarios/{scenario.pk}/trust-gate", body, format="json"
    )
    assert response.status_code == 400
    assert set(response.json()["errors"]) == fields
    assert (
        not TrustGate.objects.exists()
        and not AuditEvent.objects.filter(action="scenario.trust_gate.set").exists()
    )


def test_the_gate_is_a_managers_and_another_teams_scenario_is_missing(api, people, team_a):
    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    url = f"/api/scenarios/{scenario.pk}/trust-gate"
    assert api(people["viewer"]).get(url).json() == {"gate": None, "source": None}
    assert api(people["viewer"]).put(url, {"min_kappa": 0.6}, format="json").status_code == 403
    assert api(people["outsider"]).get(url).status_code == 404
    assert api(people["outsider"]).put(url, {"min_kappa": 0.6}, format="json").status_code == 404
    assert not TrustGate.objects.exists()
    browser = Client()
    browser.force_login(people["manager"])
    answer = browser.post(
        f"/scenarios/{scenario.pk}/trust-gate",
        {"action": "set", "min_kappa": "0", "min_shared_items": "100", "max_flip_rate": "0.1"},
    )
    assert answer.status_code == 302
    gate = TrustGate.objects.get(scenario=scenario)
    assert (gate.min_kappa, gate.min_shared_items, gate.max_flip_rate) == (0.0, 100, 0.1)
    assert gate.max_parse_failure_rate is None and gate.updated_by == people["manager"]
    # A bad form value: a message naming the field, nothing changed.
    browser.post(f"/scenarios/{scenario.pk}/trust-gate", {"action": "set", "min_kappa": "2"})
    assert TrustGate.objects.get(scenario=scenario).min_kappa == 0.0


def test_parse_failures_and_reasoning_honoured_or_not(api, people, team_a):
    """A judge asked to think whose provider reports reasoning tokens on every reply
    honoured it; one whose provider reports them on some replies did not; replies that are
    no verdict count as parse failures."""
    honest = ConnectionFactory(team=team_a, kind="mock", name="honest")
    lazy = ConnectionFactory(team=team_a, kind="mock", name="lazy", options={"thinking_rate": 0.5})
    thinker = LLMModelFactory(connection=honest, model_id="mock-think", display_name="T")
    skipper = LLMModelFactory(connection=lazy, model_id="mock-skip", display_name="S")
    scenario = make_scenario(people, team_a, "comparison", {"ties": False}, rows(items=6))
    effort = {"reasoning_effort": "high"}
    a = create_judge(api, people["manager"], scenario, name="A", model=thinker.pk, params=effort)
    b = create_judge(api, people["manager"], scenario, name="B", model=skipper.pk, params=effort)
    c = create_judge(api, people["manager"], scenario, name="C", model=thinker.pk)
    for judge in (a, b, c):
        run_judge(api, people["manager"], judge)
    outputs = GenerationOutput.objects.filter(judgment__judge_id=a["id"])
    assert outputs.count() == 18 and all(o.reasoning_tokens > 0 for o in outputs)
    assert {o.model_version for o in outputs} == {"mock-think"}
    _, card = card_of(api, people["viewer"], a)
    assert card["reasoning"]["honoured"] is True and card["reasoning"]["honoured_share"] == 1.0
    assert card["reasoning"]["requested"] == effort
    _, card = card_of(api, people["viewer"], b)
    assert card["reasoning"]["honoured"] is False
    assert 0 < card["reasoning"]["replies_with_reasoning"] < 18
    _, card = card_of(api, people["viewer"], c)
    assert card["reasoning"]["thinking_requested"] is False
    assert card["reasoning"]["honoured"] is None and card["reasoning"]["reasoning_tokens"] == 0
    # Unparseable replies (a reply format the mock's JSON never matches).
    bad = create_judge(
        api,
        people["manager"],
        scenario,
        name="Tags",
        model=thinker.pk,
        reply_format={"kind": "tags", "fields": {"winner": "BETTER"}},
    )
    run_judge(api, people["manager"], bad)
    assert (
        Judgment.objects.filter(judge_id=bad["id"], parse_status=ParseStatus.FAILED).count() == 18
    )
    _, card = card_of(api, people["viewer"], bad)
    assert card["parse_failures"] == {"calls": 18, "failures": 18, "rate": 1.0}
    assert card["judgments"] == 0 and card["cost"]["per_judgment_usd"] is None
    gate = {"max_parse_failure_rate": 0.05}
    api(people["manager"]).put(f"/api/scenarios/{scenario.pk}/trust-gate", gate, format="json")
    _, card = card_of(api, people["viewer"], bad)
    assert card["trust"]["state"] == "untrusted"
    assert card["trust"]["reasons"] == ["Parse-failure rate 1 is above 0.05."]
    # The judges table CSV names each judge's trust too (the page and API show it).
    table = api(people["manager"]).get(f"/api/scenarios/{scenario.pk}/analytics/judges.csv")
    assert table.status_code == 200
    rows_ = list(csv.DictReader(io.StringIO(b"".join(table.streaming_content).decode())))
    assert {r["name"] for r in rows_} == {"A", "B", "C", "Tags"}


def test_a_card_goes_stale_when_the_judges_model_changes(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    run_judge(api, people["manager"], judge)
    _, card = card_of(api, people["viewer"], judge)
    assert card["stale"] is False
    measured = card["measured_with"]["fingerprints"]
    assert measured == [card["current_fingerprint"]]
    # The team points the model at a new snapshot: the card was measured with the old one.
    mock_judge.model_id = "mock-judge-2026-01-01"
    mock_judge.save()
    _, card = card_of(api, people["viewer"], judge)
    assert card["stale"] is True and card["measured_with"]["fingerprints"] == measured
    assert card["measured_with"]["configurations"][0]["model"] == "mock-judge"
    api(people["manager"]).put(
        f"/api/scenarios/{scenario.pk}/trust-gate", {"min_shared_items": 0}, format="json"
    )
    _, card = card_of(api, people["viewer"], judge)
    assert card["trust"]["state"] == "untrusted"
    assert card["trust"]["reasons"] == [
        "Measured with another configuration than the judge's now (stale)."
    ]


def test_self_preference_compares_the_judges_family_wins_with_the_peoples(api, people, team_a):
    """A judge of the "anthropic" family (by its model's name) that always picks the first
    shown: it gives Claude's outputs exactly the comparisons where they were shown first;
    the people (who prefer "good", Claude's) gave it all of them."""
    connection = ConnectionFactory(
        team=team_a, kind="mock", name="first", options={"position_bias": 1.0}
    )
    model = LLMModelFactory(connection=connection, model_id="claude-judge", display_name="C")
    makers = {"good": "claude-3-haiku", "ok": "gpt-4o-mini", "bad": "llama-3-8b"}
    data = [dict(r, model=makers[r["variant_id"]]) for r in rows(items=5)]
    scenario = make_scenario(people, team_a, "comparison", {"ties": False}, data)
    import_people(api, people["manager"], scenario, deviate_every=10**6)
    judge = create_judge(api, people["manager"], scenario, name="Claude", model=model.pk)
    run_judge(api, people["manager"], judge)
    own, first = 0, 0
    for j in Judgment.objects.filter(judge_id=judge["id"]):
        shown = [scenario.variants.get(pk=pk).variant_id for pk in j.presented]
        if "good" in shown:
            own += 1
            first += shown[0] == "good"
    _, card = card_of(api, people["viewer"], judge)
    preference = card["self_preference"]
    assert preference["family"] == "anthropic" and preference["comparisons"] == own == 10
    assert preference["own_family_win_share"] == pytest.approx(first / own)
    assert preference["people_own_family_win_share"] == 1.0
    assert preference["difference"] == pytest.approx(first / own - 1.0)
