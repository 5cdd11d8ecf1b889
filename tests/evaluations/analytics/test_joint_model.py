"""The joint Bradley-Terry model of people and judges (``evaluations.analytics.joint``):
the same coefficients as statsmodels' logistic regression on the same design; the prior
only where the maximum likelihood does not exist, as docs/analytics.md states it; effects
the verdicts cannot tell from the strengths left out; seeded simulations with known effects
recovered within their bootstrap intervals at about the nominal rate; and the block in the
analytics API and on the page."""

from __future__ import annotations

import time

import numpy as np
import pytest
import statsmodels.api as sm
from django.test import Client
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from evaluations.analytics import bradley_terry as bt
from evaluations.analytics import joint, joint_table, style
from evaluations.models import Judgment
from scenarios import services as scenario_services
from tests.factories import ConnectionFactory, LLMModelFactory
from tests.helpers.evaluations import create_judge, make_scenario, run

# The raters of the simulations: people, and two judges of the families "openai" and
# "anthropic", with their true effects (log-odds).
RATERS = ("humans", "judge:A", "judge:B")
TRUE = {
    ("position", "humans"): 0.15,
    ("length", "humans"): 0.3,
    ("markdown", "humans"): 0.1,
    ("position", "judge:A"): 0.6,
    ("length", "judge:A"): 0.8,
    ("markdown", "judge:A"): 0.4,
    ("self_preference", "judge:A"): 0.7,
    ("position", "judge:B"): -0.4,
    ("length", "judge:B"): 0.0,
    ("markdown", "judge:B"): 0.25,
    ("self_preference", "judge:B"): 0.5,
}
NAMES = list(TRUE)
FAMILIES = ["openai", "openai", "anthropic", "anthropic", "google", "meta"]


def simulate(seed: int, verdicts: int = 1200, ties: float = 0.08):
    """Six models (two per item compared at random), each item's outputs of varied
    length and markdown; every verdict by people or one of two judges, drawn from the true
    strengths and effects. Returns (models, a, b, x, y, strengths)."""
    rng = np.random.default_rng(seed)
    models = len(FAMILIES)
    strength = rng.normal(0, 0.8, models)
    strength -= strength.mean()
    a = rng.integers(0, models, verdicts)
    b = (a + rng.integers(1, models, verdicts)) % models
    # Each shown output's log2 length and markdown density (per 100 characters): some
    # models are wordier and use more markdown than others.
    shown = np.stack([a, b], 1)
    log_length = rng.normal(9, 0.8, (verdicts, 2)) + np.linspace(-1.5, 1.5, models)[shown]
    density = rng.gamma(2.0, 0.5, (verdicts, 2)) + np.linspace(0, 2, models)[::-1][shown]
    rater = rng.choice(3, verdicts, p=[0.4, 0.3, 0.3])
    own = {"judge:A": "openai", "judge:B": "anthropic"}
    x = np.zeros((verdicts, len(NAMES)))
    for r, name in enumerate(RATERS):
        mine = rater == r
        x[mine, NAMES.index(("position", name))] = 1.0
        x[mine, NAMES.index(("length", name))] = (log_length[:, 0] - log_length[:, 1])[mine]
        x[mine, NAMES.index(("markdown", name))] = (density[:, 0] - density[:, 1])[mine]
        if name in own:
            family = np.array(FAMILIES)
            signed = (family[a] == own[name]).astype(float) - (family[b] == own[name])
            x[mine, NAMES.index(("self_preference", name))] = signed[mine]
    eta = strength[a] - strength[b] + x @ np.array([TRUE[k] for k in NAMES])
    p = 1 / (1 + np.exp(-eta))
    # Ties (more of them between close outputs) drawn so that, ties as half a win, the
    # expected outcome is still p: the model the fit assumes.
    tie = ties * 2 * np.minimum(p, 1 - p)
    first = rng.random(verdicts) < (p - tie / 2) / (1 - tie)
    y = np.where(rng.random(verdicts) < tie, 0.5, first.astype(float))
    return models, a, b, x, y, strength


