"""What the evaluations pages share: the scenario a page is about, as the user may see it."""

from __future__ import annotations

from django.http import Http404, HttpRequest

from evalplatform.accounts import policy
from evalplatform.accounts.roles import SCENARIOS_VIEW
from evalplatform.errors import NotFound
from scenarios.models import Scenario


def scenario_or_404(request: HttpRequest, scenario_id: int) -> Scenario:
    """The scenario, when the user may view it; another team's or a missing one is a 404."""
    try:
        return policy.access(
            request.user, SCENARIOS_VIEW, Scenario.objects.select_related("team"), pk=scenario_id
        )
    except NotFound as exc:
        raise Http404 from exc
