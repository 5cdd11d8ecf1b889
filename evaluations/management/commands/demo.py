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
from django.core.files.uploadedfile import SimpleUploadedFile
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
from evaluations.judgefiles import services as judge_files
from evaluations.judges import services as judges
from evaluations.models import JudgeBatch, LLMJudge
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
MOCK_CONNECTION = "Mock (offline)"


# The seeds' workflows (``--seeds``): the essay-scoring activity's rubric, pairwiseLLM's
# template, and the JSONL judge service's rows.
ESSAY_JOB = "Demo seed: essay scoring, 20 calls at the default temperature and at 0"
ESSAY_RUBRIC = (
    "You are scoring a student essay. Score content, organization and language, each 1-4, "
    "with a one-sentence justification each, and their total. Return only JSON with the "
    "fields content_score, content_justification, organization_score, "
    "organization_justification, language_score, language_justification, total_score."
    "\n\nEssay:\n{{text}}"
)
ESSAY_FIELDS = [
    "content_score",
    "content_justification",
    "organization_score",
    "organization_justification",
    "language_score",
    "language_justification",
    "total_score",
]
PAIRWISE_TEMPLATE = (
    "You are comparing two writing samples. Respond with "
    "<BETTER_SAMPLE>SAMPLE_1</BETTER_SAMPLE> or <BETTER_SAMPLE>SAMPLE_2</BETTER_SAMPLE>, then "
    "one sentence.\n\nSAMPLE 1:\n{{response_a}}\n\nSAMPLE 2:\n{{response_b}}"
)
PAIRWISE_JUDGE = "pairwiseLLM: better sample, both orders"
JUDGE_FILE_NAME = "demo-seed-judge-rows.jsonl"


