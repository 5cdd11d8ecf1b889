"""Agreement between raters (the analytics' ``agreement``) against reference implementations
on public data: pingouin (ICC), scikit-learn (Cohen's kappa, weighted; pairwise; Light's
kappa as their mean), krippendorff, statsmodels (Fleiss), and irrCAC (Gwet's AC1 / AC2,
Conger's kappa). irrCAC pins old numpy, scipy and pandas, so it cannot be installed with
the project: its figures are recorded here as irrCAC 0.4.4 computes them
(``CAC(ratings, weights=..., categories=[...]).gwet()`` / ``.conger()``), next to Gwet's own
handbook example. Then the same judgments in another row order, with other ids and
presentation orders, give the same figures; and the page, the API and the CSVs show them.
"""

from __future__ import annotations

import csv
import io
import json
import random
import warnings
from itertools import combinations

import krippendorff
import numpy as np
import pingouin as pg
import pytest
from django.test import Client
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from evalplatform.accounts.roles import Role
from evaluations.analytics import agreement, data
from evaluations.analytics import agreement_stats as ags
from evaluations.analytics.analyze import DEFAULTS, analysis_of, analyze
from evaluations.manager.imports import import_judgments
from evaluations.models import ExternalRater, Judgment, RaterKind
from scenarios import services as scenario_services
from scenarios.models import Task
from tests.factories import RatingScenarioFactory
from tests.helpers.evaluations import FIXTURES, comparison_scenario, import_rows

pytestmark = pytest.mark.django_db

PANDALM = json.loads((FIXTURES / "pandalm_judgments.json").read_text())
WINNER = {0: "tie", 1: "A", 2: "B"}
PREFERENCE = {2: 1, 0: 2, 1: 3}  # PandaLM's verdict as a 1-3 rating: 3 = response1 better


@pytest.fixture
def manager(team_a, member):
    return member(team_a, Role.MANAGER)


def pandalm_scenario(manager, team, name, judgments, raters, *, shuffle=None, repeats=0):
    """PandaLM's judgments imported into a new comparison scenario. ``shuffle`` (a seed):
    the items created in another order, half of them with their variants created (so other
    ids) and shown the other way round, the rows imported in another order. ``repeats``:
    annotator1 judges the first items again, shown the other way round, with annotator3's
    verdict."""
    order = list(judgments)
    flip: dict[int, bool] = {}
    if shuffle is not None:
        rng = random.Random(shuffle)
        order.reverse()
        flip = {row["idx"]: rng.random() < 0.5 for row in order}
    items = {
        f"p{row['idx']}": (
            {"response2": "m2", "response1": "m1"}
            if flip.get(row["idx"])
            else {"response1": "m1", "response2": "m2"}
        )
        for row in order
    }
    scenario = comparison_scenario(manager, team, name, items)

    def shown(row, verdict, rater, swapped):
        first, second = ("response2", "response1") if swapped else ("response1", "response2")
        winner = WINNER[verdict]
        if swapped and winner != "tie":
            winner = "B" if winner == "A" else "A"
        return [f"p{row['idx']}", first, second, winner, rater]

    rows = [
        shown(row, row[f"annotator{n}"], f"annotator{n}", flip.get(row["idx"], False))
        for row in judgments
        for n in raters
    ]
    rows += [
        shown(row, row["annotator3"], "annotator1", not flip.get(row["idx"], False))
        for row in judgments[:repeats]
    ]
    if shuffle is not None:
        random.Random(shuffle).shuffle(rows)
    import_rows(manager, scenario, rows)
    return scenario


def rating_scenario(manager, team, name, variants, dimension, low, high):
    """A rating scenario of one item whose variants are ``variants``."""
    rows = [{"item_id": "set", "variant_id": v, "content": f"{v}."} for v in variants]
    config = {"dimensions": [{"name": dimension, "min": low, "max": high}]}
    return RatingScenarioFactory(team=team, created_by=manager, name=name, config=config, rows=rows)


def import_scores(manager, scenario, rows):
    """``rows``: (variant, rater, dimension, score)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["item_id", "variant", "rater", "dimension", "score"])
    writer.writerows(["set", *row] for row in rows)
    import_judgments(
        user=manager, scenario=scenario, raw=buffer.getvalue().encode(), filename="s.csv"
    )


def wine():
    """pingouin's wine data: 8 wines scored 0-9 by 4 judges (long format)."""
    return pg.read_dataset("icc")


