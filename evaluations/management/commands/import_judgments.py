"""``python manage.py import_judgments FILE --scenario NAME``: judgments collected elsewhere
(see ``evaluations.manager.imports`` for the columns), all rows or none."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from evalplatform import validation
from evalplatform.accounts.models import Team
from evalplatform.errors import FieldErrors
from evaluations.manager.imports import holds_nul, import_judgments
from generation import sources
from scenarios import services as scenario_services
from scenarios.models import Scenario
from scenarios.types import registry


def _listed(exc: FieldErrors) -> str:
    return "\n".join(f"  {k}: {' '.join(v)}" for k, v in exc.errors.items())


class Command(BaseCommand):
    help = (
        "Import judgments (CSV or JSON lines) into a comparison, rating, ranking or labeling "
        "scenario, all rows or none; the columns of each type are in docs/scenarios.md."
    )

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
            "named, on --scale; labeling the labels named (sorted), several a judgment when "
            "a row has several, free text when a row has text; rankings a task per item. "
            "When the import fails, the scenario is not made either.",
        )
        parser.add_argument("--scale", default="1-5", help="Rating scale for --create (1-5).")

    def handle(self, *args, file, scenario, team, user, create, scale, **options):
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"No such file: {file}")
        found = (
            Scenario.objects.filter(pk=int(scenario))
            if validation.digits(scenario) is not None
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
        made = not matches and bool(create)
        if made and (not team or validation.digits(scenario) is not None):
            raise CommandError("--create needs --team and a scenario name.")
        if not made and len(matches) != 1:
            raise CommandError(
                "No such scenario." if not matches else "Several scenarios match: give --team."
            )
        # The scenario made and the judgments imported, or neither.
        try:
            with transaction.atomic():
                target = (
                    self._create(actor, path, scenario, team, create, scale) if made else matches[0]
                )
                count = import_judgments(
                    user=actor, scenario=target, raw=path.read_bytes(), filename=path.name
                )
        except FieldErrors as exc:
            also = ", and the scenario was not made" if made else ""
            raise CommandError(f"Nothing was imported{also}:\n{_listed(exc)}") from exc
        self.stdout.write(self.style.SUCCESS(f"Imported {count} judgments into {target}."))

    def _create(self, actor, path: Path, name: str, team_slug: str, kind: str, scale: str):
        """A scenario holding the items and variants the file names (texts unknown). Rows
        the import refuses anyway (no item or variant, a NUL character) are left out, so
        that the import names their lines."""
        team = Team.objects.filter(slug=team_slug).first()
        if team is None:
            raise CommandError(f"No team {team_slug!r}.")
        fmt = sources.detect_format(path.name, "")
        try:
            rows = [row for _, row in sources.parse_upload(path.read_bytes(), fmt)]
        except FieldErrors as exc:
            raise CommandError(f"Unreadable file:\n{_listed(exc)}") from exc
        rows = [row for row in rows if not holds_nul(row)]
        columns = registry.get(kind).import_columns
        variants: dict[tuple[str, str], str] = {}
        for row in rows:
            item = str(row.get("item_id") or "").strip()
            for key, model in columns:
                variant = str(row.get(key) or "").strip()
                if item and variant:
                    variants.setdefault((item, variant), str(row.get(model) or "").strip())
        lines = [
            {"item_id": item, "variant_id": variant, "content": "(imported)", "model": model}
            for (item, variant), model in variants.items()
        ]
        try:
            config = registry.get(kind).import_config(rows, scale=scale)
            return scenario_services.scenario_from_upload(
                user=actor,
                team=team,
                data={"name": name, "type": kind, "config": config, "format": "jsonl"},
                raw="\n".join(json.dumps(line) for line in lines).encode(),
            )
        except FieldErrors as exc:
            raise CommandError(f"The scenario could not be made:\n{_listed(exc)}") from exc
        except ValueError as exc:
            raise CommandError(f"The scenario could not be made: {exc}") from exc
