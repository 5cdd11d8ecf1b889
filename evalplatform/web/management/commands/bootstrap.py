"""``python manage.py bootstrap``: the first admin, a team and the offline mock provider, as
``serve`` makes them on its first start (scale mode runs uvicorn and ``qcluster`` instead,
so this is the step that makes them there). Idempotent: once a superuser exists it changes
nothing and says who."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from evalplatform.bootstrap import bootstrap, greeting


class Command(BaseCommand):
    help = (
        "Create the first admin (EVAL_ADMIN_USERNAME / EVAL_ADMIN_PASSWORD, or a generated "
        "password printed once), the default team and the offline mock provider. Run after "
        "migrate; safe to run again."
    )

    def handle(self, *args, **options):
        result = bootstrap()
        said = greeting(result)
        if said is not None:
            self.stdout.write(self.style.SUCCESS(said))
        else:
            self.stdout.write(f"An admin exists already ({result.username!r}): nothing to do.")