# --- the fit ------------------------------------------------------------------------------------
def test_the_fit_is_statsmodels_logistic_regression_on_the_same_design():
    models, a, b, x, y, _ = simulate(seed=3, verdicts=3000)
    found = joint.cells(a, b, x, y)
    fitted = joint.fit(models, found)
    assert fitted.converged and not fitted.prior.any() and not fitted.aliased.any()
    # The design of every verdict (first model +1, second -1, the first model pinned, then
    # the covariates): statsmodels' Logit (ties as y = ½) and GLM Binomial on the cells.
    design = joint.design(a, b, x, fitted.columns, models)
    assert design.shape == (3000, models - 1 + len(NAMES))
    logit = sm.Logit(y, design).fit(disp=0, method="newton", tol=1e-12, maxiter=100)
    assert np.abs(logit.params - fitted.coefficients).max() < 1e-4
    cells = joint.design(found.a, found.b, found.x, fitted.columns, models)
    glm = sm.GLM(found.y, cells, family=sm.families.Binomial(), freq_weights=found.count).fit(
        tol=1e-12
    )
    assert np.abs(glm.params - fitted.coefficients).max() < 1e-4
    # The effects are the covariates' coefficients; the strengths those of the models,
    # centred.
    np.testing.assert_allclose(fitted.effect, fitted.coefficients[models - 1 :])
    strengths = np.concatenate([[0.0], fitted.coefficients[: models - 1]])
    np.testing.assert_allclose(fitted.strength, strengths - strengths.mean(), atol=1e-12)
    # The same verdicts in another order: the same fit.
    order = np.random.default_rng(0).permutation(len(y))
    again = joint.fit(models, joint.cells(a[order], b[order], x[order], y[order]))
    np.testing.assert_allclose(again.coefficients, fitted.coefficients, atol=1e-10)


