from typing import Any

from django.apps import AppConfig
from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_migrate, post_save, pre_save


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
        user_model = get_user_model()
        pre_save.connect(_note_password, sender=user_model, dispatch_uid="accounts.password")
        post_save.connect(
            _password_changed, sender=user_model, dispatch_uid="accounts.password.changed"
        )


def _left_team(sender, instance, **kwargs) -> None:
    """Whoever leaves a team (however the membership goes) leaves its groups."""
    from evalplatform.accounts.services import groups_leave

    groups_leave(user_id=instance.user_id, team_id=instance.team_id)


def _note_password(sender, instance, update_fields=None, **kwargs) -> None:
    """Before a user is saved: whether the password changes (however: the password page,
    the admin, ``changepassword``, a reset). One read, only when the password may be in
    the write (a sign-in's ``last_login`` update is not)."""
    instance._password_changed = False
    if instance.pk is None or (update_fields is not None and "password" not in update_fields):
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    instance._password_changed = stored is not None and stored != instance.password


def _password_changed(sender, instance, created=False, **kwargs) -> None:
    """A new password revokes the user's API tokens (sessions end by themselves: Django
    signs each with the password's hash; the page that changed it keeps its own)."""
    if created or not getattr(instance, "_password_changed", False):
        return
    instance._password_changed = False
    from evalplatform.accounts.models import ApiToken
    from evalplatform.accounts.services import tokens_revoke

    tokens_revoke(tokens=ApiToken.objects.filter(user=instance), by=instance)
