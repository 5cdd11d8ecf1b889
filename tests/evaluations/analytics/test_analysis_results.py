"""Analyses are computed once per state of the judgments: small ones in the request, large
ones by a worker while the API answers 202 (then the last result), queued once however many
ask; new judgments make a result stale."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from evalplatform.accounts.roles import Role
from evaluations.analytics import pipeline, results
from evaluations.models import AnalysisStatus, StoredAnalysis
from tests.helpers.evaluations import comparison_scenario, import_rows

ITEMS = {f"q{k}": {"a": "model-a", "b": "model-b"} for k in range(6)}


def judged(manager, team, name="Stored"):
    scenario = comparison_scenario(manager, team, name, ITEMS)
    rows = [[item, "a", "b", "A" if k % 3 else "B", rater] for k, item in enumerate(ITEMS)
            for rater in ("ann", "bob")]  # fmt: skip
    import_rows(manager, scenario, rows)
    return scenario


@pytest.mark.django_db
def test_a_small_analysis_is_computed_in_the_request_once(api, member, team_a):
    manager = member(team_a, Role.MANAGER)
    scenario = judged(manager, team_a)
    url = f"/api/scenarios/{scenario.pk}/analytics?resamples=50"
    first = api(manager).get(url)
    assert first.status_code == 200
    body = first.json()
    assert body["analysis"]["fresh"] is True and body["analysis"]["judgments"] == 12
    assert body["by_model"]["bradley_terry"][0]["variant"] == "model-a"
    stored = StoredAnalysis.objects.get(scenario=scenario)
    computed_at = stored.computed_at
    assert (
        api(manager).get(url).json()["analysis"]["computed_at"] == body["analysis"]["computed_at"]
    )
    stored.refresh_from_db()
    assert stored.computed_at == computed_at  # not recomputed
    # Other options are another analysis.
    api(manager).get(url + "&seed=3")
    assert StoredAnalysis.objects.filter(scenario=scenario).count() == 2
    # A new judgment makes it stale: computed again.
    import_rows(manager, scenario, [["q0", "b", "a", "A", "cy"]])
    again = api(manager).get(url).json()
    assert again["analysis"]["fresh"] and again["analysis"]["judgments"] == 13
    assert again["raters"]["judgments"] == 13


@pytest.mark.django_db
def test_a_large_analysis_is_computed_by_a_worker_and_queued_once(
    api, member, team_a, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(results, "INLINE_WORK", 0)
    manager = member(team_a, Role.MANAGER)
    viewer = member(team_a, Role.VIEWER)
    scenario = judged(manager, team_a)
    url = f"/api/scenarios/{scenario.pk}/analytics?resamples=50"
    with django_capture_on_commit_callbacks() as queued:
        answers = [api(user).get(url) for user in (manager, manager, viewer)]
    assert [a.status_code for a in answers] == [202, 202, 202]
    pending = answers[0].json()
    assert pending["status_url"].endswith(url) and pending["analysis"]["status"] == "pending"
    assert answers[0]["Retry-After"] == "2"
    assert len(queued) == 1  # one task, however many asked
    table = api(manager).get(
        f"/api/scenarios/{scenario.pk}/analytics/bradley_terry.csv?resamples=50"
    )
    assert table.status_code == 202
    page = _browser(manager).get(f"/scenarios/{scenario.pk}/analytics?resamples=50")
    assert page.status_code == 202
    assert "Computing the analysis of 12 judgments" in page.content.decode()
    assert 'http-equiv="refresh"' in page.content.decode()

    # The worker runs the task; while it runs, the page and the API show how far it got.
    stored = StoredAnalysis.objects.get(scenario=scenario)
    seen = {}
    real_stability = pipeline.stability

    def watched(*args, **kwargs):
        seen["api"] = api(manager).get(url).json()["analysis"]
        seen["page"] = _browser(manager).get(f"/scenarios/{scenario.pk}/analytics?resamples=50")
        return real_stability(*args, **kwargs)

    monkeypatch.setattr(pipeline, "stability", watched)
    results.compute(stored.pk)
    assert seen["api"]["status"] == "running"
    assert seen["api"]["stage"] == "repeat-call stability" and seen["api"]["progress"] == 0.6
    assert "60% done: repeat-call stability" in seen["page"].content.decode()
    done = api(manager).get(url)
    assert done.status_code == 200 and done.json()["analysis"]["fresh"] is True
    assert done.json()["analysis"]["status"] == AnalysisStatus.DONE
    csv = api(manager).get(f"/api/scenarios/{scenario.pk}/analytics/bradley_terry.csv?resamples=50")
    assert csv.status_code == 200 and b"q0/a" in b"".join(csv.streaming_content)

    # New judgments: the last result at once, marked stale, and one recomputation queued.
    import_rows(manager, scenario, [["q0", "b", "a", "A", "cy"]])
    with django_capture_on_commit_callbacks() as queued:
        stale = [api(manager).get(url) for _ in range(3)]
    assert all(s.status_code == 200 for s in stale)
    assert stale[0].json()["analysis"]["fresh"] is False
    assert stale[0].json()["analysis"]["judgments"] == 12
    assert stale[0].json()["analysis"]["judgments_now"] == 13
    assert len(queued) == 1
    page = (
        _browser(manager).get(f"/scenarios/{scenario.pk}/analytics?resamples=50").content.decode()
    )
    assert "There are 13 judgments now: the analysis is being computed again" in page
    results.compute(stored.pk)
    fresh = api(manager).get(url).json()
    assert fresh["analysis"]["fresh"] is True and fresh["raters"]["judgments"] == 13


@pytest.mark.django_db
def test_a_lost_computation_is_queued_again(
    api, member, team_a, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(results, "INLINE_WORK", 0)
    manager = member(team_a, Role.MANAGER)
    scenario = judged(manager, team_a)
    url = f"/api/scenarios/{scenario.pk}/analytics?resamples=50"
    with django_capture_on_commit_callbacks() as queued:
        api(manager).get(url)
        api(manager).get(url)
    assert len(queued) == 1
    # The worker died with it: long after, the next request queues it again.
    long_ago = timezone.now() - results.LOST_AFTER - timedelta(seconds=1)
    StoredAnalysis.objects.filter(scenario=scenario).update(
        status=AnalysisStatus.RUNNING, started_at=timezone.now()
    )
    with django_capture_on_commit_callbacks() as queued:
        assert api(manager).get(url).status_code == 202
    assert not queued  # running, and not for long
    StoredAnalysis.objects.filter(scenario=scenario).update(started_at=long_ago)
    with django_capture_on_commit_callbacks() as queued:
        assert api(manager).get(url).status_code == 202
    assert len(queued) == 1


@pytest.mark.django_db
def test_another_teams_analysis_is_a_404(api, member, team_a, team_b):
    manager = member(team_a, Role.MANAGER)
    scenario = judged(manager, team_a)
    outsider = member(team_b, Role.MANAGER)
    assert api(outsider).get(f"/api/scenarios/{scenario.pk}/analytics").status_code == 404
    assert not StoredAnalysis.objects.exists()


def _section(html: str, name: str) -> str:
    """The page's section of that id, up to the next section."""
    start = html.index(f'id="{name}"')
    return html[start : html.find("<section", start)]


