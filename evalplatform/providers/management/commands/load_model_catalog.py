from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evalplatform.accounts.models import Team
from evalplatform.errors import ApplicationError
from evalplatform.providers.models import ProviderConnection
from evalplatform.providers.services import catalog_load


class Command(BaseCommand):
    help = (
        "Load the dated model catalog (prices per 1M tokens) into a team's provider "
        "connections of the matching kind. Existing models get the catalog's prices."
    )

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, help="Team slug.")
        parser.add_argument("--connection", help="Only this connection (by name).")
        parser.add_argument("--file", type=Path, help="A catalog JSON file (default: built-in).")

    def handle(self, *args, team, connection, file, **options):
        try:
            team_obj = Team.objects.get(slug=team)
        except Team.DoesNotExist as exc:
            raise CommandError(f"No team with slug {team!r}.") from exc
        conn = None
        if connection:
            conn = ProviderConnection.objects.filter(team=team_obj, name=connection).first()
            if conn is None:
                raise CommandError(f"Team {team!r} has no connection named {connection!r}.")
        try:
            counts = catalog_load(team=team_obj, connection=conn, path=file)
        except ApplicationError as exc:
            raise CommandError(f"{exc.message} {exc.extra}") from exc
        self.stdout.write(f"{counts['created']} models created, {counts['updated']} updated.")
