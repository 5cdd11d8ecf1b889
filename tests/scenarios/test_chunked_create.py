"""A scenario's items, variants and tasks are written a chunk per transaction (issue 35):
another team writes between the chunks, the scenario is no one's to see or open until all
of it is written, a failure mid-way leaves nothing, and what a dead writer left is deleted
by the scheduled sweep an hour on."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule

from evalplatform import bulk
from evalplatform.runs import tasks
from scenarios import services
from scenarios.models import Scenario, ScenarioItem, Task, Variant
from tests.helpers.evaluations import make_scenario
from tests.helpers.writes import other_team_writes

pytestmark = pytest.mark.django_db(transaction=True)

PAIRS = {"pairing": "within_item", "reverse_share": 0.5}


class Killed(BaseException):
    """The process ends here (not an error its code could catch and clean up after)."""


def test_a_scenario_is_written_in_chunks_and_seen_only_whole(people, team_a, api, monkeypatch):
    monkeypatch.setattr(services, "WRITE_CHUNK", 2)
    manager, outsider = people["manager"], people["outsider"]
    seen: list[tuple[int, bool, bool]] = []

    def between() -> None:
        made = Scenario.all_objects.get(team=team_a)
        hidden = api(manager).get(f"/api/scenarios/{made.pk}").status_code == 404
        listed = made.pk in [s["id"] for s in api(manager).get("/api/scenarios").json()["results"]]
        seen.append((Task.objects.filter(scenario=made).count(), hidden and not listed,
                     other_team_writes(outsider)))  # fmt: skip

    monkeypatch.setattr(bulk, "between_chunks", between)
    scenario = make_scenario(people, team_a, "comparison", PAIRS)
    # 3 items x 3 answers: 9 variants, 9 pairs and 4 or 5 reverses, 2 rows a chunk.
    assert len(seen) > 10 and all(hidden and wrote for _, hidden, wrote in seen)
    assert [tasks for tasks, _, _ in seen][-1] == scenario.tasks.count()
    assert not scenario.writing
    reverses = scenario.tasks.filter(reverse_of__isnull=False)
    assert reverses.count() == round(9 * 0.5)
    for task in reverses:
        original = task.reverse_of
        assert (task.variant_a_id, task.variant_b_id) == (
            original.variant_b_id,
            original.variant_a_id,
        )
    assert api(manager).get(f"/api/scenarios/{scenario.pk}").status_code == 200
    opened = api(manager).post(f"/api/scenarios/{scenario.pk}/open")
    assert opened.status_code == 200, opened.json()


def test_a_scenario_that_fails_mid_way_leaves_nothing(people, team_a, monkeypatch):
    monkeypatch.setattr(services, "WRITE_CHUNK", 2)
    calls = {"n": 0}

    def failing() -> None:
        calls["n"] += 1
        if calls["n"] == 7:  # among the tasks, reverse links not yet set
            raise RuntimeError("the disk is full")

    monkeypatch.setattr(bulk, "between_chunks", failing)
    with pytest.raises(RuntimeError):
        make_scenario(people, team_a, "comparison", PAIRS)
    assert not Scenario.all_objects.exists()
    assert not (ScenarioItem.objects.exists() or Variant.objects.exists() or Task.objects.exists())


def test_what_a_dead_writer_left_is_deleted_an_hour_on(people, team_a, api, monkeypatch):
    monkeypatch.setattr(services, "WRITE_CHUNK", 2)

    def dying() -> None:
        raise Killed

    monkeypatch.setattr(bulk, "between_chunks", dying)
    monkeypatch.setattr(services, "discard", lambda scenario_id: None)  # the process is gone
    with pytest.raises(Killed):
        make_scenario(people, team_a, "comparison", PAIRS)
    monkeypatch.undo()
    left = Scenario.all_objects.get()
    assert left.writing and not Scenario.objects.exists()
    manager = people["manager"]
    assert api(manager).get(f"/api/scenarios/{left.pk}").status_code == 404
    assert api(manager).post(f"/api/scenarios/{left.pk}/open").status_code == 404
    # Its name is still taken: another scenario of that name is a clear error, not a crash.
    again = api(manager).post(
        "/api/scenarios",
        {"team": team_a.slug, "name": left.name, "type": "labeling", "format": "jsonl",
         "content": '{"item_id": "q", "variant_id": "v", "content": "x"}',
         "config": {"labels": ["yes", "no"]}},
        format="json",
    )  # fmt: skip
    assert again.status_code == 400 and "name" in again.json()["errors"], again.json()
    assert services.discard_abandoned() == []  # its writer may still be at it
    Scenario.all_objects.filter(pk=left.pk).update(
        created_at=timezone.now() - services.ABANDONED_AFTER - timedelta(minutes=1)
    )
    assert services.discard_abandoned() == [left.pk]
    assert not Scenario.all_objects.exists() and not ScenarioItem.objects.exists()
    # Its schedule: the migration's row (an earlier test's flush may have removed it).
    importlib.import_module("scenarios.migrations.0009_discard_abandoned_schedule").schedule(
        apps, None
    )
    assert Schedule.objects.filter(func=tasks.path(services.discard_abandoned)).exists()
    call_command("check", "--database", "default")  # its path resolves
