from django.apps import AppConfig
from django.db.models.signals import post_delete


class AccountsConfig(AppConfig):
    name = "evalplatform.accounts"
    label = "accounts"
    verbose_name = "Teams and access"

    def ready(self) -> None:
        from evalplatform.accounts.models import Membership

        post_delete.connect(
            _left_team, sender=Membership, dispatch_uid="accounts.membership.left_groups"
        )


def _left_team(sender, instance, **kwargs) -> None:
    """Whoever leaves a team (however the membership goes) leaves its groups."""
    from evalplatform.accounts.services import groups_leave

    groups_leave(user_id=instance.user_id, team_id=instance.team_id)
