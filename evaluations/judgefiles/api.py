"""The platform's own API of judge files (``/api/judge-files/{batch id}/…``, the batch's
OpenAI id): its verdicts (JSON, or CSV), re-submitting its failed rows, and the regression
report of two batches. Reading needs ``feature:evaluations:view_all``; re-submitting
``feature:evaluations:judge_files``; another team's batch is a 404."""

from __future__ import annotations

import itertools
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import audit, policy
from evalplatform.accounts.roles import EVALUATIONS_JUDGE_FILES, EVALUATIONS_VIEW_ALL
from evalplatform.api.uploads import csv_dict_chunks, download
from evalplatform.errors import FieldErrors, Forbidden, NotFound
from evalplatform.throttling import expensive
from evaluations.judgefiles import services
from evaluations.judgefiles.compare import compare
from evaluations.judgefiles.models import JudgeBatch, JudgeFile, JudgeVerdict
from evaluations.judgefiles.openai_api import batch_object

VERDICT_COLUMNS = ["custom_id", "line", "score", "verdict", "rationale", "parsed", "problem",
                   "fields", "reply"]  # fmt: skip
MAX_PAGE = 1000


def batch_for(user: Any, batch_id: str, feature: str = EVALUATIONS_VIEW_ALL) -> JudgeBatch:
    if not policy.has_feature_anywhere(user, feature):
        raise Forbidden()  # before any lookup: the user may do this in no team
    if not services.is_public_id(batch_id):
        raise NotFound()
    return policy.access(
        user,
        feature,
        JudgeBatch.objects.select_related(
            "job", "input_file", "output_file", "error_file", "parent"
        ),
        view_feature=EVALUATIONS_VIEW_ALL,
        public_id=batch_id,
    )


def verdict_row(v: JudgeVerdict) -> dict[str, Any]:
    return {
        "custom_id": v.custom_id,
        "line": v.line,
        "score": v.score,
        "verdict": v.verdict,
        "rationale": v.rationale,
        "parsed": v.parsed,
        "problem": v.problem,
        "fields": v.fields,
        "reply": v.output.content if not v.parsed else None,
    }


class VerdictsView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("offset", int),
            OpenApiParameter("limit", int),
            OpenApiParameter("merged", bool, description="With its re-submissions' replies."),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    @expensive(
        when=lambda view: (
            view.kwargs.get("fmt") == "csv"
            or view.request.query_params.get("merged") in ("1", "true")
        )
    )
    def get(self, request, batch_id: str, fmt: str = ""):
        """The batch's verdicts in line order; ``.csv`` for all of them as CSV;
        ``?merged=true``: with its re-submissions' replies in place of the rows they
        answered again (a ``batch`` column says whose)."""
        batch = services.sync(batch_for(request.user, batch_id))
        merged = request.query_params.get("merged")
        if merged not in (None, "", "0", "1", "false", "true"):
            raise FieldErrors({"merged": "true or false."})
        if merged in ("1", "true"):
            return self.merged(batch, fmt, request)
        verdicts = JudgeVerdict.objects.filter(batch=batch).select_related("output")
        if fmt == "csv":
            return download(
                csv_dict_chunks(VERDICT_COLUMNS, (verdict_row(v) for v in verdicts.iterator(2000))),
                "text/csv; charset=utf-8",
                f"{batch.public_id}-verdicts.csv",
            )
        offset, limit = _page(request)
        page = list(verdicts.order_by("line")[offset : offset + limit])
        return Response(
            {
                "batch": batch_object(batch),
                "count": verdicts.count(),
                "parsed": verdicts.filter(parsed=True).count(),
                "offset": offset,
                "verdicts": [verdict_row(v) for v in page],
            }
        )

    def merged(self, batch: JudgeBatch, fmt: str, request) -> Any:
        rows, count, parsed = services.merged_verdicts(batch)

        def row(v: JudgeVerdict) -> dict[str, Any]:
            return verdict_row(v) | {"batch": v.batch.public_id}

        if fmt == "csv":
            return download(
                csv_dict_chunks([*VERDICT_COLUMNS, "batch"], (row(v) for v in rows)),
                "text/csv; charset=utf-8",
                f"{batch.public_id}-verdicts-merged.csv",
            )
        offset, limit = _page(request)
        return Response(
            {
                "batch": batch_object(batch),
                "merged": [b.public_id for b in services.lineage(batch)],
                "count": count,
                "parsed": parsed,
                "offset": offset,
                "verdicts": [row(v) for v in itertools.islice(rows, offset, offset + limit)],
            }
        )


