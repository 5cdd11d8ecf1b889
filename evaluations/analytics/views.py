"""The analytics page of a scenario: the same JSON as the API, as tables and plots (plotly.js
served from the project), with the rater filter and the CSV downloads."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_EXPORT, EVALUATIONS_VIEW_ALL, SCENARIOS_MANAGE
from evalplatform.errors import ApplicationError, FieldErrors, Forbidden, NotFound, in_words
from evalplatform.web.fields import number_or_text
from evaluations.analytics import cards, results, tables, trust
from evaluations.analytics.api import options_from, scenario_for, team_for, with_cards_now
from evaluations.analytics.models import TeamTrustGate, TrustGate


def _versus_rows(versus: dict[str, Any]) -> list[dict[str, Any]]:
    """People against each judge as table rows (ratings: one row per dimension)."""
    rows = []
    for judge, figures in versus.items():
        nested = figures if all(isinstance(v, dict) for v in figures.values()) else {"": figures}
        for dimension, f in nested.items():
            rows.append(
                {
                    "judge": judge.removeprefix("judge:"),
                    "dimension": dimension or "verdicts",
                    "units": f.get("units"),
                    "agreement": f.get("agreement_with_human_majority"),
                    "kappa": f.get("cohen_kappa", f.get("cohen_kappa_weighted")),
                    "alpha": f.get(
                        "krippendorff_alpha_nominal", f.get("krippendorff_alpha_interval")
                    ),
                    "spearman": f.get("spearman"),
                    "kendall": f.get("kendall_tau"),
                }
            )
    return rows


AGREEMENT_FIGURES = (
    ("krippendorff_alpha_nominal", "Krippendorff's alpha (nominal)"),
    ("krippendorff_alpha_interval", "Krippendorff's alpha (interval)"),
    ("krippendorff_alpha_ordinal", "Krippendorff's alpha (ordinal)"),
    ("icc2_1", "ICC(2,1): absolute agreement, one rater"),
    ("icc3_1", "ICC(3,1): consistency, one rater"),
    ("fleiss_kappa", "Fleiss' kappa"),
    ("cohen_kappa", "Cohen's kappa"),
    ("cohen_kappa_linear", "Cohen's kappa, linear weights"),
    ("cohen_kappa_quadratic", "Cohen's kappa, quadratic weights"),
    ("conger_kappa", "Conger's kappa"),
    ("light_kappa", "Light's kappa (mean of the pairs' Cohen's kappa)"),
    ("gwet_ac1", "Gwet's AC1"),
    ("gwet_ac2", "Gwet's AC2, quadratic weights"),
)


def _agreement_figures(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """The agreement figures a set of units has, named, each with its interval."""
    return [
        {"key": key, "name": name, "value": figures[key], "ci": figures.get(f"{key}_ci")}
        for key, name in AGREEMENT_FIGURES
        if figures.get(key) is not None
    ]


def _agreement_view(agreement: dict[str, Any]) -> dict[str, Any]:
    """The agreement part of the page: the people's figures, by dimension and by label."""
    return {
        "figures": _agreement_figures(agreement),
        "by_dimension": [
            {"dimension": name, "units": f["units"], "figures": _agreement_figures(f)}
            for name, f in (agreement.get("by_dimension") or {}).items()
        ],
        "by_label": [
            entry | {"figures": _agreement_figures(entry)}
            for entry in agreement.get("by_label") or []
        ],
    }


EFFECT_NAMES = {
    "position": "Shown first",
    "length": "Length (per doubling)",
    "markdown": "Markdown (per element per 100 characters)",
    "self_preference": "Own family's outputs",
}


def _joint_view(joint: dict[str, Any] | None) -> dict[str, Any] | None:
    """The joint model's ranking with and without the controls side by side (matched by
    name), and its effects with their names in words."""
    if not joint:
        return None
    without = {row["variant"]: row for row in joint["strengths_without_controls"]}
    return {
        "ranking": [
            {"with": row, "without": without.get(row["variant"], {})} for row in joint["strengths"]
        ],
        "effects": [
            effect | {"name": EFFECT_NAMES.get(effect["effect"], effect["effect"])}
            for effect in joint["effects"]
        ],
    }


PER_PAGE = 50
# The per-output fields the search box looks in.
SEARCHED = ("item", "model", "prompt", "variant_id", "variant")


