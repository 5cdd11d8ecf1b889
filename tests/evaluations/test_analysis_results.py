"""Analyses are computed once per state of the judgments: small ones in the request, large
ones by a worker while the API answers 202 (then the last result), queued once however many
ask; new judgments make a result stale."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from evalplatform.accounts.roles import Role
from evaluations.analytics import results
from evaluations.models import AnalysisStatus, StoredAnalysis
from tests.evaluations.test_analytics_reference import comparison_scenario, import_rows

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

    # The worker runs the task.
    stored = StoredAnalysis.objects.get(scenario=scenario)
    results.compute(stored.pk)
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