def documented_fit(design: np.ndarray, y: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """The penalized log-likelihood as docs/analytics.md states it, maximized by scipy:
    ties half a win each way; each parameter with ``prior`` plays that many virtual games
    against 0, half won."""

    def minus(beta):
        eta = design @ beta
        loglik = (y * -np.logaddexp(0, -eta) + (1 - y) * -np.logaddexp(0, eta)).sum()
        virtual = prior * (0.5 * -np.logaddexp(0, -beta) + 0.5 * -np.logaddexp(0, beta))
        return -(loglik + virtual.sum())

    return minimize(minus, np.zeros(design.shape[1]), method="BFGS", options={"gtol": 1e-9}).x


def test_a_separated_direction_gets_the_prior_and_the_rest_is_the_maximum_likelihood():
    models, a, b, x, y, _ = simulate(seed=5, verdicts=800, ties=0.0)
    # Judge B always chose the first shown: its position bias has no finite maximum.
    judge_b = x[:, NAMES.index(("position", "judge:B"))] == 1
    y[judge_b] = 1.0
    fitted = joint.fit(models, joint.cells(a, b, x, y))
    assert fitted.converged
    regularized = {NAMES[k] for k in np.nonzero(fitted.regularized_effects)[0]}
    assert ("position", "judge:B") in regularized
    assert all(rater == "judge:B" for _, rater in regularized)
    assert not fitted.regularized_entities.any()
    assert (
        np.isfinite(fitted.effect).all() and fitted.effect[NAMES.index(("position", "judge:B"))] > 1
    )
    design = joint.design(a, b, x, fitted.columns, models)
    np.testing.assert_allclose(
        fitted.coefficients, documented_fit(design, y, fitted.prior), atol=1e-4
    )
    # A model that never lost: its whole component is fitted without a pin, with the prior,
    # as Bradley-Terry's regularized components are.
    models, a, b, x, y, _ = simulate(seed=6, verdicts=600, ties=0.0)
    y[a == 0], y[b == 0] = 1.0, 0.0
    fitted = joint.fit(models, joint.cells(a, b, x, y))
    assert fitted.regularized_entities.all() and len(fitted.columns.entities) == models
    assert fitted.strength[0] == fitted.strength.max()
    design = joint.design(a, b, x, fitted.columns, models)
    np.testing.assert_allclose(
        fitted.coefficients, documented_fit(design, y, fitted.prior), atol=1e-4
    )


def test_effects_the_verdicts_cannot_tell_from_the_strengths_are_not_identified():
    models, a, b, x, y, _ = simulate(seed=7, verdicts=600)
    # Judge A's markdown difference made twice its length difference: a combination of
    # the columns before it. Judge B's self-preference column left at zero: absent.
    column = NAMES.index(("markdown", "judge:A"))
    x[:, column] = 2 * x[:, NAMES.index(("length", "judge:A"))]
    x[:, NAMES.index(("self_preference", "judge:B"))] = 0
    fitted = joint.fit(models, joint.cells(a, b, x, y))
    assert fitted.aliased.tolist() == [k == column for k in range(len(NAMES))]
    assert not fitted.present[NAMES.index(("self_preference", "judge:B"))]
    identified = fitted.present & ~fitted.aliased
    assert np.isfinite(fitted.effect[identified]).all()
    assert np.isnan(fitted.effect[~identified]).all()
    design = joint.design(a, b, x, fitted.columns, models)
    logit = sm.Logit(y, design).fit(disp=0, method="newton", tol=1e-12, maxiter=100)
    assert np.abs(logit.params - fitted.coefficients).max() < 1e-4
    # People alone, each output's length a function of its model: the length preference
    # is a combination of the strengths' columns.
    sizes = np.linspace(-1, 1, models)
    people = np.zeros((len(a), 2))
    people[:, 0] = 1.0
    people[:, 1] = sizes[a] - sizes[b]
    fitted = joint.fit(models, joint.cells(a, b, people, y))
    assert fitted.aliased.tolist() == [False, True] and np.isnan(fitted.effect[1])


def test_separate_components_are_each_pinned_and_centred():
    # Two groups of models never compared across: strengths within each, mean 0 each.
    rng = np.random.default_rng(2)
    a = rng.integers(0, 3, 400)
    b = (a + rng.integers(1, 3, 400)) % 3
    a, b = np.concatenate([a, a + 3]), np.concatenate([b, b + 3])
    y = (rng.random(800) < 0.5 + 0.1 * (a % 3 - b % 3)).astype(float)
    x = np.ones((800, 1))  # one position effect
    fitted = joint.fit(6, joint.cells(a, b, x, y))
    assert fitted.components == 2 and fitted.component.tolist() == [0, 0, 0, 1, 1, 1]
    assert len(fitted.columns.entities) == 4
    np.testing.assert_allclose(
        [fitted.strength[:3].sum(), fitted.strength[3:].sum()], 0, atol=1e-12
    )


# --- intervals ----------------------------------------------------------------------------------
@pytest.mark.slow  # about 3 s (40 fits, each with 100 resamples of 1,200 verdicts)
def test_seeded_simulations_recover_each_effect_within_its_interval_at_the_nominal_rate():
    covered = np.zeros(len(NAMES))
    strengths_covered, plain_covered = [], []
    runs = 40
    began = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        for seed in range(runs):
            models, a, b, x, y, truth = simulate(seed)
            found = joint.cells(a, b, x, y)
            fitted = joint.fit(models, found)
            plain = joint.fit(models, found, effects=False)
            (s_boot, e_boot), (p_boot, _) = joint.bootstrap(
                [fitted, plain], found, models, resamples=100, seed=seed
            )
            low, high = np.percentile(e_boot, [2.5, 97.5], axis=0)
            values = np.array([TRUE[k] for k in NAMES])
            covered += (low <= values) & (values <= high)
            s_low, s_high = np.percentile(s_boot, [2.5, 97.5], axis=0)
            strengths_covered.append(((s_low <= truth) & (truth <= s_high)).mean())
            # The controls matter: without them the strengths absorb the style and
            # self-preference effects (some models being wordier).
            p_low, p_high = np.percentile(p_boot, [2.5, 97.5], axis=0)
            plain_covered.append(((p_low <= truth) & (truth <= p_high)).mean())
    seconds = time.perf_counter() - began
    coverage = covered / runs
    # 440 intervals of 95%: together at least 90% (nominal 95%, standard error 1%); each
    # effect's 40 at least 80% (a broken effect would be far below; 33 of 40 is within
    # chance of 95%).
    assert coverage.mean() >= 0.9, dict(zip(NAMES, coverage, strict=True))
    assert coverage.min() >= 0.8, dict(zip(NAMES, coverage, strict=True))
    assert np.mean(strengths_covered) >= 0.9
    assert np.mean(plain_covered) < 0.8
    assert seconds < 60  # a bound, not a benchmark


def test_the_bootstrap_is_seeded_and_shared_by_the_fits_of_the_same_cells():
    models, a, b, x, y, _ = simulate(seed=11, verdicts=500)
    found = joint.cells(a, b, x, y)
    fits = [joint.fit(models, found), joint.fit(models, found, effects=False)]
    once = joint.bootstrap(fits, found, models, resamples=30, seed=4)
    again = joint.bootstrap(fits, found, models, resamples=30, seed=4)
    for (s1, e1), (s2, e2) in zip(once, again, strict=True):
        np.testing.assert_array_equal(s1, s2)
        np.testing.assert_array_equal(e1, e2)
    assert np.isnan(once[1][1]).all()  # the fit without controls has no effects
    # Each resample's refit is the fit of that resample on its own.
    rng = np.random.default_rng(4)
    counts = rng.multinomial(int(found.count.sum()), found.count / found.count.sum())
    alone = joint.Cells(found.a, found.b, found.x, found.y, counts.astype(float), found.row)
    counts = counts.astype(float)
    fitted = fits[0]
    design = joint.design(found.a, found.b, found.x, fitted.columns, models)
    ridge = np.full(fitted.columns.size, bt.RIDGE)  # as every resample's
    coef, _ = joint.newton(design, found.y, counts[None, :], ridge, np.zeros((1, len(ridge))))
    np.testing.assert_allclose(once[0][1][0, fitted.present], coef[0, models - 1 :], atol=1e-6)
    np.testing.assert_allclose(
        once[0][0][0], joint.fit(models, alone).strength, atol=1e-3
    )  # the ridge's pull
    # The Wald intervals of a fit agree with the bootstrap's spread.
    strength_error, effect_error = joint.wald(fits[0], found, models)
    boot = joint.bootstrap(fits[:1], found, models, resamples=300, seed=1)[0]
    np.testing.assert_allclose(boot[1].std(axis=0), effect_error, rtol=0.25)
    np.testing.assert_allclose(boot[0].std(axis=0), strength_error, rtol=0.25)


# --- what it controls for -----------------------------------------------------------------------
def test_markdown_density_lengths_and_model_families():
    text = "# Title\n\nSome **bold** text.\n\n- one\n- two\n1. three\n\n__also__ bold"
    assert style.markdown_elements(text) == 6
    assert style.markdown_density(text) == 6.0  # under 100 characters: counted as 100
    assert style.markdown_density("x" * 400 + "\n- a") == pytest.approx(100 / 404)
    assert style.markdown_elements("2 * 3 * 4 and #hashtag and -minus") == 0
    assert style.log_length("x" * 200) - style.log_length("y" * 100) == 1.0
    assert style.log_length("") - style.log_length("abcd") == -2.0
    assert style.family("gpt-4o-mini") == "openai"
    assert style.family("o3-mini") == style.family("openai/o1") == "openai"
    assert style.family("Claude 3.5 Sonnet") == "anthropic"
    assert style.family("models/gemini-1.5-pro") == style.family("gemma-2-9b") == "google"
    assert style.family("meta-llama/Llama-3-70b") == "meta"
    assert style.family("Qwen2.5-72B") == "alibaba"
    # The name first (an OpenAI-compatible server may serve anyone's model), else the
    # connection's kind where its provider serves only its own.
    assert style.family("llama3", kind="openai") == "meta"
    assert style.family("my-model", kind="anthropic") == "anthropic"
    assert style.family("my-model", kind="openai") is None
    assert style.family("", "gpt-4o", kind=None) == "openai"


# --- in the analytics ---------------------------------------------------------------------------
MODELS = {
    "gpt-4o": "**Answer.** {words}\n\n- first point\n- second point",
    "claude-3-5-sonnet": "# Answer\n\n{words}",
    "llama-3-70b": "{words}",
}


@pytest.fixture
def people_and_a_judge(api, people, team_a):
    """A comparison scenario of three models' outputs (of varied lengths and markdown) on
    five questions, judged by an evaluator (verdicts of every kind) and by a mock judge
    whose model is of OpenAI's family, in both orders; its name has markup."""
    rows = [
        {
            "item_id": f"q{n}",
            "variant_id": model,
            "content": template.format(words=" ".join(["detail"] * (3 + (n * (k + 2)) % 11))),
            "model": model,
            "context": {"question": f"Question {n}?"},
        }
        for n in range(5)
        for k, (model, template) in enumerate(MODELS.items())
    ]
    scenario = make_scenario(people, team_a, "comparison", {"ties": True}, data=rows)
    scenario = scenario_services.scenario_open(user=people["manager"], scenario=scenario)
    evaluator = api(people["evaluator"])
    answers = ["A", "B", "tie", "B", "A", "A"]
    count = 0
    while (
        task := evaluator.post(f"/api/evaluations/scenarios/{scenario.pk}/next")
    ).status_code == 200:
        response = evaluator.post(
            f"/api/evaluations/assignments/{task.json()['assignment']}/submit",
            {"answer": {"winner": answers[count % len(answers)]}},
            format="json",
        )
        assert response.status_code in (200, 201), response.json()
        count += 1
    connection = ConnectionFactory(team=team_a, kind="mock", name="mock")
    model = LLMModelFactory(connection=connection, model_id="gpt-4o-mini", display_name="Mini")
    judge = create_judge(
        api, people["manager"], scenario, name="J <b>x</b>", model=model.pk, swap=True
    )
    run(
        api(people["manager"])
        .post(f"/api/judges/{judge['id']}/run", {}, format="json")
        .json()["job"]
    )
    assert Judgment.objects.filter(scenario=scenario, judge__isnull=True).count() == count > 0
    return scenario, count


@pytest.mark.django_db(transaction=True)
def test_the_joint_model_of_people_and_judges_in_the_analytics_json_and_page(
    api, people, people_and_a_judge, monkeypatch
):
    scenario, human = people_and_a_judge
    url = f"/api/scenarios/{scenario.pk}/analytics?resamples=40"
    data = api(people["viewer"]).get(url).json()
    block = data["joint_model"]
    assert block["entity"] == "model"
    assert block["by_rater"] == {"humans": human, "judge:J <b>x</b>": 2 * 15}
    assert block["judgments"] == human + 30
    assert {"strengths", "effects", "strengths_without_controls", "fit"} <= set(block)
    # Strengths as bradley_terry's rows, one per model, with and without the controls.
    for key in ("strengths", "strengths_without_controls"):
        rows = block[key]
        assert {r["variant"] for r in rows} == set(MODELS)
        assert sorted(r["rank"] for r in rows) == [1, 2, 3]
        for row in rows:
            assert {"variant", "strength", "ci_low", "ci_high", "rank"} <= set(row)
            assert row["ci_low"] <= row["strength"] <= row["ci_high"]
    # Each effect with its interval, per rater; the judge's preference for its own
    # family's outputs (gpt-4o's), not the people's.
    effects = {(e["effect"], e["rater"]): e for e in block["effects"]}
    for entry in block["effects"]:
        assert {"effect", "rater", "estimate", "ci_low", "ci_high"} <= set(entry)
        assert entry["effect"] in ("position", "length", "markdown", "self_preference")
    assert {("position", "humans"), ("position", "judge:J <b>x</b>")} <= set(effects)
    assert ("self_preference", "judge:J <b>x</b>") in effects
    assert ("self_preference", "humans") not in effects
    position = effects[("position", "humans")]
    assert position["ci_low"] <= position["estimate"] <= position["ci_high"]
    # Each rater on its own scale (the people the reference): Wald intervals for the model
    # with controls, the bootstrap's for the strengths without.
    scales = {s["rater"]: s for s in block["scales"]}
    assert scales["humans"]["reference"] and scales["humans"]["scale"] == 1.0
    judge_scale = scales["judge:J <b>x</b>"]
    assert judge_scale["identified"] and judge_scale["ci_low"] < judge_scale["scale"]
    assert judge_scale["scale"] < judge_scale["ci_high"]
    assert block["fit"]["intervals"] == "wald"
    assert block["fit"]["intervals_without_controls"] == "bootstrap"
    assert block["fit"]["resamples"] == 40
    # People's and judges' together whatever the raters filter; seeded.
    everyone = api(people["viewer"]).get(f"{url}&raters=all").json()["joint_model"]
    assert everyone == block
    assert data["raters"]["filter"] == "humans"
    # Bounded: at most ANALYTICS_JOINT_MODEL_RESAMPLES resamples (200), whatever is asked.
    monkeypatch.setattr(joint_table, "RESAMPLES", 25)
    bounded = api(people["viewer"]).get(f"{url}&seed=1").json()["joint_model"]
    assert bounded["fit"]["resamples"] == 25 and bounded["fit"]["seed"] == 1
    # Past the bootstrap's bound of work, Wald intervals.
    monkeypatch.setattr(joint, "BOOTSTRAP_WORK", 0)
    wald = api(people["viewer"]).get(f"{url}&seed=2").json()["joint_model"]
    assert wald["fit"]["intervals_without_controls"] == "wald" and wald["fit"]["resamples"] == 0
    for row in wald["strengths"] + [e for e in wald["effects"] if e["identified"]]:
        value = row.get("strength", row.get("estimate"))
        assert row["ci_low"] < value < row["ci_high"]
    assert [r["strength"] for r in wald["strengths"]] == [r["strength"] for r in block["strengths"]]
    # The page: the ranking with and without the controls side by side, the effects.
    client = Client()
    client.force_login(people["viewer"])
    html = client.get(f"/scenarios/{scenario.pk}/analytics?resamples=20").content.decode()
    section = html[html.index('id="joint"') : html.index("</section>", html.index('id="joint"'))]
    assert "People and judges in one model" in section
    assert "Rank without controls" in section and "Strength without controls" in section
    scales_table = section[section.index('id="joint-scales"') :]
    assert "the reference" in scales_table and "judge:J &lt;b&gt;x&lt;/b&gt;" in scales_table
    for model in MODELS:
        assert model in section
    for effect in ("position", "length", "markdown", "self_preference"):
        assert f'data-effect="{effect}"' in section
    # The judge's name escaped, everywhere on the page.
    assert "judge:J &lt;b&gt;x&lt;/b&gt;" in section
    assert "<b>x</b>" not in html


@pytest.mark.django_db(transaction=True)
def test_other_scenario_types_have_no_joint_model(api, people, team_a):
    scenario = make_scenario(people, team_a, "rating", {"dimensions": [{"name": "x"}]})
    data = api(people["viewer"]).get(f"/api/scenarios/{scenario.pk}/analytics").json()
    assert data["joint_model"] is None


# --- a scale per rater ----------------------------------------------------------------------------
def _decisive_world(seed: int, decisive: float, own: float, verdicts: int = 1500):
    """People and a judge ``decisive`` times as decisive on six models; the judge's family
    made the two strongest, and it prefers it by ``own`` (log-odds). Returns the cells and
    each cell's rater group (0 people, 1 the judge); columns as joint_table's: people's
    position, the judge's position and self-preference."""
    rng = np.random.default_rng(seed)
    strength = np.linspace(1.2, -1.2, 6)
    family = np.array([1.0, 1.0, 0, 0, 0, 0])
    parts = []
    for rater in (0, 1):
        a = rng.integers(0, 6, verdicts)
        b = (a + rng.integers(1, 6, verdicts)) % 6
        gap = strength[a] - strength[b]
        if rater == 0:
            logit, x = gap, np.column_stack([np.ones(verdicts), np.zeros((verdicts, 2))])
        else:
            own_diff = family[a] - family[b]
            logit = decisive * gap + own * own_diff
            x = np.column_stack([np.zeros(verdicts), np.ones(verdicts), own_diff])
        y = (rng.random(verdicts) < 1 / (1 + np.exp(-logit))).astype(float)
        parts.append((a, b, x, y))
    found = joint.cells(*(np.concatenate([p[i] for p in parts]) for i in range(4)))
    return found, (found.x[:, 1] == 1).astype(int)


@pytest.mark.parametrize("decisive", [0.5, 2.5])
def test_a_judge_on_its_own_scale_shows_no_self_preference_it_does_not_have(decisive):
    """A judge more or less decisive than people, whose family made the strongest models,
    with no self-preference: on one shared scale its extra (or missing) decisiveness reads
    as self-preference; with its own scale the effect's interval covers 0 at about the
    nominal rate and the scale is the truth's."""
    shared_flags, own_covers, scales = 0, 0, []
    seeds = 20
    for seed in range(seeds):
        found, group = _decisive_world(seed, decisive, 0.0)
        fitted = joint.fit(6, found)
        _, error = joint.wald(fitted, found, 6)
        shared_flags += abs(fitted.effect[2]) > 1.96 * error[2]
        scaled = joint.scaled_fit(6, found, group, fitted)
        own_covers += abs(scaled.effect[2]) <= 1.96 * scaled.effect_error[2]
        scales.append(np.exp(scaled.log_scale[1]))
        assert scaled.converged and scaled.scaled.tolist() == [False, True]
    assert own_covers >= 17  # nominal 19 of 20
    assert shared_flags >= 8  # the shared scale invents the effect
    assert abs(np.mean(scales) - decisive) < 0.1 * decisive


def test_raters_on_one_scale_keep_it_and_their_effects():
    """When the judge is as decisive as people, its scale's interval covers 1 at about the
    nominal rate, and its true self-preference (0.7) is read without bias."""
    covers, estimates = 0, []
    for seed in range(20):
        found, group = _decisive_world(seed, 1.0, 0.7)
        scaled = joint.scaled_fit(6, found, group, joint.fit(6, found))
        gamma, error = scaled.log_scale[1], scaled.log_scale_error[1]
        covers += abs(gamma) <= 1.96 * error
        estimates.append(scaled.effect[2])
    assert covers >= 17  # nominal 19 of 20
    assert abs(np.mean(estimates) - 0.7) < 0.1