def wine_scenario(manager, team, name="Wine", order=None):
    data = wine()
    scenario = rating_scenario(
        manager, team, name, [f"wine{w}" for w in sorted(set(data["Wine"]))], "quality", 0, 9
    )
    rows = [(f"wine{w}", f"judge {j}", "quality", int(s)) for w, j, s in data.to_numpy()]
    if order is not None:
        random.Random(order).shuffle(rows)
    import_scores(manager, scenario, rows)
    return scenario


def pingouin_icc(long, targets, raters, ratings):
    """pingouin's ICC(2,1) and ICC(3,1)."""
    with warnings.catch_warnings():  # pingouin's own use of pandas, deprecated in pandas 3
        warnings.simplefilter("ignore", DeprecationWarning)
        table = pg.intraclass_corr(data=long, targets=targets, raters=raters, ratings=ratings)
    by_type = dict(zip(table["Type"], table["ICC"], strict=True))
    # ICC2 / ICC3 in pingouin up to 0.5, ICC(A,1) / ICC(C,1) from 0.6 on.
    return by_type.get("ICC2", by_type.get("ICC(A,1)")), by_type.get(
        "ICC3", by_type.get("ICC(C,1)")
    )


def agreement_of(scenario, **options):
    """The analytics' ``agreement`` alone, as ``analyze`` computes it (without the
    comparisons' Bradley-Terry bootstrap, the slow part of a scenario of 600 variants)."""
    loaded = data.load(scenario)
    return agreement.agreement(
        loaded.rows, analysis_of(scenario), scenario.config, loaded.variants, DEFAULTS | options
    )


def assert_interval(figures, key):
    low, high = figures[f"{key}_ci"]
    assert low <= figures[key] <= high, key


def test_gwets_handbook_example_and_pandalm_codes_match_irrcac():
    # Gwet (2014), Handbook of Inter-Rater Reliability, 4th ed., p. 120: 4 raters, 12
    # subjects, 5 categories, missing ratings (irrCAC's raw_4raters); Gwet's published
    # AC1 0.7754, Fleiss 0.7612, Conger 0.7628, alpha 0.7434.
    nan = np.nan
    table = np.array(
        [
            [1, 1, nan, 1],
            [2, 2, 3, 2],
            [3, 3, 3, 3],
            [3, 3, 3, 3],
            [2, 2, 2, 2],
            [1, 2, 3, 4],
            [4, 4, 4, 4],
            [1, 1, 2, 1],
            [2, 2, 2, 2],
            [nan, 5, 5, 5],
            [nan, nan, 1, 1],
            [nan, nan, 3, nan],
        ]
    )
    categories = np.arange(1, 6, dtype=float)
    counts = np.array([[np.sum(row == c) for c in categories] for row in table], float)
    one = np.ones((1, len(table)))
    assert ags.gwet_ac(counts, one, np.eye(5))[0] == pytest.approx(0.77544, abs=1e-5)
    quadratic = ags.agreement_weights(categories, "quadratic")
    assert ags.gwet_ac(counts, one, quadratic)[0] == pytest.approx(0.914, abs=1e-5)
    linear = ags.agreement_weights(categories, "linear")
    assert ags.gwet_ac(counts, one, linear)[0] == pytest.approx(0.85874, abs=1e-5)
    by_rater = np.zeros((len(table), 4 * 5))
    for unit, row in enumerate(table):
        for rater, value in enumerate(row):
            if not np.isnan(value):
                by_rater[unit, rater * 5 + int(value) - 1] = 1
    from scipy import sparse

    conger = ags.conger_kappa(counts, sparse.csr_matrix(by_rater), 4, one)[0]
    assert conger == pytest.approx(0.76282, abs=1e-5)
    units = [[v for v in row if not np.isnan(v)] for row in table]
    assert ags.krippendorff_alpha(units, "nominal") == pytest.approx(0.74342, abs=1e-5)
    named = [[f"category {v:.0f}" for v in unit] for unit in units]
    assert ags.krippendorff_alpha(named, "nominal") == pytest.approx(0.74342, abs=1e-5)
    # Gwet's AC1 by hand: p_a = 9/11 (the units with two or more ratings), the π_k the
    # mean share of each category over the 12 units, p_e = Σ π_k (1 - π_k) / (q - 1).
    shares = counts / counts.sum(axis=1, keepdims=True)
    pi = shares.mean(axis=0)
    pe = (pi * (1 - pi)).sum() / 4
    pa = np.mean([(c * (c - 1)).sum() / (c.sum() * (c.sum() - 1)) for c in counts if c.sum() >= 2])
    assert pa == pytest.approx(9 / 11)
    assert ags.gwet_ac(counts, one, np.eye(5))[0] == pytest.approx((pa - pe) / (1 - pe))
    # The PandaLM test set's three annotators (999 pairs; 0 tie, 1 or 2 the better).
    codes = np.array([[row[f"annotator{n}"] for n in (1, 2, 3)] for row in PANDALM])
    counts = np.stack([(codes == c).sum(axis=1) for c in (0, 1, 2)], axis=1).astype(float)
    one = np.ones((1, len(codes)))
    assert ags.gwet_ac(counts, one, np.eye(3))[0] == pytest.approx(0.88644, abs=1e-5)
    by_rater = np.zeros((len(codes), 9))
    for rater in range(3):
        by_rater[np.arange(len(codes)), rater * 3 + codes[:, rater]] = 1
    conger = ags.conger_kappa(counts, sparse.csr_matrix(by_rater), 3, one)[0]
    assert conger == pytest.approx(0.86419, abs=1e-5)