def _browser(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_a_failed_analysis_is_a_503_and_stores_no_nan(api, member, team_a, monkeypatch):
    manager = member(team_a, Role.MANAGER)
    scenario = judged(manager, team_a)
    url = f"/api/scenarios/{scenario.pk}/analytics?resamples=20"

    def broken(*args, **kwargs):
        raise ValueError("no luck")

    monkeypatch.setattr(results, "analyze", broken)
    failed = api(manager).get(url)
    assert failed.status_code == 503
    assert failed.json()["analysis"]["error"] == "ValueError: no luck"
    page = _browser(manager).get(f"/scenarios/{scenario.pk}/analytics?resamples=20")
    assert page.status_code == 503 and "The analysis failed" in page.content.decode()
    # NaN and infinities are stored as null (PostgreSQL's JSON refuses them).
    monkeypatch.setattr(
        results, "analyze", lambda *a, **k: {"raters": {"judgments": 12}, "x": [float("nan")]}
    )
    import_rows(manager, scenario, [["q0", "b", "a", "A", "cy"]])
    body = api(manager).get(url).json()
    assert body["x"] == [None] and body["analysis"]["fresh"] is True


@pytest.mark.django_db
def test_the_page_leads_with_the_models_and_pages_the_outputs(member, team_a):
    manager = member(team_a, Role.MANAGER)
    items = {f"item-{k:02d}": {"a": "Alpha", "b": "Beta", "c": "Gamma"} for k in range(40)}
    scenario = comparison_scenario(manager, team_a, "Many outputs", items)
    rows = [
        [item, first, second, "A", rater]
        for item in items
        for first, second in (("a", "b"), ("b", "c"), ("a", "c"))
        for rater in ("ann", "bob")
    ]
    rows[0][3] = "B"  # Beta wins once: no model is unbeaten
    import_rows(manager, scenario, rows)
    url = f"/scenarios/{scenario.pk}/analytics?resamples=20"
    html = _browser(manager).get(url).content.decode()
    # The models first, then the 120 outputs by item and model, 50 to a page.
    assert html.index("Models, prompts") < html.index("strengths of each output")
    models = html[html.index("Models, prompts") : html.index("strengths of each output")]
    assert models.index("Alpha") < models.index("Beta") < models.index("Gamma")
    assert "From people&#x27;s judgments" in html
    outputs = _section(html, "outputs")
    assert "1\u201350 of 120" in outputs and "item-00" in outputs and "item-39" not in outputs
    last = _browser(manager).get(url + "&outputs_page=3").content.decode()
    assert "101\u2013120 of 120" in _section(last, "outputs")
    assert "item-39" in _section(last, "outputs")
    found = _browser(manager).get(url + "&q=item-07+gamma").content.decode()
    table = _section(found, "outputs")
    assert "1 output matching" in table and table.count("<tr><td>item-07</td>") == 1
    assert "Gamma" in table and "Alpha" not in table
    assert _section(found, "elo").count("<tr><td>item-07</td>") == 1  # the search is the page's
    # The search and the page number are not options: one stored analysis serves them all.
    assert StoredAnalysis.objects.filter(scenario=scenario).count() == 1


@pytest.mark.django_db
def test_configurations_are_ranked_when_they_tell_more_than_models_or_prompts(api, member, team_a):
    import json

    from scenarios import services as scenario_services

    manager = member(team_a, Role.MANAGER)
    made = {"a": ("Alpha", "short"), "b": ("Alpha", "long"), "c": ("Beta", "short"),
            "d": ("Beta", "long")}  # fmt: skip
    rows = [
        {"item_id": f"q{k}", "variant_id": v, "content": f"{v} {k}", "model": m, "prompt": p}
        for k in range(5)
        for v, (m, p) in made.items()
    ]
    scenario = scenario_services.scenario_from_upload(
        user=manager,
        team=team_a,
        data={"name": "Grid", "type": "comparison", "config": {}, "format": "jsonl"},
        raw="\n".join(json.dumps(r) for r in rows).encode(),
    )
    # "b" (Alpha, long) beats everything; "c" (Beta, short) loses to everything.
    order = ["b", "a", "d", "c"]
    judged = [
        [f"q{k}", x, y, "A" if order.index(x) < order.index(y) else "B", rater]
        for k in range(5)
        for x, y in (("a", "b"), ("c", "d"), ("a", "c"), ("b", "d"), ("a", "d"), ("b", "c"))
        for rater in ("ann", "bob")
    ]
    judged[0][3] = "A"  # a beats b once: nobody is unbeaten
    import_rows(manager, scenario, judged)
    body = api(manager).get(f"/api/scenarios/{scenario.pk}/analytics?resamples=50").json()
    configurations = body["by_configuration"]["bradley_terry"]
    assert [r["variant"] for r in configurations] == [
        "Alpha · long",
        "Alpha · short",
        "Beta · long",
        "Beta · short",
    ]
    assert configurations[0]["win_rate"] > 0.9 and configurations[-1]["win_rate"] == 0.0
    assert [r["variant"] for r in body["by_model"]["bradley_terry"]] == ["Alpha", "Beta"]
    table = api(manager).get(
        f"/api/scenarios/{scenario.pk}/analytics/by_configuration.csv?resamples=50"
    )
    text = b"".join(table.streaming_content).decode()
    assert text.splitlines()[0].startswith("configuration,") and "Alpha · long" in text
    page = _browser(manager).get(f"/scenarios/{scenario.pk}/analytics?resamples=50")
    models = _section(page.content.decode(), "models")
    assert "Configurations" in models and "Beta · short" in models
