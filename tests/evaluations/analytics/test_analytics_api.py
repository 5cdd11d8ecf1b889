"""The analytics surfaces: the JSON API with its options, the CSV tables, the command, the
page; permissions; people and judges side by side on the same tasks."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.test import Client

from evaluations.models import Judgment
from tests.helpers.evaluations import create_judge, make_scenario, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_analytics_json_names_its_parts(api, people, judged):
    scenario, judge = judged
    response = api(people["viewer"]).get(f"/api/scenarios/{scenario.pk}/analytics?resamples=50")
    assert response.status_code == 200
    data = response.json()
    for key in (
        "bradley_terry",
        "elo",
        "win_matrix",
        "position_bias",
        "reverse_consistency",
        "agreement",
        "ratings",
        "stability",
        "judges",
    ):
        assert key in data
    # People judged: by default the figures are theirs, and say so; the judge's own figures
    # (its table, stability, agreement with the people) are there all the same.
    assert Judgment.objects.count() == 9 + 18
    assert data["raters"]["filter"] == "humans" and data["raters"]["judgments"] == 9
    assert data["raters"]["label"].startswith("people's judgments")
    assert data["judges"][0]["judgments"] == 18
    everyone = api(people["viewer"]).get(
        f"/api/scenarios/{scenario.pk}/analytics?resamples=50&raters=all"
    )
    assert everyone.json()["raters"]["judgments"] == 27
    assert everyone.json()["raters"]["label"].startswith("everyone's")
    entry = data["bradley_terry"][0]
    assert set(entry) >= {"variant", "strength", "ci_low", "ci_high", "rank"}
    # Outputs are named by their item and what made them, not only by internal ids.
    assert set(entry) >= {"item", "model", "prompt", "variant_id"}
    assert entry["variant"] == f"{entry['item']}/{entry['variant_id']}"
    models = data["by_model"]["bradley_terry"]
    assert {"rank", "strength", "ci_low", "ci_high", "win_rate", "judgments"} <= set(models[0])
    # The evaluator always chose the first shown: position bias p-value is small.
    humans = data["position_bias"]["by_rater"][people["evaluator"].username]
    assert humans["share"] == 1.0 and humans["p_value"] < 0.01
    assert "judge:J" not in data["position_bias"]["by_rater"]
    judge_row = data["judges"][0]
    assert judge_row["name"] == "J" and judge_row["reverse_pairs"] == 9
    assert data["agreement"]["human_vs_judge"]["judge:J"]["units"] >= 1
    only_judge = api(people["viewer"]).get(
        f"/api/scenarios/{scenario.pk}/analytics?raters=judge:{judge['id']}&resamples=0"
    )
    assert only_judge.json()["raters"]["judgments"] == 18
    humans_only = (
        api(people["viewer"])
        .get(f"/api/scenarios/{scenario.pk}/analytics?raters=humans&resamples=0")
        .json()
    )
    assert humans_only["raters"]["judgments"] == 9
    # Seeded: the same request gives the same intervals.
    again = api(people["viewer"]).get(f"/api/scenarios/{scenario.pk}/analytics?resamples=50")
    assert again.json()["bradley_terry"] == data["bradley_terry"]


def test_bad_options_and_permissions(api, people, judged):
    scenario, _ = judged
    url = f"/api/scenarios/{scenario.pk}/analytics"
    bad = api(people["viewer"]).get(f"{url}?raters=robots&resamples=-1&elo_order=sideways")
    assert bad.status_code == 400
    assert set(bad.json()["errors"]) == {"raters", "resamples", "elo_order"}
    assert api(people["evaluator"]).get(url).status_code == 404  # no view of the scenario
    assert api(people["outsider"]).get(url).status_code == 404
    assert api(people["outsider"]).get(f"{url}/bradley_terry.csv").status_code == 404
    assert api(people["viewer"]).get(f"{url}/nonsense.csv").status_code == 404


def test_csv_tables_and_the_command(api, people, judged):
    scenario, _ = judged
    manager = api(people["manager"])
    for table in ("bradley_terry", "elo", "win_matrix", "position_bias", "judges", "agreement"):
        response = manager.get(f"/api/scenarios/{scenario.pk}/analytics/{table}.csv?resamples=20")
        assert response.status_code == 200, table
        rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
        assert rows, table
    out = io.StringIO()
    call_command("analyze", scenario.name, "--json", "--resamples", "20", stdout=out)
    printed = json.loads(out.getvalue())
    api_data = manager.get(f"/api/scenarios/{scenario.pk}/analytics?resamples=20").json()
    assert printed["bradley_terry"] == api_data["bradley_terry"]
    out = io.StringIO()
    call_command("analyze", str(scenario.pk), "--resamples", "0", stdout=out)
    assert json.loads(out.getvalue())["scenario"]["id"] == scenario.pk
    with pytest.raises(Exception, match="No scenario"):
        call_command("analyze", "nope", stdout=io.StringIO())


def test_the_analytics_page(people, judged):
    scenario, _ = judged
    client = Client()
    client.force_login(people["viewer"])
    page = client.get(f"/scenarios/{scenario.pk}/analytics")
    html = page.content.decode()
    assert page.status_code == 200 and "Bradley" in html and "plotly" in html
    assert "cdn" not in html.lower()
    # The page opens on the answer: a summary before the tables, then a section list.
    summary = html.split('id="summary"', 1)[1].split("</section>", 1)[0]
    assert html.index('id="summary"') < html.index('id="models"')
    assert "<h2>Summary</h2>" in summary and "data-toc" in summary
    result = client.get(f"/api/scenarios/{scenario.pk}/analytics").json()
    ranked = result["by_model"]["bradley_terry"]
    first = ranked[0]
    assert f"<li>{first['variant']} <small>strength" in summary
    lead = ranked[0]["ci_low"] > ranked[1]["ci_high"]
    assert ("leads: its 95% interval is clear" in summary) is lead
    assert ("No clear leader yet" in summary) is not lead
    outsider = Client()
    outsider.force_login(people["outsider"])
    assert outsider.get(f"/scenarios/{scenario.pk}/analytics").status_code == 404


def test_adaptive_tasks_are_added_and_taken_up_by_judges(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {"pairing": "across"})
    before = scenario.tasks.count()
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    run(
        api(people["manager"])
        .post(f"/api/judges/{judge['id']}/run", {}, format="json")
        .json()["job"]
    )
    url = f"/api/scenarios/{scenario.pk}/adaptive-tasks"
    added = api(people["manager"]).post(url, {"count": 5}, format="json")
    assert added.status_code == 201 and added.json()["added"] == 5
    new = scenario.tasks.order_by("position")[before:]
    assert len(new) == 5 and all(t.variant_a_id != t.variant_b_id for t in new)
    # The judge takes them up as unjudged tasks.
    again = api(people["manager"]).post(f"/api/judges/{judge['id']}/run", {}, format="json")
    assert again.status_code == 201 and again.json()["calls"] == 5
    for body in ({"count": 0}, {"count": "x"}, {}):
        assert api(people["manager"]).post(url, body, format="json").status_code == 400
    assert api(people["viewer"]).post(url, {"count": 1}, format="json").status_code == 403
    assert api(people["outsider"]).post(url, {"count": 1}, format="json").status_code == 404


@pytest.mark.parametrize(
    ("kind", "config"),
    [
        ("comparison", {}),
        ("rating", {"dimensions": [{"name": "x"}]}),
        ("ranking", {}),
        ("labeling", {"labels": ["a", "b"]}),
    ],
)
def test_a_scenario_without_judgments_has_empty_analytics(api, people, team_a, kind, config):
    scenario = make_scenario(people, team_a, kind, config)
    response = api(people["viewer"]).get(f"/api/scenarios/{scenario.pk}/analytics")
    assert response.status_code == 200 and response.json()["raters"]["judgments"] == 0
    client = Client()
    client.force_login(people["viewer"])
    assert client.get(f"/scenarios/{scenario.pk}/analytics").status_code == 200
    csv_response = api(people["manager"]).get(f"/api/scenarios/{scenario.pk}/analytics/judges.csv")
    assert csv_response.status_code == 200


def test_rankings_and_labels_analytics_from_a_judge(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "ranking", {})
    judge = create_judge(api, people["manager"], scenario, name="R", model=mock_judge.pk, swap=True)
    run(
        api(people["manager"])
        .post(f"/api/judges/{judge['id']}/run", {}, format="json")
        .json()["job"]
    )
    data = api(people["viewer"]).get(f"/api/scenarios/{scenario.pk}/analytics?resamples=20").json()
    rankings = data["rankings"]
    assert len(rankings["mean_rank"]) == 9 and rankings["kendall_w_tasks"] == 3
    assert rankings["kendall_w_mean"] == 1.0  # at temperature 0 both orders agree
    assert len(rankings["by_model"]) == 3 and data["bradley_terry"]
    # The models lead, as for comparisons; bootstrapped by whole rankings.
    assert data["by_model"]["bradley_terry"] == rankings["by_model"]
    assert data["by_model"]["intervals"] == "bootstrap of whole rankings"
    assert data["by_model"]["judgments"] == 6
    assert data["raters"]["filter"] == "all"  # no people's judgments: everyone's
    labeled = make_scenario(people, team_a, "labeling", {"labels": ["good", "bad"]})
    judge = create_judge(api, people["manager"], labeled, name="L", model=mock_judge.pk)
    run(
        api(people["manager"])
        .post(f"/api/judges/{judge['id']}/run", {}, format="json")
        .json()["job"]
    )
    labels = api(people["viewer"]).get(f"/api/scenarios/{labeled.pk}/analytics").json()["labels"]
    assert sum(labels["overall"].values()) == 9


def test_the_scenario_page_adds_adaptive_pairs(api, people, team_a, mock_judge):
    scenario = make_scenario(people, team_a, "comparison", {})
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk)
    run(
        api(people["manager"])
        .post(f"/api/judges/{judge['id']}/run", {}, format="json")
        .json()["job"]
    )
    before = scenario.tasks.count()
    manager = Client()
    manager.force_login(people["manager"])
    assert (
        "Add the most informative pairs"
        in manager.get(f"/scenarios/{scenario.pk}").content.decode()
    )
    done = manager.post(f"/scenarios/{scenario.pk}/adaptive-tasks", {"count": "4"}, follow=True)
    assert "4 comparison tasks added" in done.content.decode()
    assert scenario.tasks.count() == before + 4
    bad = manager.post(f"/scenarios/{scenario.pk}/adaptive-tasks", {"count": "lots"}, follow=True)
    assert "A number of pairs" in bad.content.decode() and scenario.tasks.count() == before + 4
    viewer = Client()
    viewer.force_login(people["viewer"])
    assert (
        viewer.post(f"/scenarios/{scenario.pk}/adaptive-tasks", {"count": "1"}).status_code == 403
    )


def test_the_judges_table_shows_each_providers_thinking_setting(api, people, judged):
    scenario, _ = judged
    settings = {
        "Claude": ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, None),
        "Gemini budget": (
            {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}, "topP": 0.9}},
            {"thinkingBudget": 0},
        ),
        "Gemini level": ({"thinkingConfig": {"thinkingLevel": "low"}}, {"thinkingLevel": "low"}),
        "OpenAI": ({"reasoning_effort": "high"}, {"reasoning_effort": "high"}),
        "OpenAI responses": ({"reasoning": {"effort": "minimal"}}, {"reasoning_effort": "minimal"}),
        "Plain": ({"top_p": 0.5}, None),
    }
    model = scenario.judges.get().llm_model_id
    for name, (params, _) in settings.items():
        create_judge(api, people["manager"], scenario, name=name, model=model, params=params)
    data = api(people["viewer"]).get(f"/api/scenarios/{scenario.pk}/analytics?resamples=0")
    assert data.status_code == 200
    shown = {row["name"]: row["thinking"] for row in data.json()["judges"]}
    expected = {name: want or params.get("thinking") for name, (params, want) in settings.items()}
    assert shown == {"J": None, **expected}
    assert shown["Claude"] == {"type": "enabled", "budget_tokens": 1024}
