from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "evaluations"

    def ready(self) -> None:
        # Judge runs plug into generation: the "judge" source and its result handler.
        from evaluations.judges import services  # noqa: F401