def test_pandalm_agreement_figures_match_the_references(manager, team_a):
    """300 PandaLM pairs, three annotators, through the analytics: alpha, Fleiss, Gwet's
    AC1, Conger, the pairwise Cohen's kappas and Light's kappa, the specific agreement of
    each category, the most disputed pairs, and seeded intervals."""
    judgments = PANDALM[:300]
    scenario = pandalm_scenario(manager, team_a, "PandaLM 300", judgments, (1, 2, 3))
    figures = agreement_of(scenario, resamples=200)
    codes = np.array([[row[f"annotator{n}"] for row in judgments] for n in (1, 2, 3)])
    reference = krippendorff.alpha(
        reliability_data=codes.astype(float), level_of_measurement="nominal"
    )
    assert figures["krippendorff_alpha_nominal"] == pytest.approx(reference, abs=1e-6)
    table, _ = aggregate_raters(codes.T)
    assert figures["fleiss_kappa"] == pytest.approx(fleiss_kappa(table), abs=1e-6)
    assert figures["gwet_ac1"] == pytest.approx(0.85975, abs=1e-5)  # irrCAC
    assert figures["conger_kappa"] == pytest.approx(0.85022, abs=1e-5)  # irrCAC
    pairwise = figures["pairwise_kappa"]
    assert pairwise["raters"] == [
        "external:annotator1",
        "external:annotator2",
        "external:annotator3",
    ]
    kappas = []
    for i, j in combinations(range(3), 2):
        expected = cohen_kappa_score(codes[i], codes[j])
        assert (
            pairwise["kappa"][i][j] == pairwise["kappa"][j][i] == pytest.approx(expected, abs=1e-6)
        )
        kappas.append(expected)
    assert figures["light_kappa"] == pytest.approx(np.mean(kappas), abs=1e-6)
    assert figures["cohen_kappa"] is None and figures["raters"] == 3
    for key in (
        "krippendorff_alpha_nominal",
        "fleiss_kappa",
        "gwet_ac1",
        "conger_kappa",
        "light_kappa",
    ):
        assert_interval(figures, key)
    # Specific agreement: of the pairs of one unit's values with one in the category, the
    # share with both. "first" is response1 (p…/response1 sorts first).
    per_unit = np.stack([(codes == c).sum(axis=0) for c in (1, 2, 0)], axis=1)
    for category, column in zip(("first", "second", "tie"), per_unit.T, strict=True):
        share = (column * (column - 1)).sum() / (column * 2).sum()
        found = next(c for c in figures["by_category"] if c["category"] == category)
        assert found["specific_agreement"] == pytest.approx(share, abs=1e-6)
        assert found["values"] == column.sum()
    # The pairs the annotators disagree on, the most disputed first (two annotators against
    # the third: a third of the pairs of values agree), named by item and variant.
    disputed = sum(len(set(codes[:, u])) > 1 for u in range(300))
    assert figures["by_item"][0]["agreement_share"] == pytest.approx(1 / 3)
    first = figures["by_item"][0]
    assert first["unit"].startswith("p") and " vs " in first["unit"]
    assert set(first["values"]) <= {*first["variants"], "tie"} and len(first["values"]) == 2
    shares = [entry["agreement_share"] for entry in figures["by_item"]]
    assert shares == sorted(shares) and len(shares) == min(disputed, 200) and max(shares) < 1
    assert figures["by_item_omitted"] == max(0, disputed - 200)
    assert figures["few_units"] is False and figures["warnings"] == []
    # Seeded: the same seed, the same intervals; another seed, others.
    assert agreement_of(scenario, resamples=200) == figures
    other = agreement_of(scenario, resamples=200, seed=1)
    assert other["gwet_ac1_ci"] != figures["gwet_ac1_ci"]
    assert other["gwet_ac1"] == figures["gwet_ac1"]


