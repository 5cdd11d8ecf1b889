from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "evalplatform.runs"
    label = "runs"
    verbose_name = "Execution engine"

    def ready(self) -> None:
        from evalplatform.runs import checks  # noqa: F401 - registers the system checks
