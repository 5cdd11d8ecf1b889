from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _make_cache_tables(using: str = "default", **_: Any) -> None:
    """The database cache's table (the API throttle's counts when there is no Redis, see
    settings.CACHES), made after every migrate: ``createcachetable`` skips it when it exists
    and does nothing for a cache elsewhere."""
    from django.core.management import call_command

    call_command("createcachetable", database=using, verbosity=0)


class AccountsConfig(AppConfig):
    name = "evalplatform.accounts"
    label = "accounts"
    verbose_name = "Teams and access"

    def ready(self) -> None:
        post_migrate.connect(_make_cache_tables, sender=self, dispatch_uid="cache-tables")