def per_output(request: HttpRequest, rows: list[dict[str, Any]] | None, name: str) -> Page | None:
    """One page of a per-output table, narrowed by the search box (``q``: every word must be
    in the output's item id, model, prompt or id), its page number the ``<name>_page``
    parameter."""
    if not rows:
        return None
    words = (request.GET.get("q") or "").lower().split()
    if words:
        rows = [
            row
            for row in rows
            if all(
                any(word in str(row.get(field) or "").lower() for field in SEARCHED)
                for word in words
            )
        ]
    return Paginator(rows, PER_PAGE).get_page(request.GET.get(f"{name}_page"))


def _page_links(request: HttpRequest, name: str) -> str:
    """The query string of the page without this table's page number (links add theirs)."""
    query = request.GET.copy()
    query.pop(f"{name}_page", None)
    return query.urlencode()


@login_required
def analytics_page(request: HttpRequest, scenario_id: int) -> HttpResponse:
    try:
        scenario = scenario_for(request.user, scenario_id, EVALUATIONS_VIEW_ALL)
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc
    errors: dict[str, list[str]] = {}
    try:
        options = options_from(request.GET, scenario)
    except FieldErrors as exc:
        errors, options = exc.errors, {}
    state = results.current(scenario, options)
    result = state.analysis.result
    query = request.GET.urlencode()
    gate = cards.gate_for(scenario)
    if result is None:
        return render(
            request,
            "evaluations/analytics_pending.html",
            {"scenario": scenario, "state": state, "errors": errors},
            status=202 if state.analysis.status != "failed" else 503,
        )
    judge_cards = with_cards_now(scenario, result)["judge_cards"]
    return render(
        request,
        "evaluations/analytics.html",
        {
            "scenario": scenario,
            "result": result,
            "summary": summary_of(result, judge_cards),
            "state": state,
            "errors": errors,
            "options": options,
            "judges": scenario.judges.select_related(
                "prompt_version__template", "llm_model", "created_by"
            ).order_by("pk"),
            "judge_cards": judge_cards,
            "trust": result.get("trust"),
            "gate": gate,
            "gate_source": cards.source_of(gate),
            "can_manage": policy.may(request.user, SCENARIOS_MANAGE, scenario),
            "tables": [t for t in tables.TABLES if tables.rows(result, t)],
            "query": f"?{query}" if query else "",
            "can_export": policy.may(request.user, EVALUATIONS_EXPORT, scenario),
            "versus": _versus_rows(result["agreement"]["human_vs_judge"]),
            "search": request.GET.get("q", ""),
            "outputs": per_output(request, result.get("bradley_terry"), "outputs"),
            "outputs_query": _page_links(request, "outputs"),
            "elo": per_output(request, result.get("elo"), "elo"),
            "elo_query": _page_links(request, "elo"),
            "mean_rank": per_output(
                request, (result.get("rankings") or {}).get("mean_rank"), "ranks"
            ),
            "ranks_query": _page_links(request, "ranks"),
            "groups": [
                (title, column, result[key])
                for key, title, column in (
                    ("by_model", "Models", "Model"),
                    ("by_prompt", "Prompts", "Prompt"),
                    ("by_configuration", "Configurations", "Model · prompt · temperature"),
                )
                if result.get(key)
            ],
            "agreement": _agreement_view(result["agreement"]),
            "joint": _joint_view(result.get("joint_model")),
        },
    )


def summary_of(result: dict[str, Any], judge_cards: list[dict[str, Any]]) -> dict[str, Any]:
    """What the analytics page opens on: the leading models (by their Bradley-Terry
    strength, with intervals) and whether the leader is clear of the next, each judge
    configuration's trust and agreement with people, and what to be wary of."""
    ranked: list[dict[str, Any]] = []
    noun = "model"
    for key, name in (("by_model", "model"), ("by_prompt", "prompt"), ("by_configuration", "")):
        rows = (result.get(key) or {}).get("bradley_terry") or []
        if rows:
            ranked, noun = rows, name
            break
    leader = None
    if len(ranked) >= 2:
        first, second = ranked[0], ranked[1]
        clear = (
            first.get("ci_low") is not None
            and second.get("ci_high") is not None
            and first["ci_low"] > second["ci_high"]
        )
        leader = {"name": first["variant"], "next": second["variant"], "clear": clear}
    judges = [
        {
            "name": c["name"],
            "temperature": c["temperature"],
            "trust": c["trust"]["state"],
            "kappa": (c.get("human_agreement") or {}).get("kappa"),
            "kappa_ci": (c.get("human_agreement") or {}).get("kappa_ci"),
        }
        for c in judge_cards
    ]
    warnings = [
        f"{j['name']} at temperature "
        f"{'(none sent)' if j['temperature'] is None else j['temperature']} is untrusted"
        for j in judges
        if j["trust"] == "untrusted"
    ]
    excluded = (result.get("trust") or {}).get("judgments_excluded")
    if excluded:
        warnings.append(f"{excluded} judgments of untrusted judges are left out of the rankings")
    return {
        "top": ranked[:5],
        "noun": noun,
        "leader": leader,
        "judges": judges,
        "warnings": warnings,
    }


