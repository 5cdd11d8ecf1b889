from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate


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
        from evalplatform.accounts.models import Membership

        post_migrate.connect(_make_cache_tables, sender=self, dispatch_uid="cache-tables")

        post_delete.connect(
            _left_team, sender=Membership, dispatch_uid="accounts.membership.left_groups"
        )


def _left_team(sender, instance, **kwargs) -> None:
    """Whoever leaves a team (however the membership goes) leaves its groups."""
    from evalplatform.accounts.services import groups_leave

    groups_leave(user_id=instance.user_id, team_id=instance.team_id)
