"""The analytics against reference implementations, on public data (tests/evaluations/
fixtures, with attribution): Bradley-Terry against choix, Krippendorff's alpha against
krippendorff, the kappas against scikit-learn and statsmodels, binomial tests against scipy;
and hand-checked small cases."""

from __future__ import annotations

import csv
import io
import json
import random

import choix
import krippendorff
import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from evalplatform.accounts.roles import Role
from evaluations.analytics import bradley_terry, stats
from evaluations.analytics.analyze import analyze
from tests.helpers.evaluations import FIXTURES, comparison_scenario, import_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def manager(team_a, member):
    return member(team_a, Role.MANAGER)


def centred(values):
    values = np.asarray(values, float)
    return values - values.mean()


def test_bradley_terry_on_the_writing_pairs_matches_choix(manager, team_a):
    samples = list(csv.DictReader((FIXTURES / "writing_samples.csv").open()))
    pairs = list(csv.DictReader((FIXTURES / "writing_pairs.csv").open()))
    ids = [s["ID"] for s in samples]
    scenario = comparison_scenario(manager, team_a, "Writing", {"essays": dict.fromkeys(ids, "")})
    shuffle = random.Random(7)  # ID1 is always the weaker sample: randomize the order shown
    rows = []
    for pair in pairs:
        first, second = (pair["ID1"], pair["ID2"])
        if shuffle.random() < 0.5:
            first, second = second, first
        rows.append(["essays", first, second, "A" if pair["better_id"] == first else "B", "sim"])
    import_rows(manager, scenario, rows)
    result = analyze(scenario, resamples=200)
    ours = {r["variant"].split("/")[1]: r for r in result["bradley_terry"]}
    data = [
        (ids.index(p["better_id"]), ids.index(p["ID1"] if p["better_id"] == p["ID2"] else p["ID2"]))
        for p in pairs
    ]
    reference = choix.opt_pairwise(len(ids), data, alpha=0)
    assert (
        result["bradley_terry_fit"]["connected"] and not result["bradley_terry_fit"]["regularized"]
    )
    np.testing.assert_allclose(
        centred([ours[i]["strength"] for i in ids]), centred(reference), atol=1e-5
    )
    for entry in ours.values():
        assert entry["ci_low"] <= entry["strength"] <= entry["ci_high"]
    quality = [int(s["quality_score"]) for s in samples]
    assert sps.spearmanr(quality, [ours[i]["strength"] for i in ids]).statistic > 0.8
    # Ranks follow the strengths.
    ranked = sorted(ours.values(), key=lambda r: r["rank"])
    assert [r["strength"] for r in ranked] == sorted((r["strength"] for r in ranked), reverse=True)


@pytest.fixture
def pandalm(manager, team_a):
    judgments = json.loads((FIXTURES / "pandalm_judgments.json").read_text())
    items = {}
    for row in judgments:
        first, second = row["cmp_key"].split("_", 1)
        items[f"p{row['idx']}"] = {"response1": first, "response2": second}
    scenario = comparison_scenario(manager, team_a, "PandaLM", items)
    winner = {0: "tie", 1: "A", 2: "B"}
    rows = [
        [f"p{row['idx']}", "response1", "response2", winner[row[f"annotator{n}"]], f"annotator{n}"]
        for row in judgments
        for n in (1, 2, 3)
    ]
    import_rows(manager, scenario, rows)
    return scenario, judgments


def test_pandalm_agreement_matches_krippendorff_statsmodels_and_sklearn(pandalm):
    scenario, judgments = pandalm
    result = analyze(scenario, resamples=100)
    codes = np.array([[row[f"annotator{n}"] for row in judgments] for n in (1, 2, 3)], float)
    reference_alpha = krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal")
    agreement = result["agreement"]
    assert agreement["krippendorff_alpha_nominal"] == pytest.approx(reference_alpha, abs=1e-6)
    table, _ = aggregate_raters(codes.T.astype(int))
    assert agreement["fleiss_kappa"] == pytest.approx(fleiss_kappa(table), abs=1e-6)
    assert agreement["cohen_kappa"] is None  # three raters
    assert agreement["units"] == 999 and agreement["raters"] == 3
    # Cohen's kappa of two annotators, plain and weighted, against scikit-learn.
    a1, a2 = codes[0].astype(int).tolist(), codes[1].astype(int).tolist()
    assert stats.cohen_kappa(a1, a2) == pytest.approx(cohen_kappa_score(a1, a2), abs=1e-9)
    for weights in ("linear", "quadratic"):
        assert stats.cohen_kappa(a1, a2, weights) == pytest.approx(
            cohen_kappa_score(a1, a2, weights=weights), abs=1e-9
        )