def _page(request) -> tuple[int, int]:
    errors: dict[str, str] = {}
    try:
        offset = int(request.query_params.get("offset") or 0)
        limit = int(request.query_params.get("limit") or 100)
    except ValueError:
        offset, limit = -1, -1
    if not 0 <= offset <= 10**9:
        errors["offset"] = "A whole number from 0."
    if not 1 <= limit <= MAX_PAGE:
        errors["limit"] = f"A whole number from 1 to {MAX_PAGE}."
    if errors:
        raise FieldErrors(errors)
    return offset, limit


class EstimateView(APIView):
    @extend_schema(request=OpenApiTypes.OBJECT, responses={200: OpenApiTypes.OBJECT})
    @expensive
    def post(self, request):
        """What a batch of an uploaded file (``{"file_id": ...}``) would cost, per model,
        live and in batch, before it is submitted; its refused lines by error code."""
        if not policy.has_feature_anywhere(request.user, EVALUATIONS_JUDGE_FILES):
            raise Forbidden()  # before any lookup
        body = request.data if isinstance(request.data, dict) else {}
        file_id = body.get("file_id")
        if not isinstance(file_id, str) or not services.is_public_id(file_id):
            raise FieldErrors({"file_id": "The id of a file you uploaded (file-...)."})
        file = policy.access(
            request.user,
            EVALUATIONS_JUDGE_FILES,
            JudgeFile.objects.written().select_related("team"),
            view_feature=EVALUATIONS_VIEW_ALL,
            public_id=file_id,
        )
        return Response(services.estimate(user=request.user, file=file))


class ResubmitView(APIView):
    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: OpenApiTypes.OBJECT})
    @expensive
    def post(self, request, batch_id: str):
        """A new batch of the rows of this one that failed and may succeed when run again,
        linked to it; ``left_out``: the lines refused for their own content, to fix."""
        batch = batch_for(request.user, batch_id, EVALUATIONS_JUDGE_FILES)
        made = services.resubmit(user=request.user, batch=services.sync(batch))
        return Response(
            batch_object(made) | {"left_out": services.left_out(batch)},
            status=status.HTTP_201_CREATED,
        )


class ResumeView(APIView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, batch_id: str):
        """Queue a validating or finalizing batch's step again now, when no worker holds it
        (its worker stopped mid-way; the scheduled sweep does so a minute after). 409 when
        a worker runs it or it waits in the team's queue."""
        batch = batch_for(request.user, batch_id, EVALUATIONS_JUDGE_FILES)
        return Response(batch_object(services.batch_resume(user=request.user, batch=batch)))


class CompareView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @expensive
    def get(self, request, batch_id: str, other_id: str, fmt: str = ""):
        """The regression report of two batches by ``custom_id``; ``.csv`` for its rows."""
        a = batch_for(request.user, batch_id)
        b = batch_for(request.user, other_id)
        report = compare(services.sync(a), services.sync(b))
        audit.record(
            user=request.user, team=a.team_id, action="judge_files.compare", target=a,
            other=b.public_id,
        )  # fmt: skip
        if fmt == "csv":
            columns = list(report["rows"][0]) if report["rows"] else ["custom_id"]
            return download(
                csv_dict_chunks(columns, report["rows"]),
                "text/csv; charset=utf-8",
                f"{a.public_id}-vs-{b.public_id}.csv",
            )
        return Response(report)
