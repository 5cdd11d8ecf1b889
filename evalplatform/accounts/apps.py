from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "evalplatform.accounts"
    label = "accounts"
    verbose_name = "Teams and access"
