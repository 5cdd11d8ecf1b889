"""The batch registry across jobs (``GET /api/generation/batches`` and ``.csv``) over batches
really submitted to the fake provider's batch APIs: rows, every filter, pages, the CSV and
its formula safety, who sees what, bad filter values; and the per-job list, now paginated."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Sum
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import Role
from evalplatform.providers.fake import run_in_thread
from evalplatform.providers.models import ProviderConnection
from evalplatform.runs.models import BatchState, ProviderBatch
from generation import batch_registry, selectors
from generation.models import GenerationOutput, JobStatus
from tests.factories import TeamFactory, UserFactory
from tests.helpers.accounts import add_member, api_client, committed_rows
from tests.helpers.generation import JOBS, batch_job, drive_until_done, model_for

REGISTRY = "/api/generation/batches"
SECRET = "sk-registry-secret-0123456789"
FORMULA = '=HYPERLINK("http://evil.example","x")'


def build_world(creator, team_a, team_b, fake):
    """Team A: an OpenAI job whose flaky rows went to a second round (two batches), then an
    Anthropic job with a formula for a name (one batch); team B: one OpenAI job. Every batch
    submitted to, run by and recorded from the fake provider (``fake``, its batches done at
    once). The submission times are then pinned (10, 11 and 12 January) so the date filters
    have something to tell apart. The ids of what the tests read."""
    fake.config.batch_duration_s = 0
    openai = model_for(team_a, fake, "openai")
    openai.connection.set_api_key(SECRET)
    openai.connection.save()
    anthropic = model_for(team_a, fake, "anthropic")
    flaky = batch_job(
        api_client, creator, team_a, openai, ["fine", "flaky [[fault:500*1]]", "bad [[fault:400]]"]
    )
    assert drive_until_done(flaky).status == JobStatus.COMPLETED
    named = batch_job(api_client, creator, team_a, anthropic, ["one"], name=FORMULA)
    assert drive_until_done(named).status == JobStatus.COMPLETED
    other = add_member(team_b, Role.CREATOR, username="bravo-creator")
    other_job = batch_job(api_client, other, team_b, model_for(team_b, fake), ["b"])
    assert drive_until_done(other_job).status == JobStatus.COMPLETED

    first, second = ProviderBatch.objects.filter(work_id=flaky).order_by("round")
    (single,) = ProviderBatch.objects.filter(work_id=named)
    (foreign,) = ProviderBatch.objects.filter(work_id=other_job)
    ProviderBatch.objects.filter(pk=first.pk).update(submitted_at="2026-01-10T12:00:00Z")
    ProviderBatch.objects.filter(pk=second.pk).update(submitted_at="2026-01-11T08:00:00Z")
    ProviderBatch.objects.filter(pk=single.pk).update(submitted_at="2026-01-12T23:30:00Z")
    ProviderBatch.objects.filter(pk=foreign.pk).update(submitted_at="2026-01-12T10:00:00Z")
    return {
        "user": creator.pk,
        "other": other.pk,
        "team_a": team_a.pk,
        "jobs": {"flaky": flaky, "named": named, "other": other_job},
        "batches": {
            "first": first.pk,
            "second": second.pk,
            "single": single.pk,
            "foreign": foreign.pk,
        },
        "connections": {"openai": openai.connection.pk, "anthropic": anthropic.connection.pk},
    }


@pytest.fixture(scope="class")
def one_world(django_db_setup, django_db_blocker):
    """``build_world`` once for ``TestOneWorld``, committed (the batch runner reads it from
    threads), on a fake provider of its own; the database is emptied after the class."""
    with run_in_thread() as fake, committed_rows(django_db_blocker):
        team_a = TeamFactory(name="Team A", slug="team-a")
        team_b = TeamFactory(name="Team B", slug="team-b")
        creator = add_member(team_a, Role.CREATOR, username="cora")
        yield build_world(creator, team_a, team_b, fake), fake.app.batches.batches


def listed(api, user, query=""):
    response = api(user).get(f"{REGISTRY}{query}")
    assert response.status_code == 200, response.content
    return response.json()


def ids(api, user, query=""):
    return [row["id"] for row in listed(api, user, query)["results"]]


def csv_rows(api, user, query=""):
    response = api(user).get(f"{REGISTRY}.csv{query}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert 'filename="generation-batches.csv"' in response["Content-Disposition"]
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.mark.django_db
class TestOneWorld:
    """The tests of ``build_world``'s batches: they only read them or write in their own
    transaction, rolled back after each, so one world serves them all (``one_world``), its
    objects read afresh for each test."""

    @pytest.fixture
    def world(self, one_world):
        assert connection.in_atomic_block, "the shared world is for tests rolled back"
        ids, remote = one_world
        User = get_user_model()
        return {
            "user": User.objects.get(pk=ids["user"]),
            "other": User.objects.get(pk=ids["other"]),
            "jobs": dict(ids["jobs"]),
            "batches": {k: ProviderBatch.objects.get(pk=pk) for k, pk in ids["batches"].items()},
            "connections": {
                k: ProviderConnection.objects.get(pk=pk) for k, pk in ids["connections"].items()
            },
            "remote": remote,
        }

    @pytest.fixture
    def team_a(self, one_world):
        return Team.objects.get(pk=one_world[0]["team_a"])

    def test_every_batch_of_the_users_teams_newest_first_with_what_resuming_needs(self, api, world):
        b = world["batches"]
        body = listed(api, world["user"])
        assert body["count"] == 3 and body["next"] is None
        rows = body["results"]
        assert [r["id"] for r in rows] == [b["single"].pk, b["second"].pk, b["first"].pk]
        assert all(list(r) == list(batch_registry.COLUMNS) for r in rows)

        first = {r["id"]: r for r in rows}[b["first"].pk]
        row = ProviderBatch.objects.get(pk=b["first"].pk)
        assert first["remote_id"] == row.remote_id and row.remote_id in world["remote"]
        assert first["input_file_id"] == row.input_file_id != ""  # OpenAI's uploaded JSONL
        assert first | {"remote_id": None, "input_file_id": None, "created_at": None} == {
            "id": row.pk,
            "job_id": world["jobs"]["flaky"],
            "job_name": "Batch study",
            "team": "team-a",
            "provider": "openai",
            "connection_id": world["connections"]["openai"].pk,
            "connection_name": "openai-fake",
            "model": "gpt-fake",
            "name": row.name,
            "remote_id": None,
            "input_file_id": None,
            "state": "completed",
            "provider_state": row.provider_state,
            "round": 1,
            "request_count": 6,
            # The provider's counts: the flaky and the bad rows failed in it ...
            "succeeded": 2,
            "failed": 4,
            # ... the cells': the flaky rows left it for round 2, the bad rows failed for good.
            "cells_completed": 2,
            "cells_failed": 2,
            "cost_usd": first["cost_usd"],
            "submitted_bytes": row.submitted_bytes,
            "error_message": "",
            "created_at": None,
            "submitted_at": "2026-01-10T12:00:00Z",
            "ended_at": first["ended_at"],
            "closed_at": first["closed_at"],
            "prompts": first["prompts"],
            "reasoning": "",
            "direction": "",
        }
        assert first["ended_at"] and first["closed_at"] and row.submitted_bytes > 0
        assert first["prompts"].startswith("prompt-") and first["prompts"].endswith(" v1")
        second = {r["id"]: r for r in rows}[b["second"].pk]
        assert (second["round"], second["request_count"], second["cells_completed"]) == (2, 2, 2)
        single = {r["id"]: r for r in rows}[b["single"].pk]
        assert (single["provider"], single["model"], single["job_name"]) == (
            "anthropic",
            "claude-fake",
            FORMULA,
        )
        # The cost is that of the cells whose results the batch gave, and adds up to the jobs'.
        for key in ("first", "second", "single"):
            spent = GenerationOutput.objects.filter(batch_id=b[key].pk).aggregate(s=Sum("cost_usd"))
            assert Decimal(next(r for r in rows if r["id"] == b[key].pk)["cost_usd"]) == spent["s"]
        assert sum(Decimal(r["cost_usd"]) for r in rows) > 0

    def test_no_key_and_no_other_teams_batch_ever_shows(
        self, api, world, member, team_a, superuser
    ):
        for user in (world["user"], member(team_a, Role.VIEWER)):
            response = api(user).get(REGISTRY)
            assert SECRET not in response.content.decode()
            assert "bravo" not in response.content.decode()
            csv_body = b"".join(api(user).get(f"{REGISTRY}.csv").streaming_content).decode()
            assert SECRET not in csv_body and "bravo" not in csv_body
            assert world["batches"]["foreign"].pk not in ids(api, user)
        assert ids(api, world["other"]) == [world["batches"]["foreign"].pk]
        assert len(ids(api, superuser)) == 4

    def test_every_filter(self, api, world):
        b, jobs, user = world["batches"], world["jobs"], world["user"]
        openai, anthropic = world["connections"]["openai"], world["connections"]["anthropic"]
        expected = {
            f"?job={jobs['flaky']}": [b["second"], b["first"]],
            f"?job={jobs['named']}": [b["single"]],
            "?team=team-a": [b["single"], b["second"], b["first"]],
            "?provider=openai": [b["second"], b["first"]],
            "?provider=anthropic": [b["single"]],
            "?provider=gemini": [],
            "?provider=openai,anthropic": [b["single"], b["second"], b["first"]],
            f"?connection={openai.pk}": [b["second"], b["first"]],
            f"?connection={anthropic.pk}": [b["single"]],
            f"?connection={b['foreign'].connection_id}": [],  # another team's: nothing of it
            "?state=completed": [b["single"], b["second"], b["first"]],
            "?state=in_progress": [],
            "?state=failed,expired": [],
            # A date is the whole day, for since and for until.
            "?since=2026-01-11": [b["single"], b["second"]],
            "?until=2026-01-11": [b["second"], b["first"]],
            "?since=2026-01-11&until=2026-01-11": [b["second"]],
            "?since=2026-01-13": [],
            # Date-times are inclusive bounds; Z, an offset, or none (the server's zone, UTC).
            "?since=2026-01-11T08:00:00Z": [b["single"], b["second"]],
            "?since=2026-01-11T08:00:01Z": [b["single"]],
            "?until=2026-01-11T08:00:00": [b["second"], b["first"]],
            "?until=2026-01-11T09:59:59%2B02:00": [b["first"]],
            "?since=2026-01-10T12:00:00Z&until=2026-01-10T12:00:00Z": [b["first"]],
            f"?job={jobs['flaky']}&provider=openai&state=completed&since=2026-01-11": [b["second"]],
            f"?job={jobs['flaky']}&provider=anthropic": [],
        }
        for query, rows in expected.items():
            assert ids(api, user, query) == [row.pk for row in rows], query
            assert [int(r[0]) for r in csv_rows(api, user, query)[1:]] == [r.pk for r in rows], (
                query
            )

    def test_another_teams_job_is_a_404_like_a_missing_one(self, api, world):
        user, foreign_job = world["user"], world["jobs"]["other"]
        for path in (REGISTRY, f"{REGISTRY}.csv"):
            foreign = api(user).get(f"{path}?job={foreign_job}")
            missing = api(user).get(f"{path}?job=999999999")
            assert foreign.status_code == missing.status_code == 404
            assert foreign.json() == missing.json() == {"detail": "Not found."}
        # Its own creator and a superuser filter by it.
        assert ids(api, world["other"], f"?job={foreign_job}") == [world["batches"]["foreign"].pk]

    def test_a_deleted_jobs_batches_stay_listed_and_filterable(self, api, world):
        from generation.models import GenerationJob

        named, single = world["jobs"]["named"], world["batches"]["single"]
        GenerationJob.objects.filter(pk=named).delete()
        rows = listed(api, world["user"], f"?job={named}")["results"]
        assert [row["id"] for row in rows] == [single.pk] and rows[0]["job_name"] is None
        # Another team still cannot tell it from a missing job.
        assert api(world["other"]).get(f"{REGISTRY}?job={named}").status_code == 404

    def test_pages(self, api, world):
        b, user = world["batches"], world["user"]
        page = listed(api, user, "?page_size=2")
        assert page["count"] == 3 and page["previous"] is None and "page=2" in page["next"]
        assert [r["id"] for r in page["results"]] == [b["single"].pk, b["second"].pk]
        rest = listed(api, user, "?page_size=2&page=2")
        assert [r["id"] for r in rest["results"]] == [b["first"].pk] and rest["next"] is None
        assert api(user).get(f"{REGISTRY}?page=3&page_size=2").status_code == 404

    def test_the_csv_has_the_same_rows_formula_safe(self, api, world):
        user = world["user"]
        header, *lines = csv_rows(api, user)
        assert header == list(batch_registry.COLUMNS)
        json_rows = listed(api, user)["results"]
        assert len(lines) == len(json_rows) == 3
        for line, row in zip(lines, json_rows, strict=True):
            expected = ["" if v is None else str(v) for v in row.values()]
            if row["job_name"] == FORMULA:  # a spreadsheet shows it as text, never runs it
                expected[header.index("job_name")] = "'" + FORMULA
            assert line == expected
        assert "'" + FORMULA in [line[header.index("job_name")] for line in lines]
        assert not any(cell.startswith(("=", "+", "-", "@")) for line in lines for cell in line)

    def test_who_may_read_the_registry(self, api, world, member, team_a):
        for path in (REGISTRY, f"{REGISTRY}.csv"):
            assert api().get(path).status_code == 401
            assert api(member(team_a, Role.EVALUATOR)).get(path).status_code == 403
            assert api(member(team_a, Role.VIEWER)).get(path).status_code == 200
            # A member of no team holds the feature nowhere: refused before anything is read.
            assert api(UserFactory()).get(path).status_code == 403

    def test_a_page_costs_the_same_queries_however_many_batches(self, api, world):
        user, first = world["user"], world["batches"]["first"]

        def count(path):
            with CaptureQueriesContext(connection) as ctx:
                fresh = type(user).objects.get(pk=user.pk)
                response = api(fresh).get(path)
                assert response.status_code == 200
                if response.streaming:
                    b"".join(response.streaming_content)
            return len(ctx.captured_queries)

        before = {path: count(path) for path in (REGISTRY, f"{REGISTRY}.csv")}
        for n in range(6):  # more batches, on more jobs, with cells of their own
            ProviderBatch.objects.create(
                team_id=first.team_id,
                connection_id=first.connection_id,
                work_kind=first.work_kind,
                work_id=world["jobs"]["named" if n % 2 else "flaky"],
                model_id=first.model_id,
                name=f"extra-{n}",
                protocol=first.protocol,
                state=BatchState.IN_PROGRESS,
            )
        assert listed(api, user)["count"] == 9
        assert {path: count(path) for path in before} == before

    def test_the_job_list_of_batches_is_paginated_and_keeps_its_keys(self, api, world):
        user, b, job = world["user"], world["batches"], world["jobs"]["flaky"]
        body = api(user).get(f"{JOBS}/{job}/batches").json()
        assert body["count"] == 2 and [r["id"] for r in body["results"]] == [
            b["second"].pk,
            b["first"].pk,
        ]
        assert all(list(r) == list(selectors.BATCH_FIELDS) for r in body["results"])
        page = api(user).get(f"{JOBS}/{job}/batches?page_size=1").json()
        assert len(page["results"]) == 1 and "page=2" in page["next"]
        assert api(world["other"]).get(f"{JOBS}/{job}/batches").status_code == 404
        browser = Client()
        browser.force_login(user)
        html = browser.get(f"/generation/jobs/{job}").content.decode()
        assert "Provider batches" in html
        assert all(
            ProviderBatch.objects.get(pk=b[k].pk).remote_id in html for k in ("first", "second")
        )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("job=abc", "job"),
        ("job=0", "job"),
        ("job=-3", "job"),
        (f"job={2**64}", "job"),
        ("connection=1.5", "connection"),
        ("team=no-such-team", "team"),
        ("team=team-b", "team"),  # another team's slug: the same answer as an unknown one
        ("team=a%00b", "team"),
        ("provider=azure", "provider"),
        ("provider=openai,", "provider"),
        ("state=done", "state"),
        ("state=completed,Completed", "state"),
        ("since=yesterday", "since"),
        ("since=2026-13-01", "since"),
        ("until=2026-02-30", "until"),
        ("until=9999-12-31", "until"),
        ("since=2026-01-31T25:00", "since"),
        ("since=2026-02-01&until=2026-01-31", "until"),
    ],
)
def test_bad_filter_values_are_400s_naming_the_parameter(api, member, team_a, team_b, query, field):
    user = member(team_a, Role.CREATOR)
    for path in (REGISTRY, f"{REGISTRY}.csv"):
        response = api(user).get(f"{path}?{query}")
        assert response.status_code == 400, (query, response.content)
        assert list(response.json()["errors"]) == [field]


@pytest.mark.django_db(transaction=True)
def test_the_registry_says_what_each_batch_asked(api, people, team_a, fake_provider):
    """pairwiseLLM's index keeps each batch's template, thinking setting and direction:
    the registry's ``prompts``, ``reasoning`` and ``direction`` columns, in the JSON and the
    CSV, read from the batch's cells (issue 37)."""
    from evaluations.judges import services as judge_services
    from evaluations.models import LLMJudge
    from tests.helpers.evaluations import create_judge, make_scenario

    fake_provider.config.batch_duration_s = 0
    manager = people["manager"]
    model = model_for(team_a, fake_provider)
    configs = [
        {"model": model.pk, "params": {"reasoning_effort": "high"}},
        {"model": model.pk, "params": {"reasoning_effort": "none"}},
    ]
    job = batch_job(api_client, manager, team_a, model, ["one", "two"], models=configs)
    assert drive_until_done(job).status == JobStatus.COMPLETED
    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    made = create_judge(api, manager, scenario, name="Both", model=model.pk, swap=True,
                        mode="batch", max_tokens=100)  # fmt: skip
    judge = LLMJudge.objects.get(pk=made["id"])
    run = judge_services.judge_run(user=manager, judge=judge, data={})
    assert drive_until_done(run.job_id).status == JobStatus.COMPLETED
    rows = {row["job_id"]: row for row in listed(api, manager)["results"]}
    asked = rows[job]
    assert asked["prompts"].endswith(" v1") and asked["reasoning"] == "high; off"
    assert asked["direction"] == ""
    judged = rows[run.job_id]
    version = judge.prompt_version
    assert judged["prompts"] == f"{version.template.name} v{version.number}"
    assert judged["direction"] == "both" and judged["reasoning"] == ""
    header, *lines = csv_rows(api, manager)
    assert header[-3:] == ["prompts", "reasoning", "direction"]
    by_job = {line[header.index("job_id")]: line for line in lines}
    assert by_job[str(run.job_id)][-1] == "both"
    assert by_job[str(job)][header.index("reasoning")] == "high; off"
