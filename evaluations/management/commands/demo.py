"""``python manage.py demo``: the whole loop, offline, on the mock provider: a generation job,
a comparison and a rating scenario of its outputs, and an LLM judge over both."""

from __future__ import annotations

import asyncio
import csv
import json
import secrets
import sys
import threading
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connections, transaction

import generation
from evalplatform.accounts.models import Membership, Team
from evalplatform.accounts.roles import Role
from evalplatform.bootstrap import bootstrap
from evalplatform.prompts import services as prompt_services
from evalplatform.prompts.models import PromptTemplate, PromptVersion
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.providers.models import LLMModel, ProviderConnection
from evalplatform.providers.services import catalog_load
from evalplatform.runs.engine import run_live
from evaluations.judges import services as judges
from evaluations.models import LLMJudge
from generation import planning, services
from generation.models import GenerationJob, JobStatus
from generation.runners.live import GenerationWork
from scenarios import services as scenario_services
from scenarios.models import Scenario, ScenarioType
from scenarios.types import registry

SAMPLES = Path(generation.__file__).resolve().parent / "fixtures" / "writing_samples.csv"
JOB_NAME = "Demo: feedback on writing samples"
PROMPTS = {
    "Feedback (detailed)": [
        ("System", "You are a writing tutor. Be specific and kind."),
        ("Task", "Give feedback on this student text in three bullet points:\n\n{{text}}"),
    ],
    "Feedback (one line)": [
        ("", "In one sentence, what is the main weakness of this text?\n\n{{text}}"),
    ],
}
DEMO_JUDGE = "Mock judge (position bias on)"
DEMO_USERS = {"demo-manager": Role.MANAGER, "demo-evaluator": Role.EVALUATOR}


