"""Bradley-Terry at real sizes: fitted per connected component, the documented prior fitted
independently, the bootstrap's resamples against one-by-one refits, the Wald intervals of
large components against the bootstrap, and the same figures in every row order."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from evaluations.analytics import bradley_terry as bt
from evaluations.analytics import bradley_terry_bootstrap as btb
from evaluations.analytics.analyze import analyze
from tests.helpers.evaluations import comparison_scenario, import_rows


def simulate(n: int, judgments: int, seed: int, spread: float = 1.0):
    rng = np.random.default_rng(seed)
    truth = rng.normal(0, spread, n)
    a = rng.integers(0, n, judgments)
    b = (a + rng.integers(1, n, judgments)) % n
    draw = rng.random(judgments)
    p = 1 / (1 + np.exp(truth[b] - truth[a]))
    s = np.where(draw < 0.05, 0.5, (draw < 0.05 + 0.95 * p).astype(float))
    return truth, a, b, s


def documented_fit(n, a, b, s, prior):
    """The log-likelihood as docs/analytics.md states it, maximized by scipy: ties half a
    win each way; with ``prior``, each variant's one virtual game against a reference of
    strength 1, half won."""

    def minus_loglik(theta):
        d = theta[a] - theta[b]
        loglik = (s * -np.logaddexp(0, -d) + (1 - s) * -np.logaddexp(0, d)).sum()
        if prior:
            loglik += (0.5 * -np.logaddexp(0, -theta) + 0.5 * -np.logaddexp(0, theta)).sum()
        return -loglik

    found = minimize(minus_loglik, np.zeros(n), method="BFGS", options={"gtol": 1e-10})
    return found.x


def test_a_connected_graph_gets_the_maximum_likelihood():
    _, a, b, s = simulate(12, 600, seed=1)
    fit = bt.fit(12, a, b, s)
    assert fit.connected and not fit.regularized.any() and fit.converged
    reference = documented_fit(12, a, b, s, prior=False)
    np.testing.assert_allclose(fit.strength, reference - reference.mean(), atol=1e-5)


def test_each_component_is_fitted_on_its_own_and_only_unconnected_ones_get_the_prior():
    # Items of 2, 3 and 4 outputs, compared within the item; the third one's first output
    # never loses (no finite maximum): it alone is regularized.
    a = np.array([0, 1, 0, 2, 3, 4, 2, 5, 6, 5, 7, 5, 8])
    b = np.array([1, 0, 1, 3, 4, 2, 4, 6, 7, 7, 8, 8, 6])
    s = np.array([1, 1, 0.5, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0.5])
    fit = bt.fit(9, a, b, s)
    assert fit.components == 3 and not fit.connected
    assert fit.strongly_connected.tolist() == [True, True, False]
    assert fit.regularized.tolist() == [False] * 5 + [True] * 4
    for nodes, prior in (([0, 1], False), ([2, 3, 4], False), ([5, 6, 7, 8], True)):
        index = {node: k for k, node in enumerate(nodes)}
        mine = np.isin(a, nodes)
        reference = documented_fit(
            len(nodes),
            np.array([index[x] for x in a[mine]]),
            np.array([index[x] for x in b[mine]]),
            s[mine],
            prior,
        )
        np.testing.assert_allclose(fit.strength[nodes], reference - reference.mean(), atol=1e-5)
    assert fit.strength[5] == fit.strength[5:9].max()


def test_the_bootstrap_is_each_resample_refitted():
    """The batched, deduplicated resamples equal fits of the same resampled judgments one
    by one, for many small components (the PandaLM shape) and a mid-size one."""
    rng = np.random.default_rng(3)
    items = 40
    a = np.repeat(np.arange(items) * 2, 3)
    b = a + 1
    s = rng.choice([0.0, 0.5, 1.0], size=len(a))
    _, ma, mb, ms = simulate(20, 400, seed=4)
    a, b, s = (
        np.concatenate([a, ma + 2 * items]),
        np.concatenate([b, mb + 2 * items]),
        np.concatenate([s, ms]),
    )
    n = 2 * items + 20
    fit = bt.fit(n, a, b, s)
    boot = btb.bootstrap(n, a, b, s, fit, resamples=6, seed=9)
    cells, counts = np.unique(np.stack([a, b, np.round(s * 2)]), axis=1, return_counts=True)
    drawn = btb._resample(fit.component[cells[0].astype(int)], counts, 6, 9)
    for r in range(6):
        w = drawn[r]
        ra, rb, rs = (
            np.repeat(x, w) for x in (cells[0].astype(int), cells[1].astype(int), cells[2] / 2)
        )
        # Each component keeps its number of judgments.
        assert (
            np.bincount(fit.component[ra], minlength=fit.components).tolist()
            == np.bincount(fit.component[a], minlength=fit.components).tolist()
        )
        for c in range(fit.components):
            nodes = np.nonzero(fit.component == c)[0]
            mine = np.isin(ra, nodes)
            index = {node: k for k, node in enumerate(nodes)}
            prior = bt.REGULARIZATION if fit.regularized[nodes[0]] else bt.RIDGE
            wins = np.zeros((1, len(nodes), len(nodes)))
            for x, y, o in zip(ra[mine], rb[mine], rs[mine], strict=True):
                wins[0, index[x], index[y]] += o
                wins[0, index[y], index[x]] += 1 - o
            one, converged = bt.newton_dense(wins, prior)
            assert converged
            np.testing.assert_allclose(boot[r, nodes], one[0], atol=1e-6)


def test_large_components_get_wald_intervals_close_to_the_bootstrap(monkeypatch):
    _, a, b, s = simulate(8, 4000, seed=5)
    fit = bt.fit(8, a, b, s)
    boot = btb.bootstrap(8, a, b, s, fit, resamples=2000, seed=1)
    monkeypatch.setattr(bt, "SMALL", 5)
    error = bt.wald(8, a, b, s, fit)
    assert np.isnan(btb.bootstrap(8, a, b, s, fit, resamples=3)).all()
    np.testing.assert_allclose(error, boot.std(axis=0), rtol=0.12)


def test_simulated_intervals_cover_the_truth():
    """The intervals of a 20-variant component cover the true (centred) strengths near
    95%, over six simulations."""
    covered = total = 0
    for seed in range(6):
        truth, a, b, s = simulate(20, 1500, seed=seed)
        fit = bt.fit(20, a, b, s)
        boot = btb.bootstrap(20, a, b, s, fit, resamples=400, seed=seed)
        low, high = np.percentile(boot, [2.5, 97.5], axis=0)
        centred = truth - truth.mean()
        covered += int(((low <= centred) & (centred <= high)).sum())
        total += 20
    assert 0.88 <= covered / total <= 0.99


@pytest.mark.django_db
def test_the_same_judgments_in_another_row_order_give_the_same_rankings(member, team_a):
    from evalplatform.accounts.roles import Role

    manager = member(team_a, Role.MANAGER)
    rng = np.random.default_rng(0)
    items = {f"q{k}": {f"m{m}": "" for m in range(3)} for k in range(30)}
    rows = []
    for item in items:
        for rater in ("ann", "bob"):
            first, second = rng.choice(3, size=2, replace=False)
            verdict = rng.choice(["A", "B", "tie"])
            rows.append([item, f"m{first}", f"m{second}", verdict, rater])
    results = []
    for name, ordered in (("Forward", rows), ("Backward", rows[::-1])):
        scenario = comparison_scenario(manager, team_a, name, items)
        import_rows(manager, scenario, ordered)
        result = analyze(scenario, resamples=200)
        results.append((result["bradley_terry"], result["bradley_terry_fit"], result["by_model"]))
    assert results[0] == results[1]
    assert results[0][1]["components"] == 30


def _plackett_luce_reference(rankings, m):
    def minus_loglik(theta):
        total = 0.0
        for order in rankings:
            order = np.array(order)
            for t in range(m - 1):
                total += theta[order[t]] - np.log(np.exp(theta[order[t:]]).sum())
        return -total

    found = minimize(minus_loglik, np.zeros(m), method="BFGS", options={"gtol": 1e-10}).x
    return found - found.mean()


def test_rankings_get_plackett_luce_bootstrapped_by_whole_rankings():
    from evaluations.analytics import plackett_luce

    rng = np.random.default_rng(0)
    truth = np.array([1.0, 0.5, 0.0, -0.5, -1.0])

    def draw(count):
        return [list(np.argsort(-(truth + rng.gumbel(size=5)))) for _ in range(count)]

    rankings = draw(60)
    fitted = plackett_luce.fit([rankings, [[0, 1]] * 7 + [[1, 0]] * 3], resamples=300)
    np.testing.assert_allclose(fitted[0].strength, _plackett_luce_reference(rankings, 5), atol=1e-5)
    # Two variants: Plackett-Luce is Bradley-Terry, log(7/3) apart.
    assert fitted[1].strength[0] - fitted[1].strength[1] == pytest.approx(np.log(7 / 3))
    # Whole rankings resampled: each resample is one of the distinct rankings' weightings,
    # refitted; a variant always last is regularized (finite).
    assert fitted[0].boot.shape == (300, 5) and np.isfinite(fitted[0].boot).all()
    last = plackett_luce.fit([[[0, 1, 2], [1, 0, 2]]], resamples=50)[0]
    assert last.regularized and np.isfinite(last.strength).all()
    assert last.strength[2] < min(last.strength[0], last.strength[1])
    # Coverage of simulated items of 20 rankings each, near the nominal 95%.
    covered = total = 0
    for seed in range(30):
        item = plackett_luce.fit([draw(20)], resamples=300, seed=seed)[0]
        low, high = np.percentile(item.boot, [2.5, 97.5], axis=0)
        centred = truth - truth.mean()
        covered += int(((low <= centred) & (centred <= high)).sum())
        total += 5
    assert 0.88 <= covered / total <= 0.995


def test_the_models_of_rankings_are_bootstrapped_by_whole_rankings():
    """A ranking's implied pairs are not independent: the models' intervals resample whole
    rankings. Plackett-Luce's pairwise marginals are Bradley-Terry in the same strengths,
    so the fit of the implied pairs targets the truth; simulated coverage is near 95%
    (resampling the pairs instead gives about 85%)."""
    from types import SimpleNamespace

    from evaluations.analytics.rankings import _ranked_groups

    truth = np.array([0.6, 0.2, -0.2, -0.6])
    centred = truth - truth.mean()
    group = {pk: f"m{pk % 4}" for pk in range(8)}  # two outputs of each model per item
    covered = total = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        rows = []
        for _ in range(25):
            utility = np.concatenate([truth, truth]) + rng.gumbel(size=8)
            rows.append(SimpleNamespace(payload={"ranking": list(np.argsort(-utility))}))
        found = _ranked_groups(rows, group, {"resamples": 300, "seed": seed})
        assert found["intervals"] == "bootstrap of whole rankings"
        assert found["judgments"] == 25
        for row in found["bradley_terry"]:
            true = centred[int(row["variant"][1:])]
            covered += row["ci_low"] <= true <= row["ci_high"]
            total += 1
    assert 0.9 <= covered / total <= 0.995
    # The same rankings in another order: the same figures.
    rows.reverse()
    again = _ranked_groups(rows, group, {"resamples": 300, "seed": 59})
    assert again["bradley_terry"] == found["bradley_terry"]
