"""The evaluations app's models, each domain's beside its code:

- ``judgments/models.py``: what every sub-package reads: the tasks handed to evaluators
  (``Assignment``), the LLM judges and their runs (``LLMJudge``, ``JudgeRun``) and the
  judgments of all raters (``Judgment``), with their choices.
- ``workspace/models.py``: the earlier answers of revised judgments, the flags on tasks.
- ``invitations/models.py``: the invitations by email.
- ``review/models.py``: the adjudicated answers.
- ``quality/models.py``: the evaluators left out of the analytics.
- ``analytics/models.py``: the trust gates and the stored analyses.
- ``judgefiles/models.py``: the files and batches of the OpenAI Files + Batches API.
- ``planner/models.py``: the budget scheduler's plans.
- ``manager/models.py``: the external raters of imported judgments.

Django imports only this module of the app: importing the others registers their models
(under the app's label, ``evaluations``, and their tables' old names). It re-exports them all
for code outside the app's sub-packages. A sub-package imports a model from the module that
defines it, never from here: this module imports every sub-package, so that would be an
import cycle between siblings. For the same reason a models module imports no other module of
the app, and names a model defined elsewhere in it as a string ("evaluations.Judgment").
"""

from __future__ import annotations

from evaluations.analytics.models import (
    AnalysisStatus,
    GateThresholds,
    StoredAnalysis,
    TeamTrustGate,
    TrustGate,
)
from evaluations.invitations.models import Invitation
from evaluations.judgefiles.models import (
    BatchStatus,
    FilePurpose,
    JudgeBatch,
    JudgeFile,
    JudgeFileLine,
    JudgeRowError,
    JudgeVerdict,
)
from evaluations.judgments.models import (
    Assignment,
    AssignmentStatus,
    JudgeRun,
    Judgment,
    LLMJudge,
    ParseStatus,
    RaterKind,
)
from evaluations.manager.models import ExternalRater
from evaluations.planner.models import BudgetPlan, PlanStatus
from evaluations.quality.models import RaterExclusion
from evaluations.review.models import Adjudication
from evaluations.workspace.models import FlagReason, JudgmentRevision, TaskFlag

__all__ = [
    "Adjudication",
    "AnalysisStatus",
    "Assignment",
    "AssignmentStatus",
    "BatchStatus",
    "BudgetPlan",
    "ExternalRater",
    "FilePurpose",
    "FlagReason",
    "GateThresholds",
    "Invitation",
    "JudgeBatch",
    "JudgeFile",
    "JudgeFileLine",
    "JudgeRowError",
    "JudgeRun",
    "JudgeVerdict",
    "Judgment",
    "JudgmentRevision",
    "LLMJudge",
    "ParseStatus",
    "PlanStatus",
    "RaterExclusion",
    "RaterKind",
    "StoredAnalysis",
    "TaskFlag",
    "TeamTrustGate",
    "TrustGate",
]
