"""The permission matrix: every URL (API, pages, admin, WebSocket) x every role x own team /
other team, from one table of expectations (``TABLE`` and ``ADMIN_MODELS`` below).

A URL pattern with no row fails ``test_every_url_has_a_row``: nothing new ships unguarded.
Each row is probed with real requests (API tokens on the API, sessions on pages and the admin,
the ASGI application for WebSockets) by:

- ``U`` anonymous; ``A`` admin, ``M`` manager, ``C`` creator, ``E`` evaluator, ``V`` viewer,
  all members of team A; ``I`` an invitee (accepted an invitation to team A's scenario, member
  of no team); ``S`` a superuser (member of no team).

Outcomes, written ``ok=AMCS 403=V`` (members not named get ``404``, anonymous gets ``login``):

- ``ok``: past the permission check: 2xx, a redirect that is not to a login page, or (the
  probes send empty bodies) 400 / 409; never a page's "no permission" message.
- ``403``: refused: 403, or for an HTML form, a redirect back with the "no permission" message.
- ``404``: hidden: exactly the answer for a missing object.
- ``login``: 401 on the API, a redirect to a login page elsewhere.

A refused write changes nothing in the database. Another team's object answers as a missing
one: 404, or the 403 a role gets before any lookup (it holds the feature in no team), which a
missing object gets too. No response to a team-A member mentions team B (``bravo``).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from django_q.models import OrmQ, Schedule, Task
from rest_framework.test import APIClient

from evalplatform.accounts import audit
from evalplatform.accounts.models import Membership, Notification, Team, TeamGroup
from evalplatform.accounts.roles import Role
from evalplatform.accounts.services import token_create
from evalplatform.errors import Forbidden
from evalplatform.routing import socketio_topics, websocket_urlpatterns
from evalplatform.runs.models import ProviderBatch
from evaluations.invitations import services as invitations
from evaluations.judges import services as judges
from evaluations.models import (
    BudgetPlan,
    JudgeBatch,
    JudgeFile,
    JudgeFileLine,
    TeamTrustGate,
    TrustGate,
)
from evaluations.quality import attention
from evaluations.review import services as review
from evaluations.workspace import services as evaluation_services
from generation import planning
from generation import services as generation_services
from generation.models import GenerationOutput
from scenarios import services as scenario_services
from tests.factories import (
    ConnectionFactory,
    LLMModelFactory,
    MembershipFactory,
    PromptTemplateFactory,
    UserFactory,
    make_version,
)

ROLES = "UAMCEVIS"
MEMBER_ROLES = {
    "A": Role.ADMIN,
    "M": Role.MANAGER,
    "C": Role.CREATOR,
    "E": Role.EVALUATOR,
    "V": Role.VIEWER,
}
EVERYONE = "AMCEVIS"  # every signed-in probe


@dataclass(frozen=True)
class Row:
    """One probe of a route: ``params`` fill the URL (``@kind``: that kind's object of the
    probed team, see ``KINDS``); ``methods`` map to outcome specs; ``other``: what another
    team's object gets (``"404"``, ``"same"`` for links that are capabilities and objects of no
    team, ``None`` for routes without an object); ``query`` is added to the URL."""

    route: str
    methods: dict[str, str]
    params: dict[str, str] = field(default_factory=dict)
    other: str | None = "404"
    query: str = ""
    body: str = "json"  # json, multipart, form
    superuser_other: str = "ok"  # "404" for what is a user's own even to a superuser
    form: tuple[tuple[str, str], ...] = ()  # the fields a page's POST sends
    xfail: str = ""  # a known bug: why this row fails (strict: fixing it fails the test)

    @property
    def has_object(self) -> bool:
        return any(str(v).startswith("@") for v in [*self.params.values(), self.query])


def R(route: str, methods: dict[str, str], **kwargs: Any) -> Row:
    params = kwargs.get("params", {})
    if "other" not in kwargs and not any(str(v).startswith("@") for v in params.values()):
        kwargs["other"] = None
    return Row(route, methods, **kwargs)


JOB, SCN = {"pk": "@job"}, {"pk": "@scenario"}
JUDGE = {"pk": "@judge"}
BATCH = {"batch_id": "@judge_batch"}
PLAN = {"plan_id": "@budgetplan"}
VIEW_JOB = {"GET": "ok=AMCVS 403=EI"}
MANAGE_JOB = {"POST": "ok=AMCS 403=VEI"}
VIEW_SCN = {"GET": "ok=AMCVS 403=EI"}
SIGNED_IN = f"ok={EVERYONE}"

# fmt: off
TABLE: list[Row] = [
    # --- generation API ---
    R("api/generation/jobs/<pk>/to-scenario", {"POST": "ok=AMCS 403=V"}, params=JOB),
    R("api/generation/estimate", {"POST": "ok=AMCS 403=EVI"}),
    R("api/generation/jobs", {"GET": "ok=AMCVS 403=EI", "POST": "ok=AMCS 403=EVI"}),
    R("api/generation/jobs/<pk>", {**VIEW_JOB, "PATCH": "ok=AMCS 403=VEI",
                                   "DELETE": "ok=AMCS 403=VEI"}, params=JOB),
    R("api/generation/jobs/<pk>/batches", VIEW_JOB, params=JOB),
    # The batch registry: a job filter naming another team's job answers as a missing one.
    R("api/generation/batches", VIEW_JOB),
    R("api/generation/batches", VIEW_JOB, query="job=@job", other="404"),
    R("api/generation/batches.csv", VIEW_JOB),
    R("api/generation/batches.csv", VIEW_JOB, query="job=@job", other="404"),
    R("api/generation/jobs/<pk>/outputs", VIEW_JOB, params=JOB),
    R("api/generation/jobs/<pk>/statistics", VIEW_JOB, params=JOB),
    R("api/generation/jobs/<pk>/consistency", VIEW_JOB, params=JOB),
    R("api/generation/jobs/<pk>/consistency/csv", VIEW_JOB, params=JOB),
    R("api/generation/jobs/<pk>/start", MANAGE_JOB, params=JOB),
    R("api/generation/jobs/<pk>/pause", MANAGE_JOB, params=JOB),
    R("api/generation/jobs/<pk>/cancel", MANAGE_JOB, params=JOB),
    R("api/generation/jobs/<pk>/retry-failed", MANAGE_JOB, params=JOB),
    R("api/generation/jobs/<pk>/export/csv", MANAGE_JOB, params=JOB),
    R("api/generation/jobs/<pk>/export/json", MANAGE_JOB, params=JOB),
    R("api/generation/outputs/<pk>", VIEW_JOB, params={"pk": "@output"}),
    # --- scenarios API ---
    R("api/scenarios", {**VIEW_SCN, "POST": "ok=AMCS 403=EVI"}),
    R("api/scenarios/preview", {"POST": "ok=AMCS 403=EVI"}),
    R("api/scenarios/<pk>", {**VIEW_SCN, "PATCH": "ok=AMS 403=CEVI",
                             "DELETE": "ok=AMS 403=CEVI"}, params=SCN),
    R("api/scenarios/<pk>/open", {"POST": "ok=AMS 403=CEVI"}, params=SCN),
    R("api/scenarios/<pk>/close", {"POST": "ok=AMS 403=CEVI"}, params=SCN),
    R("api/scenarios/<pk>/regenerate", {"POST": "ok=AMS 403=CEVI"}, params=SCN),
    R("api/scenarios/<pk>/tasks", VIEW_SCN, params=SCN),
    R("api/scenarios/<pk>/variants", VIEW_SCN, params=SCN),
    R("api/scenarios/<pk>/export/<fmt>", {"POST": "ok=AMCS 403=V"}, params={**SCN, "fmt": "csv"}),
    R("api/scenarios/<pk>/export/<fmt>", {"POST": "ok=AMCS 403=V"},
      params={**SCN, "fmt": "json"}),
    R("api/scenarios/<pk>/import", {"POST": "ok=AMS 403=CV"}, params=SCN, body="multipart"),
    R("api/scenarios/<pk>/invitations", {"GET": "ok=AMS 403=CV", "POST": "ok=AMS 403=CV"},
      params=SCN),
    R("api/scenarios/<pk>/invitations/<invitation_id>", {"DELETE": "ok=AMS 403=CV"},
      params={**SCN, "invitation_id": "@invitation"}),
    R("api/scenarios/<pk>/judges", {"GET": "ok=AMCVS", "POST": "ok=AMCS 403=V"}, params=SCN),
    R("api/scenarios/<pk>/analytics", {"GET": "ok=AMCVS"}, params=SCN),
    R("api/scenarios/<pk>/analytics/<table>.csv", {"GET": "ok=AMCS 403=V"},
      params={**SCN, "table": "elo"}),
    R("api/scenarios/<pk>/adaptive-tasks", {"POST": "ok=AMS 403=CV"}, params=SCN),
    # The budget scheduler: proposals read like analytics, made and accepted like tasks.
    R("api/scenarios/<pk>/plan", {"GET": "ok=AMCVS", "POST": "ok=AMS 403=CV"}, params=SCN),
    R("api/scenarios/<pk>/plan/<plan_id>", {"GET": "ok=AMCVS"}, params={**SCN, **PLAN}),
    R("api/scenarios/<pk>/plan/<plan_id>/accept", {"POST": "ok=AMS 403=CV"},
      params={**SCN, **PLAN}),
    # Trust gates (docs/analytics.md): read with the analytics, set and removed by managers.
    R("api/scenarios/<pk>/trust-gate",
      {"GET": "ok=AMCVS", "PUT": "ok=AMS 403=CV", "DELETE": "ok=AMS 403=CV"}, params=SCN),
    # The team's default gate: the same rights, in the team (another team's slug: 404).
    R("api/teams/<slug>/trust-gate",
      {"GET": "ok=AMCVS", "PUT": "ok=AMS 403=CV", "DELETE": "ok=AMS 403=CV"},
      params={"slug": "@team_slug"}),
    # Quality control: who evaluates, gold tasks, per-evaluator figures, exclusions.
    R("api/scenarios/<pk>/assignees", {"GET": "ok=AMS 403=CV", "PUT": "ok=AMS 403=CV"},
      params=SCN),
    R("api/scenarios/<pk>/gold", {"GET": "ok=AMS 403=CV", "PUT": "ok=AMS 403=CV"}, params=SCN),
    R("api/scenarios/<pk>/quality", {"GET": "ok=AMS 403=CV"}, params=SCN),
    R("api/scenarios/<pk>/attention",
      {"GET": "ok=AMS 403=CV", "POST": "ok=AMS 403=CV", "PUT": "ok=AMS 403=CV"}, params=SCN),
    R("api/scenarios/<pk>/attention/<task>", {"DELETE": "ok=AMS 403=CV"},
      params={**SCN, "task": "@attention_task"}),
    R("api/scenarios/<pk>/excluded/<user>", {"POST": "ok=AMS 403=CV",
                                             "DELETE": "ok=AMS 403=CV"},
      params={**SCN, "user": "@rater"}),
    R("api/scenarios/<pk>/review", {"GET": "ok=AMCVS"}, params=SCN),
    R("api/scenarios/<pk>/tasks/<task_id>/adjudication",
      {"PUT": "ok=AMS 403=CV", "DELETE": "ok=AMS 403=CV"}, params={**SCN, "task_id": "@task"}),
    R("api/judges/<pk>", {"GET": "ok=AMCVS 403=EI", "PATCH": "ok=AMCS 403=VEI",
                          "DELETE": "ok=AMCS 403=VEI"}, params=JUDGE),
    R("api/judges/<pk>/estimate", {"POST": "ok=AMCS 403=VEI"}, params=JUDGE),
    R("api/judges/<pk>/run", {"POST": "ok=AMCS 403=VEI"}, params=JUDGE),
    R("api/judges/<pk>/retry-failed", {"POST": "ok=AMCS 403=VEI"}, params=JUDGE),
    R("api/judges/<pk>/runs", {"GET": "ok=AMCVS 403=EI"}, params=JUDGE),
    R("api/judges/<pk>/card", {"GET": "ok=AMCVS 403=EI"}, params=JUDGE),
    R("api/judges/<pk>/consistency", {"GET": "ok=AMCVS 403=EI"}, params=JUDGE),
    R("api/judges/<pk>/trust-opt-in", {"POST": "ok=AMS 403=CVEI"}, params=JUDGE),
    # --- judge files: the platform's API, and the OpenAI Files + Batches API (tokens) ---
    R("api/judge-files/estimate", {"POST": "ok=AMCS 403=VEI"}),  # a 400 (no file) is ok
    R("api/judge-files/<batch_id>/verdicts", {"GET": "ok=AMCVS 403=EI"}, params=BATCH),
    R("api/judge-files/<batch_id>/verdicts.csv", {"GET": "ok=AMCVS 403=EI"}, params=BATCH),
    R("api/judge-files/<batch_id>/resubmit", {"POST": "ok=AMCS 403=VEI"}, params=BATCH),
    # The matrix's batch has no step to resume: a 409 (counted as ok) past the rights.
    R("api/judge-files/<batch_id>/resume", {"POST": "ok=AMCS 403=VEI"}, params=BATCH),
    R("api/judge-files/<batch_id>/compare/<other_id>", {"GET": "ok=AMCVS 403=EI"},
      params={**BATCH, "other_id": "@judge_batch"}),
    R("api/judge-files/<batch_id>/compare/<other_id>.csv", {"GET": "ok=AMCVS 403=EI"},
      params={**BATCH, "other_id": "@judge_batch"}),
    R("v1/files", {"GET": "ok=AMCVS 403=EI", "POST": "ok=AMCS 403=VEI"}, body="multipart"),
    R("v1/files/<file_id>", {"GET": "ok=AMCVS 403=EI"}, params={"file_id": "@judge_file"}),
    R("v1/files/<file_id>/content", {"GET": "ok=AMCVS 403=EI"},
      params={"file_id": "@judge_file"}),
    R("v1/batches", {"GET": "ok=AMCVS 403=EI", "POST": "ok=AMCS 403=VEI"}),
    R("v1/batches/<batch_id>", {"GET": "ok=AMCVS 403=EI"}, params=BATCH),
    R("v1/batches/<batch_id>/cancel", {"POST": "ok=AMCS 403=VEI"}, params=BATCH),
    # Anthropic's Message Batches API over the same batches (a 400 for no requests is ok).
    R("v1/messages/batches", {"GET": "ok=AMCVS 403=EI", "POST": "ok=AMCS 403=VEI"}),
    R("v1/messages/batches/<batch_id>", {"GET": "ok=AMCVS 403=EI"}, params=BATCH),
    R("v1/messages/batches/<batch_id>/results", {"GET": "ok=AMCVS 403=EI"}, params=BATCH),
    R("v1/messages/batches/<batch_id>/cancel", {"POST": "ok=AMCS 403=VEI"}, params=BATCH),
    # --- evaluation API: the scenario's pool (team members who submit, and invitees) ---
    R("api/evaluations/scenarios", {"GET": SIGNED_IN}),
    R("api/evaluations/scenarios/<pk>/next", {"POST": "ok=AMCEIS"}, params=SCN),
    R("api/evaluations/assignments/<pk>", {"GET": "ok=AMCEIS"}, params={"pk": "@assignment"}),
    R("api/evaluations/assignments/<pk>/submit", {"POST": "ok=AMCEIS"},
      params={"pk": "@assignment"}),
    R("api/evaluations/assignments/<pk>/skip", {"POST": "ok=AMCEIS"},
      params={"pk": "@assignment"}),
    R("api/evaluations/judgments", {"GET": "ok=AMCEVIS"}, query="scenario=@scenario"),
    R("api/evaluations/assignments/<pk>/flag", {"POST": "ok=AMCEIS"},
      params={"pk": "@assignment"}),
    R("api/evaluations/scenarios/<pk>/mine", {"GET": "ok=AMCEIS"}, params=SCN),
    R("api/evaluations/scenarios/<pk>/flags", {"GET": "ok=AMCVS"}, params=SCN),
    # A judgment is revised by its own evaluator only (team A's is E's), even a superuser's
    # attempt on someone else's is a 404.
    R("api/evaluations/judgments/<pk>/revise", {"POST": "ok=E"}, params={"pk": "@judgment"},
      superuser_other="404"),
    # --- the core API ---
    R("api/me", {"GET": SIGNED_IN}),
    R("api/schema/", {"GET": SIGNED_IN}),
    R("api/docs/", {"GET": SIGNED_IN}),
    R("api/providers/connections", {"GET": "ok=AMS 403=CEVI", "POST": "ok=AMS 403=CEVI"}),
    R("api/providers/connections/<pk>", {m: "ok=AMS 403=CEVI" for m in
                                         ("GET", "PUT", "PATCH", "DELETE")},
      params={"pk": "@connection"}),
    R("api/providers/connections/<pk>/test", {"POST": "ok=AMS 403=CEVI"},
      params={"pk": "@connection"}),
    R("api/providers/models", {"GET": "ok=AMCVS 403=EI", "POST": "ok=AMS 403=CEVI"}),
    R("api/providers/models/<pk>", {"GET": "ok=AMCVS 403=EI", "PUT": "ok=AMS 403=CEVI",
                                    "PATCH": "ok=AMS 403=CEVI", "DELETE": "ok=AMS 403=CEVI"},
      params={"pk": "@llmmodel"}),
    R("api/prompts/templates", {"GET": "ok=AMCVS 403=EI", "POST": "ok=AMCS 403=EVI"}),
    R("api/prompts/templates/<pk>", {"GET": "ok=AMCVS 403=EI", "PUT": "ok=AMCS 403=EVI",
                                     "PATCH": "ok=AMCS 403=EVI", "DELETE": "ok=AMCS 403=EVI"},
      params={"pk": "@template"}),
    R("api/prompts/templates/<pk>/versions", {"GET": "ok=AMCVS 403=EI",
                                              "POST": "ok=AMCS 403=EVI"},
      params={"pk": "@template"}),
    R("api/prompts/versions", {"GET": "ok=AMCVS 403=EI"}),
    R("api/prompts/versions/<pk>", {"GET": "ok=AMCVS 403=EI", "PUT": "ok=AMCS 403=EVI",
                                    "PATCH": "ok=AMCS 403=EVI", "DELETE": "ok=AMCS 403=EVI"},
      params={"pk": "@version"}),
    R("api/prompts/versions/<pk>/render", {"POST": "ok=AMCVS 403=EI"},
      params={"pk": "@version"}),
    # Tokens and notifications are the user's own: another user's are 404.
    R("api/tokens", {"GET": SIGNED_IN, "POST": SIGNED_IN}),
    R("api/tokens/<pk>", {"DELETE": SIGNED_IN}, params={"pk": "@apitoken"}, superuser_other="404"),
    R("api/notifications", {"GET": SIGNED_IN}),
    R("api/notifications/read", {"POST": SIGNED_IN}),
    R("api/notifications/<pk>/read", {"POST": SIGNED_IN}, params={"pk": "@notification"},
      superuser_other="404"),
    R("api/audit", {"GET": "ok=AS 403=MCEVI"}),
    # Evaluator groups: read with accounts:view, changed with scenarios:manage.
    R("api/groups", {"GET": "ok=AMCVS 403=EI", "POST": "ok=AMS 403=CVEI"}),
    R("api/groups/<pk>", {"GET": "ok=AMCVS 403=EI", "PUT": "ok=AMS 403=CVEI",
                          "PATCH": "ok=AMS 403=CVEI", "DELETE": "ok=AMS 403=CVEI"},
      params={"pk": "@group"}),
    R("api/groups/<pk>/members", {"POST": "ok=AMS 403=CVEI"}, params={"pk": "@group"}),
    R("api/groups/<pk>/members/<user>", {"DELETE": "ok=AMS 403=CVEI"},
      params={"pk": "@group", "user": "@group_member"}),
    R("teams/<team>/groups", {"GET": "ok=AMCVS", "POST": "ok=AMS 403=CV"},
      params={"team": "@team_slug"}, body="form", form=(("action", "create"),)),
    R("teams/<team>/trust-gate", {"GET": "ok=AMCVS", "POST": "ok=AMS 403=CV"},
      params={"team": "@team_slug"}, body="form"),
    # --- pages: scenarios, judges, invitations ---
    R("scenarios/", {"GET": "ok=AMCVS 403=EI"}),  # evaluators' scenarios: the workspace
    R("scenarios/new", {"GET": "ok=AMCS 403=EVI", "POST": "ok=AMCS 403=EVI"}, body="form"),
    R("scenarios/new/preview", {"POST": "ok=AMCS 403=EVI"}, body="form"),
    R("scenarios/<scenario_id>", {"GET": "ok=AMCVS"}, params={"scenario_id": "@scenario"}),
    R("scenarios/<scenario_id>/edit", {"GET": "ok=AMS 403=CV", "POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario"}, body="form"),
    R("scenarios/<scenario_id>/analytics", {"GET": "ok=AMCVS"},
      params={"scenario_id": "@scenario"}),
    R("scenarios/<scenario_id>/adaptive-tasks", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario"}, body="form"),
    R("scenarios/<scenario_id>/plan", {"GET": "ok=AMCVS", "POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario"}, body="form"),
    R("scenarios/<scenario_id>/plan/<plan_id>", {"GET": "ok=AMCVS"},
      params={"scenario_id": "@scenario", **PLAN}),
    R("scenarios/<scenario_id>/plan/<plan_id>/accept", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario", **PLAN}, body="form"),
    R("scenarios/<scenario_id>/trust-gate", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario"}, body="form"),
    R("scenarios/<scenario_id>/review", {"GET": "ok=AMCVS"}, params={"scenario_id": "@scenario"}),
    R("scenarios/<scenario_id>/tasks/<task_id>/adjudication", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario", "task_id": "@task"}, body="form"),
    R("scenarios/<scenario_id>/tasks/<task_id>/adjudication/delete", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario", "task_id": "@task"}, body="form"),
    R("scenarios/<scenario_id>/tasks/<task_id>/gold", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario", "task_id": "@task"}, body="form"),
    R("scenarios/<scenario_id>/tasks/<task_id>/attention-check", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario", "task_id": "@task"}, body="form"),
    R("scenarios/<scenario_id>/invite", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario"}, body="form"),
    R("scenarios/<scenario_id>/invitations/<invitation_id>/withdraw", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario", "invitation_id": "@invitation"}, body="form"),
    R("scenarios/<scenario_id>/judges", {"POST": "ok=AMCS 403=V"},
      params={"scenario_id": "@scenario"}, body="form"),
    R("scenarios/<scenario_id>/assignees", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario"}, body="form"),
    R("scenarios/<scenario_id>/gold", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario"}, body="form"),
    R("scenarios/<scenario_id>/attention", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario"}, body="form", form=(("action", "rate"),)),
    *[
        R("scenarios/<scenario_id>/excluded/<user>", {"POST": "ok=AMS 403=CV"},
          params={"scenario_id": "@scenario", "user": "@rater"}, body="form",
          form=(("action", action),))
        for action in ("exclude", "include")
    ],
    R("scenarios/<scenario_id>/<action>", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario", "action": "open"}, body="form"),
    R("scenarios/<scenario_id>/<action>", {"POST": "ok=AMS 403=CV"},
      params={"scenario_id": "@scenario", "action": "close"}, body="form"),
    # The link is the capability: anyone holding it may open it, whatever the team.
    R("invitations/<token>", {"GET": f"ok=U{EVERYONE}", "POST": f"ok=U{EVERYONE}"},
      params={"token": "@invitation_token"}, other="same", body="form"),
    R("judges/<judge_id>/estimate", {"POST": "ok=AMCS 403=V"}, params={"judge_id": "@judge"},
      body="form"),
    R("judges/<judge_id>", {"GET": "ok=AMCVS"}, params={"judge_id": "@judge"}),
    R("judges/<judge_id>/trust-opt-in", {"POST": "ok=AMS 403=CV"}, params={"judge_id": "@judge"},
      body="form"),
    *[
        R("judges/<judge_id>/<action>", {"POST": "ok=AMCS 403=V"},
          params={"judge_id": "@judge", "action": action}, body="form")
        for action in ("run", "retry-failed", "delete")
    ],
    # --- pages: judge files ---
    R("judge-files/", {"GET": "ok=AMCVS 403=EI", "POST": "ok=AMCS 403=EVI"}, body="form"),
    R("judge-files/files/<file_id>/content", {"GET": "ok=AMCVS 403=EI"},
      params={"file_id": "@judge_file"}),
    R("judge-files/<batch_id>", {"GET": "ok=AMCVS 403=EI"}, params=BATCH),
    R("judge-files/<batch_id>/compare", {"GET": "ok=AMCVS 403=EI"}, params=BATCH),
    R("judge-files/<batch_id>/compare/<other_id>", {"GET": "ok=AMCVS 403=EI"},
      params={**BATCH, "other_id": "@judge_batch"}),
    *[
        R("judge-files/<batch_id>/<action>", {"POST": "ok=AMCS 403=VEI"},
          params={**BATCH, "action": action}, body="form")
        for action in ("cancel", "resubmit")
    ],
    # --- pages: generation ---
    R("generation", {"GET": f"ok=U{EVERYONE}"}),  # a redirect to generation/
    R("generation/", {"GET": "ok=AMCVS 403=EI"}),
    R("generation/new", {"GET": "ok=AMCS", "POST": "ok=AMCS"}, body="form"),
    R("generation/new/estimate", {"POST": "ok=AMCS"}, body="form"),
    R("generation/jobs/<job_id>", {"GET": "ok=AMCVS"}, params={"job_id": "@job"}),
    R("generation/jobs/<job_id>/outputs", {"GET": "ok=AMCVS"}, params={"job_id": "@job"}),
    R("generation/jobs/<job_id>/statistics", {"GET": "ok=AMCVS"}, params={"job_id": "@job"}),
    R("generation/jobs/<job_id>/consistency", {"GET": "ok=AMCVS"}, params={"job_id": "@job"}),
    *[
        R("generation/jobs/<job_id>/<action>", {"POST": "ok=AMCS 403=V"},
          params={"job_id": "@job", "action": action}, body="form")
        for action in ("start", "pause", "cancel", "retry-failed", "budget", "delete")
    ],
    R("generation/jobs/<job_id>/to-scenario", {"GET": "ok=AMCS 403=V", "POST": "ok=AMCS 403=V"},
      params={"job_id": "@job"}, body="form"),
    R("generation/jobs/<job_id>/to-scenario/preview", {"POST": "ok=AMCS 403=V"},
      params={"job_id": "@job"}, body="form"),
    # --- pages: prompts (viewers read; editing needs feature:prompts:edit) ---
    R("prompts/", {"GET": "ok=AMCVS 403=EI"}),
    R("prompts/new", {"GET": "ok=AMCS 403=EVI", "POST": "ok=AMCS 403=EVI"}, body="form"),
    R("prompts/preview", {"POST": "ok=AMCS 403=EVI"}, body="form"),
    R("prompts/<template_id>", {"GET": "ok=AMCVS"}, params={"template_id": "@template"}),
    R("prompts/<template_id>/versions/new", {"GET": "ok=AMCS 403=V", "POST": "ok=AMCS 403=V"},
      params={"template_id": "@template"}, body="form"),
    R("prompts/versions/<version_id>/edit", {"GET": "ok=AMCS 403=V", "POST": "ok=AMCS 403=V"},
      params={"version_id": "@version"}, body="form"),
    # --- pages: evaluating ---
    R("evaluate/", {"GET": SIGNED_IN}),
    R("evaluate/scenarios/<scenario_id>", {"GET": "ok=AMCEIS"},
      params={"scenario_id": "@scenario"}),
    R("evaluate/tasks/<assignment_id>", {"GET": "ok=AMCEIS", "POST": "ok=AMCEIS"},
      params={"assignment_id": "@assignment"}, body="form"),
    R("evaluate/tasks/<assignment_id>/skip", {"POST": "ok=AMCEIS"},
      params={"assignment_id": "@assignment"}, body="form"),
    R("evaluate/tasks/<assignment_id>/flag", {"POST": "ok=AMCEIS"},
      params={"assignment_id": "@assignment"}, body="form"),
    R("evaluate/judgments/<judgment_id>", {"GET": "ok=E", "POST": "ok=E"},
      params={"judgment_id": "@judgment"}, body="form", superuser_other="404"),
    # --- pages: the core ---
    R("", {"GET": SIGNED_IN}),
    R("login/", {"GET": f"ok=U{EVERYONE}", "POST": f"ok=U{EVERYONE}"}, body="form"),
    R("logout/", {"POST": f"login=U{EVERYONE}"}, body="form"),  # always back to the login page
    R("notifications/dismiss", {"POST": SIGNED_IN}, body="form"),
    # Every role's own password (a form of the matrix's is refused: the page again).
    R("account/password/", {"GET": SIGNED_IN, "POST": SIGNED_IN}, body="form"),
    R("account/password/done/", {"GET": SIGNED_IN}),
    # --- the admin console's own pages (per-model pages: ADMIN_MODELS) ---
    R("admin/", {"GET": "ok=AMS login=CEVI"}),
    R("admin/login/", {"GET": f"ok=U{EVERYONE}"}),
    R("admin/logout/", {"POST": f"login=U{EVERYONE}"}, body="form"),  # to the login page
    R("admin/password_change/", {"GET": "ok=AMS login=CEVI"}),
    R("admin/password_change/done/", {"GET": "ok=AMS login=CEVI"}),
    R("admin/jsi18n/", {"GET": "ok=AMS login=CEVI"}),
    R("admin/autocomplete/", {"GET": "ok=AMS login=CEVI"},
      query="app_label=accounts&model_name=membership&field_name=team"),
    # No model has a page on the site: every object is a 404, whatever its team.
    R("admin/r/<content_type_id>/<object_id>/", {"GET": "404=AMS login=CEVI"},
      params={"content_type_id": "@scenario_type", "object_id": "@scenario"}),
    R("admin/<url>", {"GET": "404=AMS login=CEVI"}, params={"url": "no-such-page/"}),
    *[
        R("admin/<app_label>/", {"GET": spec}, params={"app_label": app})
        for app, spec in {
            "auth": "ok=S 404=AM login=CEVI",
            "django_q": "ok=S 404=AM login=CEVI",
            **dict.fromkeys(
                ("accounts", "providers", "prompts", "runs", "generation", "scenarios",
                 "evaluations"),
                "ok=AMS login=CEVI",
            ),
        }.items()
    ],
    # --- WebSockets (probed by test_websocket_matrix; 4401 is "login", 4404 "404") ---
    R("ws/generation/jobs/<job_id>", {"WS": "ok=AMCVS"}, params={"job_id": "@job"}),
    # --- Socket.IO topics: ``subscribe`` {"job": <id>} (probed by test_socketio_matrix) ---
    R("socket.io:job:<job>", {"SIO": "ok=AMCVS"}, params={"job": "@job"}),
]
# fmt: on

# The admin's pages of each registered model: who may list or view, add, change, delete (the
# console itself needs ``feature:admin:access``: A, M and S; the others are sent to its login).
# ``team``: rows of another team are 404 (False: objects of no team, the same for all).
ADMIN_MODELS: dict[str, dict[str, Any]] = {
    "auth.group": {"view": "S", "add": "S", "change": "S", "delete": "S", "team": False},
    "auth.user": {"view": "S", "add": "S", "change": "S", "delete": "S", "team": False},
    "django_q.schedule": {"view": "S", "add": "S", "change": "S", "delete": "S", "team": False},
    "django_q.success": {"view": "S", "add": "", "change": "S", "delete": "S", "team": False},
    "django_q.failure": {"view": "S", "add": "", "change": "S", "delete": "S", "team": False},
    "django_q.ormq": {"view": "S", "add": "", "change": "S", "delete": "S", "team": False},
    "accounts.team": {"view": "AMS", "add": "S", "change": "AS", "delete": "S"},
    "accounts.membership": {"view": "AMS", "add": "AS", "change": "AS", "delete": "AS"},
    # Everyone in the console manages their own tokens (another user's are 404).
    "accounts.apitoken": {"view": "AMS", "add": "AMS", "change": "AMS", "delete": "AMS"},
    "accounts.auditevent": {"view": "AS", "add": "", "change": "", "delete": ""},
    "accounts.teamgroup": {"view": "AMS", "add": "AMS", "change": "AMS", "delete": "AMS"},
    "providers.providerconnection": {"view": "AMS", "add": "AMS", "change": "AMS", "delete": "AMS"},
    "providers.llmmodel": {"view": "AMS", "add": "AMS", "change": "AMS", "delete": "AMS"},
    "prompts.prompttemplate": {"view": "AMS", "add": "AMS", "change": "AMS", "delete": "AMS"},
    "prompts.promptversion": {"view": "AMS", "add": "AMS", "change": "AMS", "delete": "AMS"},
    "runs.providerbatch": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "generation.generationjob": {"view": "AMS", "add": "", "change": "", "delete": "AMS"},
    "generation.generationoutput": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "scenarios.scenario": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "scenarios.variant": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.judgment": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.adjudication": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.assignment": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.invitation": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.llmjudge": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.judgerun": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.trustgate": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.teamtrustgate": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.judgebatch": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.judgefile": {"view": "AMS", "add": "", "change": "", "delete": ""},
    "evaluations.budgetplan": {"view": "AMS", "add": "", "change": "", "delete": ""},
}

CONSOLE = "AMS"
# Registered only in some deployments: django-q's queue exists with its ORM broker (embedded
# mode), not with Redis.
OPTIONAL_ADMIN_MODELS = {"django_q.ormq"}

ADMIN_XFAIL: dict[tuple[str, str], str] = {}


def admin_spec(ok: str, who: dict[str, Any], *, on_object: bool) -> str:
    """The console roles in ``ok`` pass; the others are refused (403), except that a row of a
    team-scoped model they may not see is not there for them (404)."""
    seen = who["view"] + who["change"]
    team_scoped = who.get("team", True)
    outcomes: dict[str, str] = {"ok": "", "403": "", "404": ""}
    for role in CONSOLE:
        if role in ok:
            outcomes["ok"] += role
        elif on_object and team_scoped and role not in seen:
            outcomes["404"] += role
        else:
            outcomes["403"] += role
    return " ".join(f"{k}={v}" for k, v in outcomes.items() if v) + " login=CEVI"


def admin_rows() -> list[Row]:
    """The rows of every model's admin pages, from ``ADMIN_MODELS``."""
    rows = []
    registered = {m._meta.label_lower for m in admin.site._registry}
    for label, who in ADMIN_MODELS.items():
        if label not in registered:
            continue
        app, model = label.split(".")
        base = f"admin/{app}/{model}/"
        seen = who["view"] + who["change"]
        obj = {"object_id": f"@{label}"}
        other = "404" if who.get("team", True) else "same"
        on_obj = {"params": obj, "other": other, "body": "form"}
        rows += [
            R(base, {"GET": admin_spec(seen, who, on_object=False)}),
            R(
                f"{base}add/",
                dict.fromkeys(("GET", "POST"), admin_spec(who["add"], who, on_object=False)),
                body="form",
            ),
            R(
                f"{base}<object_id>/change/",
                {
                    "GET": admin_spec(seen, who, on_object=True),
                    "POST": admin_spec(who["change"], who, on_object=True),
                },
                **on_obj,
            ),
            R(
                f"{base}<object_id>/history/",
                {"GET": admin_spec(seen, who, on_object=True)},
                **on_obj,
            ),
            # "post=yes" confirms: a delete that skipped its check would happen.
            *[
                R(
                    f"{base}<object_id>/delete/",
                    {method: admin_spec(who["delete"], who, on_object=True)},
                    form=(("post", "yes"),),
                    xfail=ADMIN_XFAIL.get((label, f"delete {method}"), ""),
                    **on_obj,
                )
                for method in ("GET", "POST")
            ],
            # The old address of the change page: a redirect to it, for any id.
            R(f"{base}<object_id>/", {"GET": f"ok={CONSOLE} login=CEVI"}, params=obj, other="same"),
        ]
        if label == "auth.user":
            rows.append(
                R(
                    f"{base}<id>/password/",
                    {"GET": "ok=S 403=AM login=CEVI"},
                    params={"id": "@auth.user"},
                    other="same",
                )
            )
    return rows