@pytest.mark.parametrize(("raters", "repeats"), [((1, 2, 3), 0), ((1, 2), 40)])
def test_agreement_is_the_same_whatever_the_rows_order_ids_and_presentation(
    manager, team_a, raters, repeats
):
    """The same judgments imported twice: the second time the items created in reverse
    order, half the pairs' variants created and shown the other way round, the rows
    shuffled."""
    judgments = PANDALM[:120]
    one = pandalm_scenario(manager, team_a, "One", judgments, raters, repeats=repeats)
    other = pandalm_scenario(
        manager, team_a, "Other", judgments, raters, shuffle=3, repeats=repeats
    )
    first = analyze(one, resamples=20)["agreement"]
    second = analyze(other, resamples=20)["agreement"]
    assert first == second
    assert agreement_of(one, resamples=500) == agreement_of(other, resamples=500)
    if len(raters) == 2:  # Cohen's kappa, annotator1 judging 40 pairs twice
        assert first["cohen_kappa"] is not None and first["cohen_kappa_ci"] is not None
        assert first["fleiss_kappa"] is None  # units rated two or three times
    else:
        assert first["fleiss_kappa"] is not None
    ratings_one = analyze(wine_scenario(manager, team_a, "Wine one"), resamples=100)
    ratings_other = analyze(wine_scenario(manager, team_a, "Wine other", order=5), resamples=100)
    assert ratings_one["agreement"] == ratings_other["agreement"]


def test_wine_ratings_icc_gwet_and_alpha_match_pingouin_irrcac_and_krippendorff(
    api, manager, team_a
):
    """pingouin's wine data (8 wines, 4 judges, scores 0-9) imported as ratings, read
    through the API."""
    scenario = wine_scenario(manager, team_a)
    response = api(manager).get(f"/api/scenarios/{scenario.pk}/analytics?resamples=300")
    assert response.status_code == 200
    figures = response.json()["agreement"]
    long = wine()
    icc2, icc3 = pingouin_icc(long, "Wine", "Judge", "Scores")
    assert figures["icc2_1"] == pytest.approx(icc2, abs=1e-6)
    assert figures["icc3_1"] == pytest.approx(icc3, abs=1e-6)
    assert figures["icc_units"] == 8 and figures["icc_raters"] == 4
    # irrCAC with the scale's ten points as categories.
    assert figures["gwet_ac1"] == pytest.approx(0.09848, abs=1e-5)
    assert figures["gwet_ac2"] == pytest.approx(0.73405, abs=1e-5)
    assert figures["conger_kappa"] == pytest.approx(0.10345, abs=1e-5)
    matrix = long.pivot(index="Judge", columns="Wine", values="Scores").to_numpy(float)
    for level in ("interval", "ordinal"):
        reference = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
        assert figures[f"krippendorff_alpha_{level}"] == pytest.approx(reference, abs=1e-6)
    for key in ("icc2_1", "icc3_1", "gwet_ac2", "krippendorff_alpha_interval"):
        assert_interval(figures, key)
    assert figures["by_dimension"]["quality"]["icc2_1"] == figures["icc2_1"]
    # Eight units: few, and said so.
    assert figures["few_units"] is True
    assert any("8 units" in w for w in figures["warnings"])
    # The most disputed wine (the largest SD) first.
    sds = [entry["sd"] for entry in figures["by_item"]]
    assert sds == sorted(sds, reverse=True)
    assert figures["by_item"][0]["unit"] == "set/wine3"  # judges A-D: 3, 8, 1, 4
    assert figures["by_item"][0]["sd"] == pytest.approx(np.std([3, 8, 1, 4], ddof=1), abs=1e-6)
    assert figures["by_item"][0]["values"] == {"1": 1, "3": 1, "4": 1, "8": 1}


