from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "evalplatform.runs"
    label = "runs"
    verbose_name = "Execution engine"
