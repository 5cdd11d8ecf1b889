from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"

    def ready(self) -> None:
        # The home page's "Your recent jobs" (the core offers a registry of sections).
        from evalplatform.web import home
        from generation import selectors

        home.register(
            home.Section("jobs", "generation/home/jobs.html", selectors.home_section, order=20)
        )
