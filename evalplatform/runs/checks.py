"""System checks of the task queue: every task path resolves (``evalplatform.runs.tasks``).

``runs.E001``: a path declared in the code (``tasks.declared``) does not resolve; checked
on every ``manage.py check`` (and so at every start). ``runs.E002``: a stored schedule, or a
task waiting in a team's queue, names a path that does not resolve; a database check
(``manage.py check --database default``), run by ``serve`` and ``.ci/run`` after migrating.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, Tags, register
from django.db import DatabaseError

from evalplatform.runs import tasks


@register()
def declared_tasks(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    return [
        Error(f"The task {name!r} does not resolve.", id="runs.E001")
        for name in sorted(tasks.DECLARED)
        if not tasks.resolves(name)
    ]


@register(Tags.database)
def stored_tasks(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    if not databases:
        return []
    from django_q.models import Schedule

    from evalplatform.runs.models import TeamTask

    found: list[tuple[str, str]] = []
    try:
        found += [(f"schedule {n!r}", f) for n, f in Schedule.objects.values_list("name", "func")]
        found += [
            (f"a task of team {t} waiting", f)
            for t, f in TeamTask.objects.order_by().values_list("team_id", "func").distinct()
        ]
    except DatabaseError:
        return []  # not migrated yet: nothing stored to check
    return [
        Error(f"The {where} names {func!r}, which does not resolve.", id="runs.E002")
        for where, func in found
        if not tasks.resolves(func)
    ]