def test_two_raters_weighted_kappas_match_sklearn_and_icc_pingouin(manager, team_a):
    """Two PandaLM annotators' verdicts on 300 pairs as 1-3 ratings (1: response2 better,
    2: tie, 3: response1 better)."""
    judgments = PANDALM[:300]
    variants = [f"pair{row['idx']}" for row in judgments]
    scenario = rating_scenario(manager, team_a, "Preference", variants, "preference", 1, 3)
    rows = [
        (f"pair{row['idx']}", f"annotator{n}", "preference", PREFERENCE[row[f"annotator{n}"]])
        for row in judgments
        for n in (1, 2)
    ]
    import_scores(manager, scenario, rows)
    figures = analyze(scenario, resamples=200)["agreement"]
    x = [PREFERENCE[row["annotator1"]] for row in judgments]
    y = [PREFERENCE[row["annotator2"]] for row in judgments]
    assert figures["cohen_kappa"] == pytest.approx(cohen_kappa_score(x, y), abs=1e-6)
    for weights in ("linear", "quadratic"):
        expected = cohen_kappa_score(x, y, weights=weights)
        assert figures[f"cohen_kappa_{weights}"] == pytest.approx(expected, abs=1e-6)
        assert_interval(figures, f"cohen_kappa_{weights}")
    assert figures["cohen_kappa_weighted"] == figures["cohen_kappa_quadratic"]
    long = {
        "pair": [v for v in range(300) for _ in (1, 2)],
        "rater": ["a", "b"] * 300,
        "score": [s for pair in zip(x, y, strict=True) for s in pair],
    }
    import pandas as pd

    icc2, icc3 = pingouin_icc(pd.DataFrame(long), "pair", "rater", "score")
    assert figures["icc2_1"] == pytest.approx(icc2, abs=1e-6)
    assert figures["icc3_1"] == pytest.approx(icc3, abs=1e-6)
    assert figures["gwet_ac1"] == pytest.approx(0.85354, abs=1e-5)  # irrCAC
    assert figures["gwet_ac2"] == pytest.approx(0.85638, abs=1e-5)  # irrCAC, quadratic
    assert figures["conger_kappa"] == pytest.approx(0.84276, abs=1e-5)  # irrCAC
    # Two raters: Light's kappa is their Cohen's kappa.
    assert figures["light_kappa"] == pytest.approx(figures["cohen_kappa"], abs=1e-6)


def test_labels_agreement_per_label(manager, team_a):
    """Three raters label twelve tasks (several labels each): alpha and Fleiss per label on
    "has this label", against krippendorff and statsmodels."""
    rows = [
        {"item_id": f"q{n}", "variant_id": "answer", "content": f"Answer {n}."} for n in range(12)
    ]
    scenario = scenario_services.scenario_from_upload(
        user=manager,
        team=team_a,
        data={
            "name": "Labels",
            "type": "labeling",
            "config": {"labels": ["correct", "long", "rude", "never"], "multiple": True},
            "format": "jsonl",
        },
        raw="\n".join(json.dumps(r) for r in rows).encode(),
    )
    rng = random.Random(2)
    chosen = {}
    for task in Task.objects.filter(scenario=scenario).order_by("position"):
        for name in ("ann", "bo", "cy"):
            rater = ExternalRater.objects.get_or_create(team=team_a, name=name)[0]
            labels = [label for label in ("correct", "long", "rude") if rng.random() < 0.5]
            chosen[(task.pk, name)] = labels
            Judgment.objects.create(
                scenario=scenario,
                task=task,
                rater_kind=RaterKind.EXTERNAL,
                external_rater=rater,
                presented=[task.variant_a_id],
                payload={"labels": labels, "text": ""},
            )
    figures = analyze(scenario, resamples=100)["agreement"]
    tasks = sorted({t for t, _ in chosen})
    by_label = {entry["label"]: entry for entry in figures["by_label"]}
    assert list(by_label) == ["correct", "long", "rude", "never"]
    for label in ("correct", "long", "rude"):
        has = np.array(
            [[label in chosen[(t, name)] for t in tasks] for name in ("ann", "bo", "cy")], float
        )
        reference = krippendorff.alpha(reliability_data=has, level_of_measurement="nominal")
        entry = by_label[label]
        assert entry["krippendorff_alpha_nominal"] == pytest.approx(reference, abs=1e-6)
        table, _ = aggregate_raters(has.T.astype(int))
        assert entry["fleiss_kappa"] == pytest.approx(fleiss_kappa(table), abs=1e-6)
        assert entry["judgments_with_label"] == has.sum() and entry["units"] == 12
    assert by_label["never"]["krippendorff_alpha_nominal"] is None
    assert by_label["never"]["judgments_with_label"] == 0
    # Disputed tasks named by item and variant, their answers by their labels.
    assert figures["by_item"] and all(e["unit"].endswith("/answer") for e in figures["by_item"])
    answers = {a for entry in figures["by_item"] for a in entry["values"]}
    assert answers <= {
        "(none)",
        "correct",
        "long",
        "rude",
        "correct, long",
        "correct, rude",
        "long, rude",
        "correct, long, rude",
    }


