"""Template context every page gets: which parts of the site the user can use, so the
navigation shows each role only what it can open (one query per request, the policy's
cached grants)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from evalplatform.accounts import policy
from evalplatform.accounts.roles import (
    ADMIN_ACCESS,
    EVALUATIONS_JUDGE_FILES,
    EVALUATIONS_SUBMIT,
    EVALUATIONS_VIEW_ALL,
    GENERATION_VIEW,
    PROMPTS_VIEW,
    SCENARIOS_VIEW,
)


def navigation(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def anywhere(*features: str) -> bool:
        return any(policy.has_feature_anywhere(user, f) for f in features)

    return {
        "nav": {
            "generation": anywhere(GENERATION_VIEW),
            "scenarios": anywhere(SCENARIOS_VIEW),
            "prompts": anywhere(PROMPTS_VIEW),
            "judge_files": anywhere(EVALUATIONS_JUDGE_FILES, EVALUATIONS_VIEW_ALL),
            # An evaluator only evaluates (their pages do it all): no API link, no token talk.
            "api": policy.is_superuser(user)
            or any(
                features - {EVALUATIONS_SUBMIT}
                for features in policy.features_by_team(user).values()
            ),
            "admin": anywhere(ADMIN_ACCESS),
        }
    }