class Command(BaseCommand):
    help = (
        "Create a demo team, users, the mock provider, two prompts and the writing samples, "
        "and run a generation job live on the mock. Safe to run again. --seeds adds each "
        "source document's workflow."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--seeds",
            action="store_true",
            help="Also run the seeds' workflows: the essay-scoring activity (scored outputs, "
            "per-essay consistency), pairwiseLLM's template as a judge, and a JSONL judge file.",
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
            scenarios = self._scenarios(job, user)
            self._judges(scenarios, user)
            if options.get("seeds"):
                self._essays(team, user)
                self._pairwise(scenarios[0], user)
                self._judge_file(team, user)

    def _template(self, team, user, name, body):
        """The team's latest version of the template ``name`` (made with ``body``)."""
        template = PromptTemplate.objects.filter(team=team, name=name).first()
        if template is None:
            template = prompt_services.template_create(
                user=user, team=team, name=name, blocks=[{"title": "", "body": body}]
            )
        return template.versions.order_by("-number").first()

    def _essays(self, team, user):
        """The essay-scoring activity: ten samples scored on the rubric 20 times with no
        temperature sent and 20 at 0, read into fields; the per-essay consistency."""
        job = GenerationJob.objects.filter(team=team, name=ESSAY_JOB).first()
        if job is None:
            version = self._template(team, user, "Essay rubric (seed)", ESSAY_RUBRIC)
            model = _mock_model(team, "mock-large")
            data = {
                "team": team.slug,
                "name": ESSAY_JOB,
                "prompt_versions": [version.pk],
                "models": [model.pk],
                "repetitions": 20,
                "temperatures": [None, 0.0],
                "max_tokens": 400,
                "concurrency": 16,
                "reply_format": {"kind": "json", "fields": ESSAY_FIELDS},
                "source": {
                    "type": "manual",
                    "format": "json",
                    "content": json.dumps(_samples()[:10]),
                },
            }
            job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
            services.job_start(user=user, job=job)
            self._run(job)
        self.stdout.write(
            f"Essay scoring: {job.outputs.filter(parse_status__in=['ok', 'extracted']).count()}"
            f"/{job.total_cells} replies read into fields · per essay: "
            f"/generation/jobs/{job.pk}/consistency (GET /api/generation/jobs/{job.pk}/"
            "consistency?field=total_score)"
        )

    def _pairwise(self, scenario, user):
        """pairwiseLLM's template and tags as a judge of the comparison, in both orders."""
        judge = LLMJudge.objects.filter(scenario=scenario, name=PAIRWISE_JUDGE).first()
        if judge is None:
            version = self._template(scenario.team, user, "pairwiseLLM (seed)", PAIRWISE_TEMPLATE)
            model = _mock_model(scenario.team, "mock-judge")
            judge = judges.judge_create(
                user=user,
                scenario=scenario,
                data={
                    "name": PAIRWISE_JUDGE,
                    "model": model.pk,
                    "prompt_version": version.pk,
                    "temperatures": [0.0],
                    "swap": True,
                    "max_tokens": 100,
                    "reply_format": {
                        "kind": "tags",
                        "fields": {"winner": "BETTER_SAMPLE"},
                        "values": {"SAMPLE_1": "A", "SAMPLE_2": "B"},
                    },
                },
            )
        self._judge_once(judge, user)
        read = judge.judgments.exclude(parse_status="failed").count()
        self.stdout.write(
            f"pairwiseLLM judge: {read}/{judge.judgments.count()} <BETTER_SAMPLE> replies read "
            f"(GET /api/judges/{judge.pk}/card)"
        )

    def _judge_file(self, team, user):
        """The JSONL judge service: the seed's two kinds of row (a 1-5 score as JSON, and
        "A or B, plus one sentence"), run live on the mock judge."""
        batch = JudgeBatch.objects.filter(team=team, input_file__filename=JUDGE_FILE_NAME).first()
        if batch is None:
            samples = _samples()
            rows = []
            for n, sample in enumerate(samples[:20]):
                rows.append(_judge_row(f"score-{n + 1:03d}", _SCORE_SYSTEM, sample["text"]))
                other = samples[(n + 7) % len(samples)]["text"]
                rows.append(
                    _judge_row(
                        f"pair-{n + 1:03d}",
                        _PAIR_SYSTEM,
                        f"Question: which text is clearer?\nA: {sample['text']}\nB: {other}",
                    )
                )
            content = "".join(json.dumps(r) + "\n" for r in rows).encode()
            stored = judge_files.file_create(
                user=user,
                team=team,
                upload=SimpleUploadedFile(JUDGE_FILE_NAME, content),
                purpose="batch",
            )
            batch = judge_files.batch_create(
                user=user,
                team=team,
                data={
                    "input_file_id": stored.public_id,
                    "endpoint": "/v1/chat/completions",
                    "live": True,
                },
            )
            judge_files.validate(batch.pk)  # as the queued task would, now
            batch.refresh_from_db()
            if batch.job_id is not None:
                job = GenerationJob.objects.get(pk=batch.job_id)
                if job.status == JobStatus.RUNNING:
                    self._run(job)
                judge_files.finalize(batch.pk)
            batch.refresh_from_db()
        self.stdout.write(
            f"Judge file {batch.public_id}: {batch.status}, {batch.completed} replies, "
            f"{batch.failed} failed (the Judge files page; GET /v1/batches/{batch.public_id})"
        )

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
        model = _mock_model(scenarios[0].team, "mock-judge")
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
            self._judge_once(judge, user)
            verdicts = judge.judgments.exclude(parse_status="failed").count()
            self.stdout.write(
                f"Judge {judge.name!r} on {scenario.name!r}: {verdicts} verdicts "
                f"(GET /api/judges/{judge.pk}/runs)"
            )

    def _judge_once(self, judge, user):
        """Run the judge over its scenario, live, unless it ran already."""
        if judge.runs.exists():
            return
        run = judges.judge_run(user=user, judge=judge, data={})
        self.stdout.write(f"Judging {judge.scenario.name!r}: {run.job.total_cells} calls")
        job = GenerationJob.objects.get(pk=run.job_id)
        if job.status == JobStatus.RUNNING:
            self._run(job)

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
            name=MOCK_CONNECTION,
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
        rows = _samples()
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
            ProviderConnection.objects.get(team=team, name=MOCK_CONNECTION)
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


def _mock_model(team, model_id: str) -> LLMModel:
    """The demo's own mock connection's model (the team may have other mock connections
    with the same catalog: a second one loaded in the admin made ``get`` ambiguous)."""
    return LLMModel.objects.get(
        connection__team=team, connection__name=MOCK_CONNECTION, model_id=model_id
    )


def _samples() -> list[dict]:
    """The writing samples as items: id, text, quality score."""
    with SAMPLES.open(encoding="utf-8") as handle:
        return [
            {
                "id": r["ID"],
                "text": " ".join(r["text"].split()),
                "quality_score": int(r["quality_score"]),
            }
            for r in csv.DictReader(handle)
        ]


_SCORE_SYSTEM = (
    "You are an evaluation judge. Score the answer 1-5 against the rubric and reply as JSON: "
    '{"score", "rationale"}.'
)
_PAIR_SYSTEM = (
    "You are an evaluation judge. Given two answers, reply with the better one: A or B, plus "
    "one sentence of rationale."
)


def _judge_row(custom_id: str, system: str, user: str) -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": "mock-judge",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        },
    }