def test_the_page_and_the_csv_tables_show_the_agreement(api, manager, team_a):
    scenario = wine_scenario(manager, team_a)
    client = Client()
    client.force_login(manager)
    html = client.get(f"/scenarios/{scenario.pk}/analytics?resamples=100").content.decode()
    for text in ("ICC(2,1)", "Gwet&#x27;s AC2", "95% interval", "Most disputed", "set/wine3"):
        assert text in html, text
    assert "rests on 8 units" in html
    url = f"/api/scenarios/{scenario.pk}/analytics"
    response = api(manager).get(f"{url}/agreement_by_item.csv?resamples=50")
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0]["unit"] == "set/wine3" and len(rows) == 8
    assert rows[0]["values"] == "1: 1; 3: 1; 4: 1; 8: 1"
    response = api(manager).get(f"{url}/agreement.csv?resamples=50")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    people = rows[0]
    assert people["between"] == "people" and people["icc2_1"]
    low, high = float(people["icc2_1_ci_low"]), float(people["icc2_1_ci_high"])
    assert low <= float(people["icc2_1"]) <= high
    # Names are text: a variant named like markup is shown escaped.
    marked = rating_scenario(manager, team_a, "Marked", ["<b>one</b>", "two"], "quality", 1, 5)
    import_scores(
        manager,
        marked,
        [
            (v, r, "quality", s)
            for v, scores in (("<b>one</b>", (1, 5)), ("two", (3, 3)))
            for r, s in zip(("ann", "bo"), scores, strict=True)
        ],
    )
    html = client.get(f"/scenarios/{marked.pk}/analytics").content.decode()
    assert "set/&lt;b&gt;one&lt;/b&gt;" in html and "<b>one</b>" not in html


@pytest.mark.django_db(transaction=True)
def test_people_against_a_judge_through_the_api(api, people, request):
    """An evaluator and a mock judge on nine comparison tasks: the judge's agreement with
    the people has intervals, few units and says so."""
    scenario, _ = request.getfixturevalue("judged")
    response = api(people["viewer"]).get(f"/api/scenarios/{scenario.pk}/analytics?resamples=50")
    figures = response.json()["agreement"]
    against = figures["human_vs_judge"]["judge:J"]
    assert set(against) >= {
        "units",
        "agreement_with_human_majority",
        "cohen_kappa",
        "cohen_kappa_ci",
        "krippendorff_alpha_nominal",
        "krippendorff_alpha_nominal_ci",
        "few_units",
    }
    assert 1 <= against["units"] < 10 and against["few_units"] is True
    assert any("judge:J with the people" in w for w in figures["warnings"])
    assert "judge:J" in figures["pairwise_kappa"]["raters"]
    assert figures["resamples"] == 50 and figures["seed"] == 0
    many = api(people["viewer"]).get(f"/api/scenarios/{scenario.pk}/analytics?resamples=5000")
    assert many.json()["agreement"]["resamples"] == 1000  # the agreement intervals' bound
