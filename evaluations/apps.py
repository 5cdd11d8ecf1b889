from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "evaluations"

    def ready(self) -> None:
        # Judge runs plug into generation: the "judge" source (only the judge service plans
        # jobs from it) and the result handler that turns replies into judgments.
        from evaluations.judges import services as judges
        from generation import results, sources

        sources.register(judges.SOURCE_KIND, judges.judge_source, internal=True)
        results.register(judges.SOURCE_KIND, judges.JudgeResults())
        from scenarios import services as scenarios

        scenarios.register_delete_guard(judges.scenario_delete_guard)
        scenarios.register_redesign_guard(judges.scenario_redesign_guard)
        # Judge files: jobs whose rows carry their own requests; replies read as verdicts.
        from evaluations.judgefiles.services import JudgeFileResults
        from generation.models import SourceKind

        results.register(SourceKind.JUDGE_FILE, JudgeFileResults())
        # The budget scheduler re-plans as an accepted plan's results arrive.
        from evaluations.planner import replan

        replan.connect()
        # The home page's "Your open tasks".
        from evalplatform.web import home
        from evaluations.workspace import selectors as workspace

        home.register(
            home.Section("tasks", "evaluations/home/tasks.html", workspace.home_section, order=10)
        )