class Command(BaseCommand):
    help = (
        "Create a demo team, users, the mock provider, two prompts and the writing samples, "
        "and run a generation job live on the mock. Safe to run again."
    )

    def handle(self, *args, **options):
        call_command("migrate", interactive=False, verbosity=0)
        first = bootstrap()
        if first.created_admin and first.password:
            self.stdout.write(
                self.style.SUCCESS(f"Admin login: {first.username} / {first.password} (shown once)")
            )
        team, user, created = self._setup()
        for username, password in created:
            self.stdout.write(f"Demo user {username} / {password} (shown once)")
        job = GenerationJob.objects.filter(team=team, name=JOB_NAME).first()
        if job is None:
            job = self._create_job(team, user)
        if job.status in (JobStatus.CREATED, JobStatus.PAUSED):
            services.job_start(user=user, job=job)
            job.refresh_from_db()
        if job.status == JobStatus.RUNNING:
            self._run(job)
        job = GenerationJob.objects.get(pk=job.pk)
        self._summary(job)
        if job.status == JobStatus.COMPLETED:
            self._judges(self._scenarios(job, user), user)

    def _scenarios(self, job, user):
        """A comparison and a rating scenario of the job's first prompt at temperature 0,
        open for the demo evaluator."""
        first_prompt = job.prompts.order_by("position").first()
        outputs = {"prompts": [first_prompt.pk], "repetitions": [0], "temperatures": [0.0]}
        designs = [
            {
                "name": "Demo: which feedback helps more",
                "type": ScenarioType.COMPARISON.value,
                "instructions": "Which feedback would help the writer more?",
                "config": {"reverse_share": 0.25, "ties": True},
            },
            {
                "name": "Demo: feedback quality",
                "type": ScenarioType.RATING.value,
                "instructions": "Rate the feedback on each dimension.",
                "config": {
                    "dimensions": [
                        {
                            "name": "Helpfulness",
                            "min": 1,
                            "max": 5,
                            "anchors": {"1": "not at all", "5": "very"},
                        },
                        {"name": "Specificity", "min": 1, "max": 5},
                    ]
                },
            },
        ]
        made = []
        for design in designs:
            scenario = Scenario.objects.filter(team=job.team, name=design["name"]).first()
            if scenario is None:
                scenario = scenario_services.scenario_from_job(
                    user=user, job=job, data=design | {"outputs": outputs, "seed": 1}
                )
                scenario = scenario_services.scenario_open(user=user, scenario=scenario)
            self.stdout.write(
                f"Scenario {scenario.name!r} ({scenario.type}, {scenario.tasks.count()} tasks, "
                f"{scenario.status}): POST /api/evaluations/scenarios/{scenario.pk}/next"
            )
            made.append(scenario)
        return made

    def _judges(self, scenarios, user):
        """The mock judge (its position-bias knob on) over each demo scenario: pairs in both
        orders, two calls at each of two temperatures."""
        model = LLMModel.objects.get(connection__team=scenarios[0].team, model_id="mock-judge")
        for scenario in scenarios:
            judge = LLMJudge.objects.filter(scenario=scenario, name=DEMO_JUDGE).first()
            if judge is None:
                judge = judges.judge_create(
                    user=user,
                    scenario=scenario,
                    data={
                        "name": DEMO_JUDGE,
                        "model": model.pk,
                        "temperatures": [0.0, 1.0],
                        "repetitions": 2,
                        "swap": registry.of(scenario).swappable,
                        "max_tokens": 200,
                    },
                )
            if not judge.runs.exists():
                run = judges.judge_run(user=user, judge=judge, data={})
                self.stdout.write(f"Judging {scenario.name!r}: {run.job.total_cells} calls")
                job = GenerationJob.objects.get(pk=run.job_id)
                if job.status == JobStatus.RUNNING:
                    self._run(job)
            verdicts = judge.judgments.exclude(parse_status="failed").count()
            self.stdout.write(
                f"Judge {judge.name!r} on {scenario.name!r}: {verdicts} verdicts "
                f"(GET /api/judges/{judge.pk}/runs)"
            )

    @transaction.atomic
    def _setup(self):
        User = get_user_model()
        team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": "Demo team"})
        created = []
        for username, role in DEMO_USERS.items():
            user = User.objects.filter(username=username).first()
            if user is None:
                password = secrets.token_urlsafe(9)
                user = User.objects.create_user(username=username, password=password)
                created.append((username, password))
            Membership.objects.get_or_create(user=user, team=team, defaults={"role": role})
        manager = User.objects.get(username="demo-manager")
        mock, _ = ProviderConnection.objects.get_or_create(
            team=team,
            name="Mock (offline)",
            defaults={"kind": "mock", "options": {"latency_s": 0.02, "position_bias": 0.15}},
        )
        catalog_load(team=team, connection=mock)
        for name, blocks in PROMPTS.items():
            if not PromptTemplate.objects.filter(team=team, name=name).exists():
                prompt_services.template_create(
                    user=manager,
                    team=team,
                    name=name,
                    blocks=[{"title": t, "body": b} for t, b in blocks],
                )
        return team, manager, created

    def _create_job(self, team, user):
        with SAMPLES.open(encoding="utf-8") as handle:
            rows = [
                {
                    "id": r["ID"],
                    "text": " ".join(r["text"].split()),
                    "quality_score": int(r["quality_score"]),
                }
                for r in csv.DictReader(handle)
            ]
        versions = [
            version.pk
            for version in PromptVersion.objects.filter(
                template__team=team, template__name__in=PROMPTS
            )
            .order_by("template__name", "-number")
            .distinct()
            if version.number == version.template.versions.count()
        ]
        models = list(
            ProviderConnection.objects.get(team=team, name="Mock (offline)")
            .models.filter(model_id__in=["mock-small", "mock-large"])
            .values_list("pk", flat=True)
        )
        data = {
            "team": team.slug,
            "name": JOB_NAME,
            "prompt_versions": versions,
            "models": models,
            "repetitions": 2,
            "temperatures": [0.0, 1.0],
            "max_tokens": 300,
            "concurrency": 16,
            "source": {"type": "manual", "format": "json", "content": json.dumps(rows)},
        }
        return services.job_create(user=user, plan=planning.job_plan(user=user, data=data))

    def _run(self, job):
        done = threading.Event()
        errors: list[BaseException] = []

        def work():
            try:
                asyncio.run(run_live(GenerationWork(job.pk, retry=RetryPolicy())))
            except BaseException as exc:  # reported below
                errors.append(exc)
            finally:
                connections.close_all()  # this thread's own database connection
                done.set()

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        while not done.wait(0.2):
            self._bar(GenerationJob.objects.get(pk=job.pk))
        self._bar(GenerationJob.objects.get(pk=job.pk))
        sys.stdout.write("\n")
        if errors:
            raise errors[0]

    def _bar(self, job):
        finished = job.completed_cells + job.failed_cells
        width = 30
        filled = int(width * finished / max(1, job.total_cells))
        self.stdout.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {finished}/{job.total_cells} "
            f"· {job.failed_cells} failed · ${job.cost_usd:.4f}",
            ending="",
        )
        self.stdout.flush()

    def _summary(self, job):
        self.stdout.write(
            self.style.SUCCESS(
                f"{job.name}: {job.status}, {job.completed_cells}/{job.total_cells} outputs, "
                f"{job.failed_cells} failed, ${job.cost_usd:.4f} (mock prices)."
            )
        )
        self.stdout.write(
            f"Outputs: GET /api/generation/jobs/{job.pk}/outputs · export: POST "
            f"/api/generation/jobs/{job.pk}/export/csv · admin: /admin/generation/generationjob/"
        )
        self.stdout.write("Sign in at http://127.0.0.1:8000/login/ (run: python manage.py serve)")
