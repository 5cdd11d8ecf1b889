"""Trust gates and the managers' opt-ins (writes), and the judge cards as of now (reads).

A scenario's ``TrustGate`` holds its judges to thresholds (docs/analytics.md, "Trust
gates"), or, when it has none, its team's default ``TeamTrustGate``; ``trust_gate_set`` and
``team_gate_set`` validate a whole gate before writing it, and every change of a gate or an
opt-in is audited as the other managers' actions are. ``scenario_cards`` reads the
cards of the scenario's stored analysis (computed when it is small, the last one otherwise)
and brings their staleness and trust up to date (``cards.refresh``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from evalplatform import validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import SCENARIOS_MANAGE
from evalplatform.errors import FieldErrors, Forbidden
from evaluations.analytics import cards, results
from evaluations.analytics.analyze import default_raters
from evaluations.analytics.models import TeamTrustGate, TrustGate
from evaluations.judgments.models import LLMJudge
from scenarios.models import Scenario

FRACTIONS = {
    "max_flip_rate": "A share from 0 to 1 (0.1 = 10%), or null: not checked.",
    "max_parse_failure_rate": "A share from 0 to 1, or null: not checked.",
    "min_self_consistency": "A share from 0 to 1, or null: not checked.",
    "min_adjudicated_accuracy": "A share from 0 to 1, or null: not checked.",
}


def _manage(user: Any, scenario: Scenario) -> None:
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()


def gate_values(data: Any) -> dict[str, Any]:
    """A gate's fields from a request body, every one checked (field errors otherwise).
    Fields left out are null (not checked), ``min_shared_items`` 0 and
    ``include_untrusted`` false: a PUT sets the whole gate."""
    if not isinstance(data, Mapping):
        raise FieldErrors({"non_field_errors": "Send a JSON object."})
    errors: dict[str, str] = {}
    unknown = sorted(set(data) - {*cards.GATE_FIELDS, "include_untrusted"})
    for name in unknown:
        errors[str(name)[:100]] = "Unknown field."
    values: dict[str, Any] = {
        "min_kappa": validation.number(
            data.get("min_kappa"),
            name="min_kappa",
            lo=-1.0,
            hi=1.0,
            errors=errors,
            message="A kappa from -1 to 1, or null: not checked.",
        ),
        "min_shared_items": validation.whole_number(
            data.get("min_shared_items"),
            name="min_shared_items",
            lo=0,
            hi=validation.SHARED_ITEMS_MAX,
            errors=errors,
            default=0,
            message=f"A whole number of items from 0 to {validation.SHARED_ITEMS_MAX:,}.",
        ),
    }
    for name, message in FRACTIONS.items():
        values[name] = validation.number(
            data.get(name), name=name, lo=0.0, hi=1.0, errors=errors, message=message
        )
    values["include_untrusted"] = validation.flag(
        data.get("include_untrusted"), name="include_untrusted", errors=errors, default=False
    )
    if errors:
        raise FieldErrors(errors)
    return values


def trust_gate_set(*, user: Any, scenario: Scenario, data: Any) -> TrustGate:
    """Set the scenario's whole gate (made if it has none); audited with its values."""
    _manage(user, scenario)
    values = gate_values(data)
    with transaction.atomic():
        gate, made = TrustGate.objects.select_for_update().get_or_create(
            scenario=scenario, defaults=values | {"updated_by": user}
        )
        if not made:
            for name, value in values.items():
                setattr(gate, name, value)
            gate.updated_by = user
            gate.save()
        audit.record(
            user=user,
            team=scenario.team_id,
            action="scenario.trust_gate.set",
            target=scenario,
            **values,
        )
    return gate


def team_gate_set(*, user: Any, team: Team, data: Any) -> TeamTrustGate:
    """Set the team's whole default gate (made if it has none): the gate of every scenario
    of the team without its own. The same right as a scenario's gate, in the team
    (``feature:scenarios:manage``); audited with its values."""
    if not policy.has_feature(user, SCENARIOS_MANAGE, team):
        raise Forbidden()
    values = gate_values(data)
    with transaction.atomic():
        gate, made = TeamTrustGate.objects.select_for_update().get_or_create(
            team=team, defaults=values | {"updated_by": user}
        )
        if not made:
            for name, value in values.items():
                setattr(gate, name, value)
            gate.updated_by = user
            gate.save()
        audit.record(user=user, team=team, action="team.trust_gate.set", target=team, **values)
    return gate


