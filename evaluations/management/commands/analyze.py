"""``python manage.py analyze SCENARIO --json``: a scenario's analytics (SCENARIO is an id or
a name), the same JSON as ``GET /api/scenarios/{id}/analytics``."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from evalplatform import validation
from evalplatform.errors import FieldErrors
from evaluations.analytics.analyze import analyze
from evaluations.analytics.api import options_from
from scenarios.models import Scenario


class Command(BaseCommand):
    help = "Print a scenario's analytics (Bradley-Terry, Elo, position bias, agreement, ...)."

    def add_arguments(self, parser):
        parser.add_argument("scenario", help="The scenario's id or name.")
        parser.add_argument("--json", action="store_true", help="Print the JSON (the default).")
        parser.add_argument("--team", help="The team's slug, when several teams use the name.")
        parser.add_argument(
            "--raters",
            help="all, humans, judges, judge:<id> (default: humans when people judged, else all)",
        )
        parser.add_argument("--resamples", help="Bootstrap resamples (default 1000).")
        parser.add_argument("--seed", help="Seed of the bootstraps (default 0).")
        parser.add_argument("--elo-k", dest="elo_k")
        parser.add_argument("--elo-order", dest="elo_order")

    def handle(self, *args, **options):
        found = Scenario.objects.all()
        if options["team"]:
            found = found.filter(team__slug=options["team"])
        key = options["scenario"]
        number = validation.digits(key)
        found = found.filter(pk=number) if number is not None else found.filter(name=key)
        matches = list(found[:2])
        if not matches:
            raise CommandError(f"No scenario {key!r}.")
        if len(matches) > 1:
            raise CommandError(f"Several scenarios are named {key!r}: give --team or the id.")
        query = {
            k: options[k]
            for k in ("raters", "resamples", "seed", "elo_k", "elo_order")
            if options.get(k) is not None
        }
        try:
            chosen = options_from(query, matches[0])
        except FieldErrors as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.errors.items())
            raise CommandError(problems) from exc
        result = analyze(matches[0], **chosen)
        self.stdout.write(json.dumps(result, indent=2, default=str))
