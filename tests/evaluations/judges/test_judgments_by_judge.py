"""``GET /api/evaluations/judgments?scenario=&judge=`` lists one judge's verdicts (issue 37,
item 6: the filter was silently ignored); a judge id that is not a number is a 400 on
``judge``."""

from __future__ import annotations

import pytest

from evaluations.models import Judgment
from tests.helpers.evaluations import create_judge, make_scenario, run_judge

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/api/evaluations/judgments"


@pytest.fixture
def two_judges(api, people, team_a, mock_judge):
    """A comparison scenario of nine tasks, judged by two mock judges, First and Second."""
    scenario = make_scenario(people, team_a, "comparison", {"ties": True})
    judges = [
        create_judge(api, people["manager"], scenario, name=name, model=mock_judge.pk)
        for name in ("First", "Second")
    ]
    for judge in judges:
        run_judge(api, people["manager"], judge)
    return scenario, judges


def test_one_judges_verdicts(api, people, two_judges):
    scenario, judges = two_judges
    everyone = api(people["viewer"]).get(LIST, {"scenario": scenario.pk}).json()
    assert everyone["count"] == Judgment.objects.filter(scenario=scenario).count() == 18
    for judge in judges:
        found = api(people["viewer"]).get(LIST, {"scenario": scenario.pk, "judge": judge["id"]})
        rows = found.json()["results"]
        assert found.status_code == 200 and len(rows) == 9
        assert {r["judge"] for r in rows} == {judge["id"]}
        assert {r["rater"] for r in rows} == {judge["name"]}
    refused = api(people["viewer"]).get(LIST, {"scenario": scenario.pk, "judge": "First"})
    assert refused.status_code == 400 and "judge" in refused.json()["errors"]
    assert (
        api(people["viewer"]).get(LIST, {"scenario": scenario.pk, "judge": 999999}).json()["count"]
        == 0
    )


def test_one_judges_results_exported_on_their_own(api, people, two_judges):
    """``POST /api/scenarios/{id}/export/csv?judge=`` (and ``/json``): one judge's
    judgments, the people's and the other judge's left out; a judge of no such id (or of
    another scenario) is a 400 on ``judge``."""
    import csv
    import io
    import json

    scenario, judges = two_judges
    manager = people["manager"]
    url = f"/api/scenarios/{scenario.pk}/export"
    whole = api(manager).post(f"{url}/csv")
    assert whole.status_code == 200
    everyone = list(csv.DictReader(io.StringIO(b"".join(whole.streaming_content).decode())))
    assert len(everyone) == 18
    first = judges[0]
    one = api(manager).post(f"{url}/csv?judge={first['id']}")
    assert one.status_code == 200 and f"-judge-{first['id']}.csv" in one["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(one.streaming_content).decode())))
    assert len(rows) == 9 and {r["rater"] for r in rows} == {"First"}
    assert list(rows[0]) == list(everyone[0])  # the same columns
    as_json = api(manager).post(f"{url}/json?judge={first['id']}")
    records = json.loads(b"".join(as_json.streaming_content))["judgments"]
    assert len(records) == 9 and {r["judge"] for r in records} == {first["id"]}
    for bad in ("First", "999999"):
        refused = api(manager).post(f"{url}/csv?judge={bad}")
        assert refused.status_code == 400 and "judge" in refused.json()["errors"], bad


def test_one_runs_results_exported_on_their_own(api, people, two_judges, mock_judge):
    """``?run=<id>``: the judgments of one run of a judge (its first run over four tasks,
    its second over the rest); a run of another judge than ``judge``, or of no judge of the
    scenario, is a 400 on ``run``."""
    import csv
    import io

    from evaluations.models import JudgeRun

    scenario, judges = two_judges
    manager = people["manager"]
    third = create_judge(api, manager, scenario, name="Third", model=mock_judge.pk)
    tasks = list(scenario.tasks.order_by("pk").values_list("pk", flat=True))
    run_judge(api, manager, third, tasks=tasks[:4])
    run_judge(api, manager, third)  # the unjudged rest
    runs = list(JudgeRun.objects.filter(judge_id=third["id"]).order_by("pk"))
    assert len(runs) == 2
    url = f"/api/scenarios/{scenario.pk}/export"
    seen = []
    for run in runs:
        one = api(manager).post(f"{url}/csv?run={run.pk}")
        assert one.status_code == 200 and f"-run-{run.pk}.csv" in one["Content-Disposition"]
        rows = list(csv.DictReader(io.StringIO(b"".join(one.streaming_content).decode())))
        assert {r["rater"] for r in rows} == {"Third"}
        seen.append({int(r["task_id"]) for r in rows})
    assert seen == [set(tasks[:4]), set(tasks[4:])]
    other = JudgeRun.objects.filter(judge_id=judges[1]["id"]).first()
    for query in (f"run={other.pk}&judge={third['id']}", "run=999999", "run=x"):
        refused = api(manager).post(f"{url}/json?{query}")
        assert refused.status_code == 400 and "run" in refused.json()["errors"], query