@login_required
@require_POST
def adaptive_tasks(request: HttpRequest, scenario_id: int) -> HttpResponse:
    """The scenario page's "Add the most informative pairs" form."""
    from evaluations.analytics.adaptive import add_adaptive_tasks

    try:
        scenario = scenario_for(request.user, scenario_id, SCENARIOS_MANAGE)
        count = number_or_text(request.POST.get("count"))
        added = add_adaptive_tasks(user=request.user, scenario=scenario, count=count)
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc
    except FieldErrors as exc:
        messages.error(request, " ".join(m for ms in exc.errors.values() for m in ms))
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"{len(added)} comparison task{'s' if len(added) != 1 else ''} added: the pairs "
            "the judgments so far say are worth the most.",
        )
    return redirect("manager:scenario-page", scenario_id=scenario_id)


GATE_FORM_FIELDS = (
    "min_kappa",
    "min_shared_items",
    "max_flip_rate",
    "max_parse_failure_rate",
    "min_self_consistency",
    "min_adjudicated_accuracy",
)
# The gate forms' labels of its fields (their errors are named by them).
GATE_LABELS = {
    "min_kappa": "Least κ with people",
    "min_shared_items": "Shared items",
    "max_flip_rate": "Most flip rate",
    "max_parse_failure_rate": "Most parse-failure rate",
    "min_self_consistency": "Least self-consistency",
    "min_adjudicated_accuracy": "Least adjudicated accuracy",
    "include_untrusted": "Count untrusted judges anyway",
}


@login_required
@require_POST
def trust_gate(request: HttpRequest, scenario_id: int) -> HttpResponse:
    """The analytics page's trust gate form: save the whole gate, or remove it."""
    try:
        scenario = scenario_for(request.user, scenario_id, SCENARIOS_MANAGE)
        if request.POST.get("action") == "delete":
            trust.trust_gate_delete(user=request.user, scenario=scenario)
            messages.success(request, "Trust gate removed: every judge counts again.")
        else:
            trust.trust_gate_set(
                user=request.user, scenario=scenario, data=_gate_form_data(request)
            )
            messages.success(request, "Trust gate saved: the analytics are computed again.")
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc
    except FieldErrors as exc:
        messages.error(
            request,
            "The gate was not saved. " + in_words(exc.errors, GATE_LABELS),
        )
    return redirect(f"/scenarios/{scenario_id}/analytics#judge-cards")


def _gate_form_data(request: HttpRequest) -> dict[str, Any]:
    data: dict[str, Any] = {
        name: number_or_text(request.POST.get(name)) for name in GATE_FORM_FIELDS
    }
    data["include_untrusted"] = request.POST.get("include_untrusted") == "1"
    return data


@login_required
def team_trust_gate(request: HttpRequest, team: str) -> HttpResponse:
    """The team's trust gate page (``/teams/<slug>/trust-gate``): its default gate, held by
    every scenario of the team without its own, and which scenarios have their own. Those
    who may see the team's analytics read it; managers (``feature:scenarios:manage``) save
    or remove it, through the same service as the API. Another team's page is a 404."""
    try:
        found = team_for(request.user, team, EVALUATIONS_VIEW_ALL)
    except NotFound as exc:
        raise Http404 from exc
    may_manage = policy.has_feature(request.user, SCENARIOS_MANAGE, found)
    if request.method == "POST":
        if not may_manage:
            raise PermissionDenied
        try:
            if request.POST.get("action") == "delete":
                trust.team_gate_delete(user=request.user, team=found)
                messages.success(request, "The team's gate removed.")
            else:
                trust.team_gate_set(user=request.user, team=found, data=_gate_form_data(request))
                messages.success(
                    request, "The team's gate saved: the analytics of its scenarios are "
                    "computed again.",
                )  # fmt: skip
        except FieldErrors as exc:
            messages.error(
                request,
                "The gate was not saved. " + in_words(exc.errors, GATE_LABELS),
            )
        return redirect("analytics:team-trust-gate", team=found.slug)
    own = (
        TrustGate.objects.filter(scenario__team=found)
        .select_related("scenario")
        .order_by("scenario__name")[:200]
    )
    return render(
        request,
        "evaluations/team_trust_gate.html",
        {
            "team": found,
            "gate": TeamTrustGate.objects.filter(team=found).select_related("updated_by").first(),
            "own": list(own),
            "may_manage": may_manage,
        },
    )