def test_pandalm_model_strengths_match_choix_with_ties_as_half_wins(pandalm):
    scenario, judgments = pandalm
    result = analyze(scenario, resamples=100)
    models = sorted({m for row in judgments for m in row["cmp_key"].split("_", 1)})
    data = []
    for row in judgments:
        first, second = (models.index(m) for m in row["cmp_key"].split("_", 1))
        for n in (1, 2, 3):
            verdict = row[f"annotator{n}"]
            # Every count doubled, so that a tie is one win each way: the same maximum.
            if verdict == 1:
                data += [(first, second)] * 2
            elif verdict == 2:
                data += [(second, first)] * 2
            else:
                data += [(first, second), (second, first)]
    reference = choix.opt_pairwise(len(models), data, alpha=0)
    ours = {r["variant"]: r["strength"] for r in result["by_model"]["bradley_terry"]}
    np.testing.assert_allclose(centred([ours[m] for m in models]), centred(reference), atol=1e-5)
    assert result["by_model"]["connected"] is True
    # Each answer is in one pair only: the variants' graph is not strongly connected, and
    # their strengths are regularized (finite) and say so.
    assert result["bradley_terry_fit"]["connected"] is False
    assert result["bradley_terry_fit"]["regularized"] is True
    assert all(np.isfinite(r["strength"]) for r in result["bradley_terry"])
    # Position: the share of first-position wins among decided verdicts, exact binomial test.
    decided = [row[f"annotator{n}"] for row in judgments for n in (1, 2, 3)]
    firsts, seconds = decided.count(1), decided.count(2)
    position = result["position_bias"]["overall"]
    reference_test = sps.binomtest(firsts, firsts + seconds, 0.5)
    assert position["k"] == firsts and position["n"] == firsts + seconds
    assert position["p_value"] == pytest.approx(reference_test.pvalue, rel=1e-6)
    assert position["ties"] == decided.count(0)


def test_llmbar_reverse_order_consistency_and_position(manager, team_a):
    verdicts = json.loads((FIXTURES / "llmbar_gpt4_verdicts.json").read_text())
    items = {f"q{v['id']}": {"output_1": "", "output_2": ""} for v in verdicts}
    scenario = comparison_scenario(manager, team_a, "LLMBar", items)
    rows = []
    for v in verdicts:
        item = f"q{v['id']}"
        rows.append([item, "output_1", "output_2", "A" if v["swap_false"] == "1" else "B", "gpt-4"])
        # Swapped: output_2 shown first; the verdict is already mapped back to the outputs.
        rows.append([item, "output_2", "output_1", "B" if v["swap_true"] == "1" else "A", "gpt-4"])
    import_rows(manager, scenario, rows)
    result = analyze(scenario, resamples=500)
    consistency = result["reverse_consistency"]["overall"]
    same = sum(v["swap_false"] == v["swap_true"] for v in verdicts)
    assert consistency["pairs"] == 100 and consistency["consistent"] == same == 95
    assert consistency["share"] == pytest.approx(0.95)
    assert consistency["ci_low"] <= 0.95 <= consistency["ci_high"]
    # Inconsistent pairs: the first shown won both times, or the second both times.
    first_both = sum(v["swap_false"] == "1" and v["swap_true"] == "2" for v in verdicts)
    second_both = sum(v["swap_false"] == "2" and v["swap_true"] == "1" for v in verdicts)
    assert consistency["inconsistent_first_position"] == first_both == 3
    assert consistency["inconsistent_second_position"] == second_both == 2
    firsts = sum(v["swap_false"] == "1" for v in verdicts) + sum(
        v["swap_true"] == "2" for v in verdicts
    )
    position = result["position_bias"]["overall"]
    assert position["k"] == firsts and position["n"] == 200
    assert position["p_value"] == pytest.approx(sps.binomtest(firsts, 200).pvalue, rel=1e-9)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_alpha_with_missing_values_matches_the_reference(level):
    rng = np.random.default_rng(3)
    truth = rng.integers(1, 6, size=60)
    data = np.array([np.clip(truth + rng.integers(-1, 2, size=60), 1, 5) for _ in range(4)], float)
    data[rng.random(data.shape) < 0.2] = np.nan
    reference = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    units = [[v for v in data[:, u] if not np.isnan(v)] for u in range(data.shape[1])]
    assert stats.krippendorff_alpha(units, level) == pytest.approx(reference, abs=1e-9)


