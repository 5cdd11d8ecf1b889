"""The review API, included under ``/api/``:

- ``GET /api/scenarios/{id}/review`` (``feature:evaluations:view_all``): the tasks with every
  rater's answer side by side, their disagreement and the adjudicated answer, paginated
  (``page``, ``page_size``); ``raters`` (all, humans, judges), ``min_answers``,
  ``unadjudicated`` (true / false), ``ordering`` (-disagreement, disagreement, position).
- ``PUT /api/scenarios/{id}/tasks/{task_id}/adjudication`` (``feature:scenarios:manage``):
  ``{"answer": {...}, "note": "..."}`` sets the adjudicated answer; ``DELETE`` removes it.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_VIEW_ALL, SCENARIOS_MANAGE, SCENARIOS_VIEW
from evalplatform.api.pagination import PageNumberPagination
from evaluations.review import selectors, services
from scenarios.models import Scenario


def _scenario(user, pk: int, feature: str) -> Scenario:
    return policy.access(
        user, feature, Scenario.objects.select_related("team"), view_feature=SCENARIOS_VIEW, pk=pk
    )


class ReviewView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("raters", str, description="all (default), humans or judges"),
            OpenApiParameter("min_answers", int, description="only tasks with this many"),
            OpenApiParameter("unadjudicated", bool, description="only tasks without one"),
            OpenApiParameter(
                "ordering", str, description="-disagreement (default), disagreement, position"
            ),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, pk: int):
        """The scenario's tasks for review (docs/scenarios.md, "Review and
        adjudication")."""
        scenario = _scenario(request.user, pk, EVALUATIONS_VIEW_ALL)
        filters = selectors.filters_from(request.query_params)
        found = selectors.review_tasks(scenario, filters)
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(found, request, view=self) or []  # type: ignore[arg-type]
        return paginator.get_paginated_response(
            selectors.review_rows(scenario, page, filters.raters)
        )


class AdjudicationView(APIView):
    @extend_schema(request=OpenApiTypes.OBJECT, responses={200: OpenApiTypes.OBJECT})
    def put(self, request, pk: int, task_id: int):
        """Set the task's adjudicated answer, checked by the scenario type."""
        scenario = _scenario(request.user, pk, SCENARIOS_MANAGE)
        adjudication = services.adjudication_set(
            user=request.user, scenario=scenario, task_id=task_id, data=request.data
        )
        found = selectors.review_tasks(scenario, selectors.Filters(), task_id=adjudication.task_id)
        return Response(selectors.review_rows(scenario, found, "all")[0])

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, pk: int, task_id: int):
        scenario = _scenario(request.user, pk, SCENARIOS_MANAGE)
        services.adjudication_delete(user=request.user, scenario=scenario, task_id=task_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
