"""What the benchmarks share: a fresh database of their own (``fresh_database``, before
``django.setup()``), a team with a user, one model on a connection, a summary prompt and the
job body for N items (generation); members of a role and an open comparison scenario
(evaluation); the nearest-rank percentile. The rest is called after ``django.setup()``."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of ``values`` (not empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@contextlib.contextmanager
def fresh_database(label: str) -> Iterator[str]:
    """A database of the benchmark's own for the block, removed after it; enter it before
    ``django.setup()``, as it sets the environment that this process and the servers it
    starts read. With ``DATABASE_URL``: a new PostgreSQL database named after the URL's,
    ``label`` and a random suffix (never the URL's own database, nor a test runner's
    ``test_*`` one), dropped at the end, connections and all. Without: SQLite in a new data
    directory (``EVAL_DATA_DIR``), deleted at the end. Yields what it is, for the report
    (``postgresql NAME`` or ``sqlite PATH``)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url:
        data_dir = tempfile.mkdtemp(prefix=f"evalbench-{label}-")
        os.environ["EVAL_DATA_DIR"] = data_dir
        try:
            yield f"sqlite {data_dir}/db.sqlite3"
        finally:
            _close_django_connections()
            shutil.rmtree(data_dir, ignore_errors=True)
        return
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    base = parts.path.lstrip("/") or "postgres"
    name = f"{base}_{label}_{secrets.token_hex(4)}"[:63]
    # The maintenance database, as Django's own test runner does: the URL's may not exist.
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
    try:
        yield f"postgresql {name}"
    finally:
        os.environ["DATABASE_URL"] = url
        _close_django_connections()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _close_django_connections() -> None:
    from django.apps import apps

    if apps.ready:
        from django.db import connections

        connections.close_all()


def members_create(*, team: Any, role: str, prefix: str, count: int) -> list[Any]:
    """``count`` new users ``{prefix}-{n}`` holding ``role`` in ``team``."""
    from django.contrib.auth import get_user_model

    from evalplatform.accounts.models import Membership

    users = []
    for n in range(count):
        user = get_user_model().objects.create_user(f"{prefix}-{n}")
        Membership.objects.create(user=user, team=team, role=role)
        users.append(user)
    return users


def comparison_scenario(*, owner: Any, team: Any, tasks: int, overlap: int) -> Any:
    """An open comparison scenario of ``tasks`` items of two answers each (one task per
    item), each task to be answered by ``overlap`` evaluators; ``owner`` manages scenarios
    in ``team``."""
    from scenarios import services as scenarios

    rows = ["item_id,variant_id,content"] + [
        f"i{n},{v},Answer {v} to item {n}" for n in range(tasks) for v in ("a", "b")
    ]
    scenario = scenarios.scenario_from_upload(
        user=owner,
        team=team,
        data={"name": "Load", "type": "comparison", "overlap": overlap, "seed": 1},
        raw="\n".join(rows).encode(),
        filename="pairs.csv",
    )
    return scenarios.scenario_open(user=owner, scenario=scenario)


def bench_fixture(**connection: Any) -> tuple[Any, Any, Any]:
    """(user, model, prompt version) in a fresh team ``bench``; ``connection`` are the
    ProviderConnection's fields (``kind``, ``base_url``, ...)."""
    from django.contrib.auth import get_user_model

    from evalplatform.accounts.models import Membership, Team
    from evalplatform.accounts.roles import Role
    from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
    from evalplatform.providers.models import LLMModel, ProviderConnection

    user = get_user_model().objects.create_user("bench")
    team = Team.objects.create(name="Bench", slug="bench")
    Membership.objects.create(user=user, team=team, role=Role.CREATOR)
    link = ProviderConnection.objects.create(team=team, name="bench", **connection)
    model = LLMModel.objects.create(
        connection=link,
        model_id="mock-1" if link.kind == "mock" else "gpt-fake",
        display_name="Bench model",
        input_price_per_mtok=1,
        output_price_per_mtok=2,
        supports_batch=link.kind != "mock",
    )
    template = PromptTemplate.objects.create(team=team, name="Summary")
    version = PromptVersion.objects.create(template=template, number=1)
    PromptBlock.objects.create(version=version, position=0, title="System", body="Be brief.")
    PromptBlock.objects.create(version=version, position=1, body="Summarize: {{content}}")
    return user, model, version


def job_body(model: Any, version: Any, cells: int, **extra: Any) -> dict[str, Any]:
    """A job of ``cells`` items x this prompt x this model at one temperature."""
    items = [
        {"id": i, "content": f"Item {i}: a paragraph about rivers and rain."} for i in range(cells)
    ]
    return {
        "team": "bench",
        "name": f"bench {cells}",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.7],
        "max_tokens": 200,
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    } | extra


def drive_timed(job_id: int, passes: int = 12) -> tuple[list[tuple[float, Any]], float, float]:
    """Drive a batch job until it stops running: each pass's (seconds, summary), the total
    seconds, and the seconds spent recording results in the database (apart from waiting for
    the provider)."""
    import asyncio
    import time

    from generation.models import GenerationJob
    from generation.runners import batch as batch_runner

    recording = {"s": 0.0}
    record = batch_runner._record

    def timed_record(*a: Any, **kw: Any) -> Any:
        began = time.perf_counter()
        try:
            return record(*a, **kw)
        finally:
            recording["s"] += time.perf_counter() - began

    batch_runner._record = timed_record  # type: ignore[assignment]
    done: list[tuple[float, Any]] = []
    started = time.perf_counter()
    try:
        for _ in range(passes):
            wall = time.perf_counter()
            summary = asyncio.run(batch_runner.drive(job_id))
            done.append((time.perf_counter() - wall, summary))
            if GenerationJob.objects.get(pk=job_id).status != "running":
                break
    finally:
        batch_runner._record = record  # type: ignore[assignment]
    return done, time.perf_counter() - started, recording["s"]