def test_hand_checked_cases():
    def fit(wins):
        found = bradley_terry.fit_matrix(wins)
        return {
            "strength": found.strength,
            "connected": found.connected,
            "regularized": bool(found.regularized.any()),
        }

    # A perfect cycle: A beats B, B beats C, C beats A; every strength is equal.
    wins = stats.win_matrix(3, np.array([0, 1, 2]), np.array([1, 2, 0]), np.ones(3))
    result = fit(wins)
    assert result["connected"] and not result["regularized"]
    np.testing.assert_allclose(result["strength"], 0, atol=1e-9)
    # A beat B, C never compared: two components, A and B regularized (finite), C alone.
    wins = stats.win_matrix(3, np.array([0]), np.array([1]), np.ones(1))
    result = fit(wins)
    assert not result["connected"] and result["regularized"]
    assert np.all(np.isfinite(result["strength"]))
    assert result["strength"][0] > result["strength"][2] > result["strength"][1]
    # All ties: equal strengths.
    wins = stats.win_matrix(3, np.array([0, 1, 0]), np.array([1, 2, 2]), np.full(3, 0.5))
    np.testing.assert_allclose(fit(wins)["strength"], 0, atol=1e-9)
    # Two items, 3 wins to 1: log(3) apart.
    wins = stats.win_matrix(2, np.array([0, 0, 0, 1]), np.array([1, 1, 1, 0]), np.ones(4))
    strength = fit(wins)["strength"]
    assert strength[0] - strength[1] == pytest.approx(np.log(3), abs=1e-9)
    # A single rater: no agreement to measure.
    assert stats.krippendorff_alpha([["x"], ["y"]], "nominal") is None
    # Kendall's W: two raters in perfect agreement, then in perfect disagreement.
    assert stats.kendall_w(np.array([[1, 2, 3], [1, 2, 3]])) == pytest.approx(1.0)
    assert stats.kendall_w(np.array([[1, 2, 3], [3, 2, 1]])) == pytest.approx(0.0)
    # ICC(1): identical repeats agree perfectly.
    assert stats.icc_oneway(np.array([[1.0, 1.0], [3.0, 3.0], [5.0, 5.0]])) == pytest.approx(1.0)
    # Fleiss on a hand table (Fleiss 1971 style): two categories, perfect agreement.
    assert stats.fleiss_kappa(np.array([[3, 0], [0, 3], [3, 0]])) == pytest.approx(1.0)


def test_pandalm_imported_with_the_command_and_read_on_its_analytics_page(
    manager, team_a, tmp_path
):
    """The whole path a user takes: the PandaLM judgments as a CSV, imported into a new
    scenario by the command, and its analytics page: model rankings with intervals, the
    three annotators' agreement and the position statistics."""
    from django.core.management import call_command
    from django.test import Client

    judgments = json.loads((FIXTURES / "pandalm_judgments.json").read_text())
    winner = {0: "tie", 1: "A", 2: "B"}
    path = tmp_path / "pandalm.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["item_id", "variant_a", "variant_b", "model_a", "model_b", "winner", "rater"]
        )
        for row in judgments:
            first, second = row["cmp_key"].split("_", 1)
            for n in (1, 2, 3):
                writer.writerow(
                    [
                        row["idx"],
                        "response1",
                        "response2",
                        first,
                        second,
                        winner[row[f"annotator{n}"]],
                        f"annotator{n}",
                    ]
                )
    out = io.StringIO()
    call_command(
        "import_judgments",
        str(path),
        "--scenario",
        "PandaLM",
        "--team",
        "team-a",
        "--create",
        "comparison",
        "--user",
        manager.username,
        stdout=out,
    )
    assert "Imported 2997 judgments" in out.getvalue()
    client = Client()
    client.force_login(manager)
    from scenarios.models import Scenario

    scenario = Scenario.objects.get(name="PandaLM")
    page = client.get(f"/scenarios/{scenario.pk}/analytics?resamples=200")
    html = page.content.decode()
    assert page.status_code == 200
    for model in ("llama-7b", "bloom-7b", "pythia-6.9b", "opt-7b", "cerebras-gpt-6.7B"):
        assert model in html
    assert "Krippendorff" in html and "Fleiss" in html and "First-position wins" in html
    codes = np.array([[row[f"annotator{n}"] for row in judgments] for n in (1, 2, 3)], float)
    alpha = krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal")
    assert f"{alpha:.3f}" in html


def test_the_wilcoxon_method_is_fixed_and_matches_scipy_for_that_method():
    rng = np.random.default_rng(7)
    # Few differences, no ties: the exact test.
    x, y = rng.normal(0, 1, 12), rng.normal(0.5, 1, 12)
    assert stats.wilcoxon_p(x, y) == pytest.approx(sps.wilcoxon(y - x, method="exact").pvalue)
    # Many differences with ties and zeros: the normal approximation, zeros dropped.
    x = rng.integers(0, 4, 80).astype(float)
    y = x + rng.choice([-1.0, 0.0, 1.0, 2.0], 80)
    d = (y - x)[y != x]
    reference = sps.wilcoxon(d, method="asymptotic", correction=False).pvalue
    assert stats.wilcoxon_p(x, y) == pytest.approx(reference, rel=1e-9)
    assert stats.wilcoxon_p(x, x) is None
