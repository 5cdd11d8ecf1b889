from django.core.management.base import BaseCommand, CommandError

from evalplatform.accounts.services import token_create_for_username
from evalplatform.errors import ApplicationError


class Command(BaseCommand):
    help = "Create an API token for USER and print its key (shown once, stored hashed)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="A label for the token.")

    def handle(self, *args, username, name, **options):
        try:
            token, key = token_create_for_username(username=username, name=name)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stderr.write(f"Token {token.name!r} for {username}; use: Authorization: Token <key>")
        self.stdout.write(key)
