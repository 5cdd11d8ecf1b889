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
        # Reused when a bench runs again on the same database.
        user, _ = get_user_model().objects.get_or_create(username=f"{prefix}-{n}")
        Membership.objects.update_or_create(user=user, team=team, defaults={"role": role})
        users.append(user)
    return users


def comparison_scenario(*, owner: Any, team: Any, tasks: int, overlap: int) -> Any:
    """An open comparison scenario of ``tasks`` items of two answers each (one task per
    item), each task to be answered by ``overlap`` evaluators; ``owner`` manages scenarios
    in ``team``."""
    from scenarios import services as scenarios
    from scenarios.models import Scenario

    # Names are unique in a team: a run again on the same database makes "Load 2", ...
    taken = Scenario.objects.filter(team=team, name__startswith="Load").count()
    rows = ["item_id,variant_id,content"] + [
        f"i{n},{v},Answer {v} to item {n}" for n in range(tasks) for v in ("a", "b")
    ]
    scenario = scenarios.scenario_from_upload(
        user=owner,
        team=team,
        data={
            "name": f"Load {taken + 1}" if taken else "Load",
            "type": "comparison",
            "overlap": overlap,
            "seed": 1,
        },
        raw="\n".join(rows).encode(),
        filename="pairs.csv",
    )
    return scenarios.scenario_open(user=owner, scenario=scenario)


def bench_fixture(**connection: Any) -> tuple[Any, Any, Any]:
    """(user, model, prompt version) in the team ``bench``; ``connection`` are the
    ProviderConnection's fields (``kind``, ``base_url``, ...). A bench that runs again on the
    same database (one not made by ``fresh_database``) reuses the user, team and prompt,
    and updates the connection and model to this run's."""
    from django.contrib.auth import get_user_model

    from evalplatform.accounts.models import Membership, Team
    from evalplatform.accounts.roles import Role
    from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
    from evalplatform.providers.models import LLMModel, ProviderConnection

    user, _ = get_user_model().objects.get_or_create(username="bench")
    team, _ = Team.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    Membership.objects.update_or_create(user=user, team=team, defaults={"role": Role.CREATOR})
    link, _ = ProviderConnection.objects.update_or_create(
        team=team, name="bench", defaults=connection
    )
    kind = connection.get("kind", link.kind)
    model, _ = LLMModel.objects.update_or_create(
        connection=link,
        model_id="mock-1" if kind == "mock" else "gpt-fake",
        defaults={
            "display_name": "Bench model",
            "input_price_per_mtok": 1,
            "output_price_per_mtok": 2,
            "supports_batch": kind != "mock",
        },
    )
    template, _ = PromptTemplate.objects.get_or_create(team=team, name="Summary")
    version, made = PromptVersion.objects.get_or_create(template=template, number=1)
    if made:
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