ALL_ROWS = TABLE + admin_rows()


# --- the URL patterns -------------------------------------------------------------------

_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


def normalize(route: str) -> str:
    """``api/^jobs/(?P<pk>[^/.]+)$`` and ``api/jobs/<int:pk>`` both read ``api/jobs/<pk>``."""
    route = _GROUP.sub(r"<\1>", route.replace("^", "").replace("$", ""))
    return _CONVERTER.sub(r"<\1>", route)


def walk(patterns, prefix: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            assert isinstance(pattern, URLPattern)
            yield normalize(prefix + str(pattern.pattern)), pattern


def served_methods(pattern: URLPattern) -> set[str]:
    """The methods a DRF view answers on this route (empty for plain Django views)."""
    callback = pattern.callback
    actions = getattr(callback, "actions", None)
    if actions:
        return {m.upper() for m in actions} - {"HEAD"}  # HEAD is GET without the body
    view_class = getattr(callback, "cls", None)
    if view_class is None or not hasattr(view_class, "permission_classes"):
        return set()
    names = ("get", "post", "put", "patch", "delete")
    return {m.upper() for m in names if hasattr(view_class, m)}


HTTP_PATTERNS = dict(walk(get_resolver().url_patterns))
WS_PATTERNS = dict(walk(websocket_urlpatterns))
SIO_TOPICS = {f"socket.io:{kind}:<{kind}>" for kind in socketio_topics}
LIVE_METHODS = ("WS", "SIO")  # probed over a live server, not by the test client


def test_every_url_has_a_row():
    """A new URL, or a new method on a DRF view, fails here until the table says who may."""
    rows: dict[str, set[str]] = {}
    for row in ALL_ROWS:
        rows.setdefault(row.route, set()).update(row.methods)
    missing = sorted(set(HTTP_PATTERNS) - set(rows))
    missing += sorted(f"{route} (WebSocket)" for route in set(WS_PATTERNS) - set(rows))
    missing += sorted(f"{route} (Socket.IO)" for route in SIO_TOPICS - set(rows))
    assert not missing, f"URL patterns with no row in the permission matrix: {missing}"
    unknown = sorted(set(rows) - set(HTTP_PATTERNS) - set(WS_PATTERNS) - SIO_TOPICS)
    assert not unknown, f"rows for URL patterns that do not exist: {unknown}"
    unprobed = sorted(
        f"{route} {method}"
        for route, pattern in HTTP_PATTERNS.items()
        for method in served_methods(pattern) - rows[route]
    )
    assert not unprobed, f"methods served but not in the matrix: {unprobed}"
    registered = {m._meta.label_lower for m in admin.site._registry}
    assert registered <= set(ADMIN_MODELS), "ADMIN_MODELS must name every admin model"
    assert set(ADMIN_MODELS) - registered <= OPTIONAL_ADMIN_MODELS


def test_every_spec_names_every_role_once():
    for row in ALL_ROWS:
        for method, spec in row.methods.items():
            outcomes = expected_outcomes(spec)
            assert set(outcomes) == set(ROLES), (row.route, method, spec)


def expected_outcomes(spec: str) -> dict[str, str]:
    """``"ok=AMCS 403=V"`` → an outcome for every role (members not named: 404; anonymous:
    login)."""
    named: dict[str, str] = {}
    for part in spec.split():
        outcome, roles = part.split("=")
        for role in roles:
            assert role in ROLES and role not in named, (spec, role)
            named[role] = outcome
    return {role: named.get(role, "login" if role == "U" else "404") for role in ROLES}


# --- the objects probed ---------------------------------------------------------------------

# Per-user kinds: a user's own object when they have one (else the team's, someone else's).
PER_USER = ("evaluations.assignment", "accounts.notification", "accounts.apitoken")
KINDS = {
    "job": "generation.generationjob",
    "output": "generation.generationoutput",
    "scenario": "scenarios.scenario",
    "task": "scenarios.task",
    "judge": "evaluations.llmjudge",
    "invitation": "evaluations.invitation",
    "connection": "providers.providerconnection",
    "llmmodel": "providers.llmmodel",
    "template": "prompts.prompttemplate",
    "version": "prompts.promptversion",
    "assignment": "evaluations.assignment",
    "judgment": "evaluations.judgment",
    "notification": "accounts.notification",
    "apitoken": "accounts.apitoken",
    "group": "accounts.teamgroup",
    "budgetplan": "evaluations.budgetplan",
}


@dataclass
class World:
    users: dict[str, Any]  # role letter → user; "B" is team B's admin
    keys: dict[str, str]  # role letter → API token key
    sessions: dict[str, str]  # role letter → session cookie value
    objects: dict[tuple[str, str], Any]  # (team "a"/"b", kind) → object
    # (role letter, model label) → the user's own object; "S/b": the superuser's in team B.
    mine: dict[tuple[str, str], Any]
    values: dict[tuple[str, str], Any] = field(default_factory=dict)  # non-model values
    # What ``fingerprint`` reads before any probe: the table counts ("tables") and each
    # probed object's values (by model label and pk), read once (see ``state_before``).
    before: dict[Any, Any] = field(default_factory=dict)

    def get(self, role: str, scope: str, kind: str) -> Any:
        label = KINDS.get(kind, kind)
        if label in PER_USER:
            owner = role if scope == "own" else ("S/b" if role == "S" else "B")
            found = self.mine.get((owner, label))
            if found is not None:
                return found
        return self.objects[("a" if scope == "own" else "b", label)]


def _job(user, team, marker):
    connection = ConnectionFactory(team=team, kind="mock", name=f"conn-{marker}")
    models = [
        LLMModelFactory(connection=connection, model_id=f"{marker}-small", display_name="Small"),
        LLMModelFactory(connection=connection, model_id=f"{marker}-large", display_name="Large"),
    ]
    template = PromptTemplateFactory(team=team, name=f"prompt-{marker}")
    version = make_version(template, [("", "Summarize: {{content}}")])
    items = [{"id": f"s{i}", "content": f"Text {i} about rivers."} for i in range(3)]
    data = {
        "team": team.slug,
        "name": f"Job {marker}",
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
        "prompt_versions": [version.pk],
        "models": [m.pk for m in models],
        "repetitions": 3,
        "temperatures": [0.0, 1.0],
        "max_tokens": 50,
    }
    plan = planning.job_plan(user=user, data=data, upload=None, filename="")
    job = generation_services.job_create(user=user, plan=plan)
    for output in job.outputs.all():
        GenerationOutput.objects.filter(pk=output.pk).update(
            status="completed", content=f"Answer {output.pk} {marker}"
        )
    return job, connection, models, template, version


def build_world() -> World:
    team_a = Team.objects.create(name="Team Alpha", slug="team-alpha")
    team_b = Team.objects.create(name="Team Bravo", slug="team-bravo")
    users: dict[str, Any] = {}
    for letter, role in MEMBER_ROLES.items():
        users[letter] = UserFactory(username=f"alpha-{role}")
        MembershipFactory(user=users[letter], team=team_a, role=role)
    users["B"] = UserFactory(username="bravo-admin")
    MembershipFactory(user=users["B"], team=team_b, role=Role.ADMIN)
    users["I"] = UserFactory(username="alpha-invitee")
    users["S"] = UserFactory(username="root", is_superuser=True, is_staff=True)

    objects: dict[tuple[str, str], Any] = {}
    mine: dict[tuple[str, str], Any] = {}
    values: dict[tuple[str, str], Any] = {}
    for key, team, owner in (("a", team_a, users["A"]), ("b", team_b, users["B"])):
        marker = "alpha" if key == "a" else "bravo"
        job, connection, models, template, version = _job(owner, team, marker)
        scenario = scenario_services.scenario_from_job(
            user=owner,
            job=job,
            data={"name": f"Scenario {marker}", "type": "comparison", "overlap": 1},
        )
        scenario = scenario_services.scenario_open(user=owner, scenario=scenario)
        judge = judges.judge_create(
            user=owner,
            scenario=scenario,
            data={"name": f"Judge {marker}", "model": models[0].pk},
        )
        judge_run = judges.judge_run(user=owner, judge=judge, data={})
        pending = invitations.invite(
            user=owner,
            scenario=scenario,
            emails=[f"guest-{marker}@example.org"],
            link_for=lambda token: token,
        )
        invitation, token = pending[0]
        values[(key, "invitation_token")] = token
        batch = ProviderBatch.objects.create(
            team=team,
            connection=connection,
            work_kind="generation",
            work_id=job.pk,
            model_id=models[0].model_id,
            name=f"batch-{marker}",
            protocol="openai",
        )
        audit_event = audit.record(user=owner, team=team, action="matrix.probe", target=marker)
        judge_file = JudgeFile.objects.create(
            team=team, purpose="batch", filename=f"{marker}.jsonl", bytes=2, lines=1
        )
        JudgeFileLine.objects.create(file=judge_file, number=1, text="{}")
        judge_batch = JudgeBatch.objects.create(
            team=team, input_file=judge_file, status="completed", total=1, failed=1
        )
        values[(key, "judge_file")] = judge_file.public_id
        values[(key, "judge_batch")] = judge_batch.public_id
        objects |= {
            (key, "generation.generationjob"): job,
            (key, "generation.generationoutput"): job.outputs.order_by("pk").first(),
            (key, "providers.providerconnection"): connection,
            (key, "providers.llmmodel"): models[0],
            (key, "prompts.prompttemplate"): template,
            (key, "prompts.promptversion"): version,
            (key, "scenarios.scenario"): scenario,
            (key, "scenarios.variant"): scenario.variants.order_by("pk").first(),
            (key, "scenarios.task"): scenario.tasks.order_by("pk").first(),
            (key, "evaluations.adjudication"): review.adjudication_set(
                user=owner,
                scenario=scenario,
                task_id=scenario.tasks.order_by("pk").first().pk,
                data={"answer": {"winner": "A"}, "note": marker},
            ),
            (key, "evaluations.llmjudge"): judge,
            (key, "evaluations.judgerun"): judge_run,
            (key, "evaluations.trustgate"): TrustGate.objects.create(
                scenario=scenario, min_kappa=0.6, min_shared_items=100
            ),
            (key, "evaluations.teamtrustgate"): TeamTrustGate.objects.create(
                team=team, max_flip_rate=0.1
            ),
            (key, "evaluations.invitation"): invitation,
            (key, "runs.providerbatch"): batch,
            (key, "evaluations.judgebatch"): judge_batch,
            (key, "evaluations.judgefile"): judge_file,
            # A proposal of the budget scheduler, stale (its fingerprint is no state's).
            (key, "evaluations.budgetplan"): BudgetPlan.objects.create(
                scenario=scenario,
                created_by=owner,
                question={"kind": "ranking", "tau": 0.9},
                budget={"usd": 1.0, "hours": 0.0, "hourly_rate_usd": 0.0},
                fingerprint="stale",
                proposal={},
            ),
            (key, "accounts.auditevent"): audit_event,
            (key, "accounts.team"): team,
            (key, "accounts.membership"): Membership.objects.filter(team=team).first(),
        }
        group = TeamGroup.objects.create(team=team, name=f"Group {marker}")
        group.members.add(owner)
        objects[(key, "accounts.teamgroup")] = group
        values[(key, "group_member")] = owner.username
        values[(key, "team_slug")] = team.slug
        check = attention.attention_add(
            user=owner,
            scenario=scenario,
            data={"instruction": f"Check {marker}: choose B.", "answer": {"winner": "B"}},
        )
        values[(key, "attention_task")] = check.task_id

    # The invitee accepts an invitation to team A's scenario.
    scenario_a = objects[("a", "scenarios.scenario")]
    made = invitations.invite(
        user=users["A"],
        scenario=scenario_a,
        emails=["invitee@example.org"],
        link_for=lambda token: token,
    )
    invitations.accept(user=users["I"], token=made[0][1])

    # Everyone who may evaluate gets an assignment of their own; A's evaluator and B's admin
    # have answered one (the judgments).
    scenario_b = objects[("b", "scenarios.scenario")]
    for letter in ("E", "B"):
        scenario = scenario_a if letter == "E" else scenario_b
        answered = evaluation_services.next_task(user=users[letter], scenario=scenario)
        assert answered is not None
        judgment = evaluation_services.submit(
            user=users[letter], assignment=answered, data={"answer": {"winner": "A"}}
        )
        objects[("a" if letter == "E" else "b", "evaluations.judgment")] = judgment
    for letter in ("A", "M", "C", "E", "I", "S", "B"):
        scenario = scenario_b if letter == "B" else scenario_a
        assignment = evaluation_services.next_task(user=users[letter], scenario=scenario)
        assert assignment is not None, letter
        mine[(letter, "evaluations.assignment")] = assignment
    mine[("S/b", "evaluations.assignment")] = evaluation_services.next_task(
        user=users["S"], scenario=scenario_b
    )
    objects[("a", "evaluations.assignment")] = mine[("E", "evaluations.assignment")]
    objects[("b", "evaluations.assignment")] = mine[("B", "evaluations.assignment")]

    keys, sessions = {}, {}
    for letter, user in users.items():
        _, keys[letter] = token_create(user=user, name="matrix")
        spare, _ = token_create(user=user, name=f"spare {letter}")
        mine[(letter, "accounts.apitoken")] = spare
        team = team_b if letter == "B" else team_a
        mine[(letter, "accounts.notification")] = Notification.objects.create(
            user=user, team=team, kind="matrix", message=f"Hello {team.name}"
        )
        client = Client()
        client.force_login(user)
        sessions[letter] = client.cookies[settings.SESSION_COOKIE_NAME].value
    mine[("S/b", "accounts.apitoken")] = mine[("B", "accounts.apitoken")]
    mine[("S/b", "accounts.notification")] = mine[("B", "accounts.notification")]
    for key in ("a", "b"):
        objects[(key, "accounts.apitoken")] = mine[
            ("A" if key == "a" else "B", "accounts.apitoken")
        ]
        objects[(key, "accounts.notification")] = mine[
            ("A" if key == "a" else "B", "accounts.notification")
        ]

    # Objects of no team, the same in both columns.
    now = timezone.now()
    shared = {
        "auth.group": Group.objects.create(name="matrix"),
        "auth.user": users["V"],
        "django_q.schedule": Schedule.objects.create(name="matrix", func="math.floor"),
        "django_q.success": Task.objects.create(
            id="matrix-ok", name="ok", func="math.floor", started=now, stopped=now, success=True
        ),
        "django_q.failure": Task.objects.create(
            id="matrix-ko", name="ko", func="math.floor", started=now, stopped=now, success=False
        ),
        "django_q.ormq": OrmQ.objects.create(key="matrix", payload="x", lock=now),
    }
    for key in ("a", "b"):
        for label, obj in shared.items():
            objects[(key, label)] = obj
    scenario_type = ContentType.objects.get_for_model(scenario_a).pk
    values[("a", "scenario_type")] = values[("b", "scenario_type")] = scenario_type
    # An evaluator of each team's scenario, by username (quality control's exclusions).
    values[("a", "rater")], values[("b", "rater")] = users["E"].username, users["B"].username
    return World(users, keys, sessions, objects, mine, values)


@pytest.fixture(scope="class")
def world(django_db_setup, django_db_blocker):
    """Built once for the class, inside a transaction rolled back at its end; each test runs
    in a savepoint of it (pytest-django's ``db``), so what a probe writes is undone."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield build_world()
        transaction.set_rollback(True)


# --- probing ---------------------------------------------------------------------------------

MISSING_ID = 2_000_000_000


def fill(world: World, row: Row, role: str, scope: str) -> tuple[str, list[Any]]:
    """The row's URL for this role and scope (``missing``: ids of no object), and the objects
    it names."""
    named: list[Any] = []

    def value(raw: str) -> str:
        if not raw.startswith("@"):
            return raw
        kind = raw[1:]
        team = "a" if scope == "own" else "b"
        if (team, kind) in world.values:
            return "no-such-token" if scope == "missing" else str(world.values[(team, kind)])
        if scope == "missing":
            return str(MISSING_ID)
        obj = world.get(role, scope, kind)
        named.append(obj)
        return str(obj.pk)

    path = row.route
    for name, raw in row.params.items():
        path = path.replace(f"<{name}>", value(raw))
    assert "<" not in path, path
    if row.query:
        query = "&".join(f"{k}={value(v)}" for k, v in (p.split("=") for p in row.query.split("&")))
        path = f"{path}?{query}"
    return f"/{path}", named


def table_counts() -> tuple:
    """Every table's row count, in one query."""
    tables = sorted(
        model._meta.db_table
        for model in apps.get_models()
        if model._meta.managed
        and not model._meta.proxy
        and model._meta.db_table != "django_session"
    )
    counts = ", ".join(f"(SELECT COUNT(*) FROM {connection.ops.quote_name(t)})" for t in tables)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {counts}")
        return cursor.fetchone()


def object_values(obj: Any) -> tuple:
    return tuple(sorted(type(obj)._base_manager.filter(pk=obj.pk).values().first().items()))


def fingerprint(objects: list[Any]) -> tuple:
    """Every table's row count and the probed objects' values (one query each): a refused
    request changes neither."""
    return table_counts(), tuple(object_values(obj) for obj in objects)


def state_before(world: World, objects: list[Any]) -> tuple:
    """``fingerprint(objects)`` as it is before any probe. Every probe starts from the same
    state, the class's world (each probe's savepoint and each test's transaction are rolled
    back), so each part is read once, at the first probe that needs it, not twice per probe.
    A write that escaped a rollback would differ from it too, and fail the next refused probe."""
    if "tables" not in world.before:
        world.before["tables"] = table_counts()
    rows = []
    for obj in objects:
        key = (type(obj)._meta.label, obj.pk)
        if key not in world.before:
            world.before[key] = object_values(obj)
        rows.append(world.before[key])
    return world.before["tables"], tuple(rows)


# One client of each kind for every probe: a new client builds the middleware stack again
# (WhiteNoise scans every static file), which would be most of the run time.
_CLIENTS: dict[str, Any] = {}


def request(world: World, row: Row, method: str, role: str, path: str):
    if row.route.startswith(("api/", "v1/")):
        api = _CLIENTS.setdefault("api", APIClient())
        api.cookies.clear()
        api.credentials(
            **({} if role == "U" else {"HTTP_AUTHORIZATION": f"Token {world.keys[role]}"})
        )
        if method == "GET":
            return api.get(path)
        if method == "DELETE":
            return api.delete(path)
        if row.body == "multipart":
            return api.generic(method, path, *_multipart())
        return api.generic(method, path, "{}", content_type="application/json")
    client = _CLIENTS.setdefault("web", Client())
    client.cookies.clear()
    if role != "U":
        client.cookies[settings.SESSION_COOKIE_NAME] = world.sessions[role]
    if method == "GET":
        return client.get(path)
    return client.generic(
        method, path, urlencode(row.form), content_type="application/x-www-form-urlencoded"
    )


def _multipart() -> tuple[bytes, str]:
    from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

    return encode_multipart(BOUNDARY, {}), MULTIPART_CONTENT


def outcome(response, route: str) -> str:
    """What the response says: ok, 403, 404, login, or the bare status code."""
    status = response.status_code
    location = response.get("Location", "")
    refused = [
        m for m in get_messages(response.wsgi_request) if str(m) == Forbidden.default_message
    ]
    if status == 401 or (
        status in (301, 302, 303) and location.startswith(("/login/", "/admin/login/"))
    ):
        return "login"
    if status in (301, 302, 303) and location == "/admin/" and route == "admin/logout/":
        return "login"  # the console's answer to someone who may not use it: its front door
    if refused:
        return "403"
    if status < 400 or status in (400, 409):
        return "ok"
    return str(status)


def probe(world: World, row: Row, method: str, role: str, scope: str, expected: str) -> str:
    """One request in a savepoint rolled back after it; a description of what is wrong with
    the answer, or ""."""
    path, named = fill(world, row, role, scope)
    where = f"{role} {scope}: {method} {path}"
    with transaction.atomic():
        before = state_before(world, named) if method != "GET" else None
        try:
            response = request(world, row, method, role, path)
        except Exception as exc:  # the test client re-raises what a view raised: a 500
            transaction.set_rollback(True)
            return f"{where}: raised {exc!r:.300}"
        got = outcome(response, row.route)
        problems = []
        if role not in ("U", "S") and (scope == "own" or row.other != "same"):
            body = b"" if response.streaming else response.content
            if b"bravo" in body.lower():
                problems.append("shows team B")
        if scope == "own" or row.other == "same" or (role == "S" and row.superuser_other == "ok"):
            if got != expected:
                problems.append(f"{got} ({response.status_code}), expected {expected}")
        elif got not in ("403", "404", "login"):
            problems.append(f"another team's object: {got} ({response.status_code})")
        elif got != "404":
            # Refused before any lookup: a missing object must get exactly the same.
            missing, _ = fill(world, row, role, "missing")
            again = outcome(request(world, row, method, role, missing), row.route)
            if expected == "ok" or again != got:
                problems.append(f"another team's object: {got}, a missing one: {again}")
        if before is not None and got != "ok" and fingerprint(named) != before:
            problems.append("refused, yet the data changed")
        transaction.set_rollback(True)
    return f"{where}: {'; '.join(problems)}" if problems else ""


def cases(kind: str):
    for row in ALL_ROWS:
        for method in row.methods:
            if (method in LIVE_METHODS) == (kind == "live"):
                fixed = ",".join(v for v in row.params.values() if not v.startswith("@"))
                name = f"{method} /{row.route}{f' [{fixed}]' if fixed else ''}"
                marks = [pytest.mark.xfail(strict=True, reason=row.xfail)] if row.xfail else []
                yield pytest.param(row, method, id=name, marks=marks)


@pytest.mark.django_db
@pytest.mark.usefixtures("world")
class TestHttpMatrix:
    @pytest.mark.parametrize(("row", "method"), list(cases("http")))
    def test_every_role_in_both_teams(self, world, row, method):
        """Each role, on its own team's object and on the other team's."""
        expected = expected_outcomes(row.methods[method])
        failures = [
            problem
            for role in ROLES
            for scope in (["own"] if row.other is None or role == "U" else ["own", "other"])
            if (problem := probe(world, row, method, role, scope, expected[role]))
        ]
        assert not failures, "\n".join(failures)


# --- WebSockets --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_websocket_matrix(platform_server):
    """The WebSocket rows, over the real ASGI application (committed data: the server's
    threads have their own database connections)."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    world = build_world()
    codes = {4401: "login", 4404: "404"}

    async def probe(path: str, role: str) -> str:
        headers = [] if role == "U" else [("Authorization", f"Token {world.keys[role]}")]
        try:
            async with connect(
                f"ws://{platform_server}{path}", additional_headers=headers, open_timeout=10
            ) as ws:
                message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                return "ok" if message["event"].endswith("snapshot") else str(message)
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else 0
            return codes.get(code, str(code))

    failures = asyncio.run(live_failures(world, "WS", probe))
    assert not failures, "\n".join(failures)


async def live_failures(world: World, method: str, probe: Any) -> list[str]:
    """Probe every row of a live method (``await probe(path, role)`` → an outcome) for each
    role on its own team's object, the other team's and a missing one."""
    failures = []
    for row in (r for r in TABLE if method in r.methods):
        expected = expected_outcomes(row.methods[method])
        for role in ROLES:
            for scope in ("own", "other", "missing"):
                path, _ = fill(world, row, role, scope)
                got = await probe(path, role)
                want = expected[role]
                if scope != "own" and role != "S":
                    want = "login" if role == "U" else "404"
                if scope == "missing" and role == "S":
                    want = "404"
                if got != want:
                    failures.append(f"{path} as {role} ({scope}): {got}, expected {want}")
    return failures


@pytest.mark.django_db(transaction=True)
def test_socketio_matrix(platform_server):
    """The Socket.IO rows: each role connects with its token (anonymous: refused, "login")
    and subscribes; ``not_found`` is "404", a snapshot "ok"."""
    import aiohttp
    import socketio

    world = build_world()

    async def probe(path: str, role: str) -> str:
        _, kind, pk = path.lstrip("/").split(":")
        snapshots: asyncio.Queue = asyncio.Queue()
        async with aiohttp.ClientSession() as http:
            client = socketio.AsyncClient(reconnection=False, http_session=http)
            client.on("*", lambda event, data: snapshots.put_nowait(event))
            auth = None if role == "U" else {"token": world.keys[role]}
            try:
                await client.connect(f"http://{platform_server}", auth=auth, wait_timeout=10)
            except socketio.exceptions.ConnectionError:
                return "login"
            try:
                answer = await client.call("subscribe", {kind: int(pk)}, timeout=10)
                if answer.get("ok"):
                    event = await asyncio.wait_for(snapshots.get(), 10)
                    return "ok" if event.endswith("snapshot") else event
                return {"not_found": "404"}.get(answer.get("error"), str(answer))
            finally:
                await client.disconnect()

    failures = asyncio.run(live_failures(world, "SIO", probe))
    assert not failures, "\n".join(failures)
