from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    name = "evalplatform.providers"
    label = "providers"
    verbose_name = "Providers and models"
