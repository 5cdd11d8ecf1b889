from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "evalplatform.live"
    label = "live"
    verbose_name = "Live events"

    def ready(self) -> None:
        from evalplatform.live import rights

        rights.connect_receivers()