def team_gate_delete(*, user: Any, team: Team) -> None:
    """Remove the team's default gate (audited when there was one)."""
    if not policy.has_feature(user, SCENARIOS_MANAGE, team):
        raise Forbidden()
    with transaction.atomic():
        deleted, _ = TeamTrustGate.objects.filter(team=team).delete()
        if deleted:
            audit.record(user=user, team=team, action="team.trust_gate.delete", target=team)


def trust_gate_delete(*, user: Any, scenario: Scenario) -> None:
    """Remove the gate: every judge is ungated again (audited when there was one)."""
    _manage(user, scenario)
    with transaction.atomic():
        deleted, _ = TrustGate.objects.filter(scenario=scenario).delete()
        if deleted:
            audit.record(
                user=user, team=scenario.team_id, action="scenario.trust_gate.delete",
                target=scenario,
            )  # fmt: skip


def judge_opt_in(*, user: Any, judge: LLMJudge, data: Any) -> LLMJudge:
    """A manager's opt-in (``include_untrusted`` true) or opt-out for one judge: whether
    its verdicts count in the rankings even when it is untrusted; audited with the
    ``reason`` given."""
    _manage(user, judge.scenario)
    if not isinstance(data, Mapping):
        raise FieldErrors({"non_field_errors": "Send a JSON object."})
    errors: dict[str, str] = {}
    if not isinstance(data.get("include_untrusted"), bool):
        errors["include_untrusted"] = "true or false."
    reason = validation.text(data.get("reason", ""), name="reason", errors=errors, max_length=500)
    if errors:
        raise FieldErrors(errors)
    include = bool(data["include_untrusted"])
    with transaction.atomic():
        changed = LLMJudge.objects.filter(pk=judge.pk).exclude(include_untrusted=include)
        if changed.update(include_untrusted=include):
            audit.record(
                user=user,
                team=judge.scenario.team_id,
                action="evaluations.judge.opt_in" if include else "evaluations.judge.opt_out",
                target=judge,
                reason=reason,
            )
    judge.include_untrusted = include
    return judge


# --- reads --------------------------------------------------------------------------------------
def scenario_cards(scenario: Scenario) -> tuple[results.State, list[dict[str, Any]] | None]:
    """The analysis state (default options) and its judge cards as of now: None while no
    result is stored yet."""
    state = results.current(scenario, {"raters": default_raters(scenario)})
    stored = state.analysis.result
    if stored is None:
        return state, None
    judges = list(
        scenario.judges.select_related("llm_model__connection", "prompt_version__template")
    )
    gate = cards.gate_for(scenario)
    return state, cards.refresh(stored.get("judge_cards") or [], judges, gate)


def judge_card(judge: LLMJudge) -> dict[str, Any]:
    """A judge's cards (one per temperature), its trust, and the analysis they are of."""
    state, found = scenario_cards(judge.scenario)
    mine = [c for c in found or [] if c["judge"] == judge.pk]
    trust = cards.judge_trust(mine) if found is not None else {"state": "pending", "reasons": []}
    return {
        "judge": judge.pk,
        "name": judge.name,
        "include_untrusted": judge.include_untrusted,
        "trust": trust,
        "cards": mine,
        "analysis": state.describe(),
    }


def latest_cards(scenario: Scenario) -> list[dict[str, Any]]:
    """The judge cards of the scenario's latest stored analysis, whatever its options, as
    of now (``cards.refresh``; nothing computed); empty when none is stored."""
    latest = (
        scenario.analyses.filter(result__isnull=False)
        .order_by("-computed_at", "-pk")
        .values_list("result__judge_cards", flat=True)
        .first()
    )
    if not latest:
        return []
    judges = list(
        scenario.judges.select_related("llm_model__connection", "prompt_version__template")
    )
    gate = cards.gate_for(scenario)
    return cards.refresh(latest if isinstance(latest, list) else [], judges, gate)


def stored_trust(scenario: Scenario) -> dict[int, dict[str, Any]]:
    """Each judge's trust by its id, from the scenario's latest stored analysis as of now
    (nothing computed: for lists and the regression report). A judge of no stored card is
    left out."""
    found = latest_cards(scenario)
    return {
        pk: cards.judge_trust(c for c in found if c["judge"] == pk)
        for pk in dict.fromkeys(c["judge"] for c in found)
    }
