"""``python manage.py import_judgments FILE --scenario NAME``: judgments collected elsewhere
(see ``evaluations.manager.imports`` for the columns), all rows or none."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from evalplatform.accounts.models import Team
from evalplatform.errors import FieldErrors
from evaluations.manager.imports import import_judgments
from generation import sources
from scenarios import services as scenario_services
from scenarios.models import Scenario
from scenarios.types import registry


class Command(BaseCommand):
    help = "Import judgments (CSV or JSON lines) into a comparison or rating scenario."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--scenario", required=True, help="The scenario's id or name.")
        parser.add_argument("--team", help="The team's slug, when several have the name.")
        parser.add_argument("--user", help="Import as this user (default: the first superuser).")
        parser.add_argument(
            "--create",
            choices=sorted(kind.value for kind in registry.every() if kind.importable),
            help="Create the scenario (in --team) from the file when it does not exist: its "
            "items and variants are the ones the rows name (models from the optional "
            "model_a / model_b or model columns); ratings get a rubric of the dimensions "
            "named, on --scale.",
        )
        parser.add_argument("--scale", default="1-5", help="Rating scale for --create (1-5).")

    def handle(self, *args, file, scenario, team, user, create, scale, **options):
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"No such file: {file}")
        found = (
            Scenario.objects.filter(pk=int(scenario))
            if scenario.isdigit()
            else (Scenario.objects.filter(name=scenario))
        )
        if team:
            found = found.filter(team__slug=team)
        matches = list(found[:2])
        users = get_user_model().objects
        actor = (
            users.filter(username=user).first()
            if user
            else users.filter(is_superuser=True, is_active=True).order_by("pk").first()
        )
        if actor is None:
            raise CommandError("No such user (or no superuser): give --user.")
        if not matches and create:
            if not team or scenario.isdigit():
                raise CommandError("--create needs --team and a scenario name.")
            matches = [self._create(actor, path, scenario, team, create, scale)]
        if len(matches) != 1:
            raise CommandError(
                "No such scenario." if not matches else "Several scenarios match: give --team."
            )
        try:
            count = import_judgments(
                user=actor, scenario=matches[0], raw=path.read_bytes(), filename=path.name
            )
        except FieldErrors as exc:
            lines = "\n".join(f"  {k}: {' '.join(v)}" for k, v in exc.errors.items())
            raise CommandError(f"Nothing was imported:\n{lines}") from exc
        self.stdout.write(self.style.SUCCESS(f"Imported {count} judgments into {matches[0]}."))

    def _create(self, actor, path: Path, name: str, team_slug: str, kind: str, scale: str):
        """A scenario holding the items and variants the file names (texts unknown)."""
        team = Team.objects.filter(slug=team_slug).first()
        if team is None:
            raise CommandError(f"No team {team_slug!r}.")
        fmt = sources.detect_format(path.name, "")
        try:
            rows = sources.parse_upload(path.read_bytes(), fmt)
        except FieldErrors as exc:
            raise CommandError(f"Unreadable file: {exc.errors}") from exc
        columns = registry.get(kind).import_columns
        variants: dict[tuple[str, str], str] = {}
        for _, row in rows:
            item = str(row.get("item_id") or "")
            for key, model in columns:
                variants.setdefault((item, str(row.get(key) or "")), str(row.get(model) or ""))
        config = registry.get(kind).import_config([row for _, row in rows], scale=scale)
        lines = [
            {"item_id": item, "variant_id": variant, "content": "(imported)", "model": model}
            for (item, variant), model in variants.items()
        ]
        try:
            return scenario_services.scenario_from_upload(
                user=actor,
                team=team,
                data={"name": name, "type": kind, "config": config, "format": "jsonl"},
                raw="\n".join(json.dumps(line) for line in lines).encode(),
            )
        except (FieldErrors, ValueError) as exc:
            raise CommandError(f"The scenario could not be made: {exc}") from exc
