from django.apps import AppConfig


class ScenariosConfig(AppConfig):
    name = "scenarios"

    def ready(self) -> None:
        # The items of a scenario as a generation source ("From scenario" in the wizard);
        # generation offers a registry so that it never imports scenarios.
        from generation import sources
        from scenarios import selectors

        sources.register(
            selectors.SOURCE_KIND,
            selectors.generation_source,
            label="From scenario",
            choices=selectors.generation_source_choices,
        )
        from evalplatform.web import home

        home.register(
            home.Section(
                "scenarios", "scenarios/home/scenarios.html", selectors.home_section, order=30
            )
        )
