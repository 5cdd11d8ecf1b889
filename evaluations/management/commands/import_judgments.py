"""``python manage.py import_judgments FILE --scenario NAME``: judgments collected elsewhere
(see ``evaluations.imports`` for the columns), all rows or none."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from evalplatform.errors import FieldErrors
from evaluations.imports import import_judgments
from scenarios.models import Scenario


class Command(BaseCommand):
    help = "Import judgments (CSV or JSON lines) into a comparison or rating scenario."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--scenario", required=True, help="The scenario's id or name.")
        parser.add_argument("--team", help="The team's slug, when several have the name.")
        parser.add_argument("--user", help="Import as this user (default: the first superuser).")

    def handle(self, *args, file, scenario, team, user, **options):
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
        if len(matches) != 1:
            raise CommandError(
                "No such scenario." if not matches else "Several scenarios match: give --team."
            )
        users = get_user_model().objects
        actor = (
            users.filter(username=user).first()
            if user
            else users.filter(is_superuser=True, is_active=True).order_by("pk").first()
        )
        if actor is None:
            raise CommandError("No such user (or no superuser): give --user.")
        try:
            count = import_judgments(
                user=actor, scenario=matches[0], raw=path.read_bytes(), filename=path.name
            )
        except FieldErrors as exc:
            lines = "\n".join(f"  {k}: {' '.join(v)}" for k, v in exc.errors.items())
            raise CommandError(f"Nothing was imported:\n{lines}") from exc
        self.stdout.write(self.style.SUCCESS(f"Imported {count} judgments into {matches[0]}."))
