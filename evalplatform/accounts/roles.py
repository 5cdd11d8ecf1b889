"""Feature permission codes and the built-in roles.

A code is ``feature:<area>:<action>``. The generation codes are the contract of
``batch-generation-spec.md``; the other areas follow the same form. A role is a set of codes.
"""

from __future__ import annotations

from django.db import models

# --- generation (exactly as in the generation spec) ---
GENERATION_VIEW = "feature:generation:view"
GENERATION_CREATE = "feature:generation:create"
GENERATION_MANAGE = "feature:generation:manage"
GENERATION_EXPORT = "feature:generation:export"
GENERATION_TO_SCENARIO = "feature:generation:to_scenario"
# --- scenarios ---
SCENARIOS_VIEW = "feature:scenarios:view"
SCENARIOS_CREATE = "feature:scenarios:create"
SCENARIOS_MANAGE = "feature:scenarios:manage"
SCENARIOS_EXPORT = "feature:scenarios:export"
# --- evaluations ---
EVALUATIONS_VIEW_ALL = "feature:evaluations:view_all"
EVALUATIONS_SUBMIT = "feature:evaluations:submit"
EVALUATIONS_JUDGE = "feature:evaluations:judge"
EVALUATIONS_EXPORT = "feature:evaluations:export"
EVALUATIONS_JUDGE_FILES = "feature:evaluations:judge_files"
# --- prompts ---
PROMPTS_VIEW = "feature:prompts:view"
PROMPTS_EDIT = "feature:prompts:edit"
# --- providers ---
PROVIDERS_VIEW = "feature:providers:view"
PROVIDERS_MANAGE = "feature:providers:manage"
# --- the team itself ---
ACCOUNTS_VIEW = "feature:accounts:view"
ACCOUNTS_MANAGE = "feature:accounts:manage"
ADMIN_ACCESS = "feature:admin:access"

FEATURES: dict[str, str] = {
    GENERATION_VIEW: "View generation jobs and outputs",
    GENERATION_CREATE: "Create generation jobs",
    GENERATION_MANAGE: "Start, pause and cancel generation jobs",
    GENERATION_EXPORT: "Export generation outputs",
    GENERATION_TO_SCENARIO: "Create evaluation scenarios from generation outputs",
    SCENARIOS_VIEW: "View scenarios, items and variants",
    SCENARIOS_CREATE: "Create scenarios",
    SCENARIOS_MANAGE: "Edit scenarios, assign evaluators, close scenarios",
    SCENARIOS_EXPORT: "Export scenarios",
    EVALUATIONS_VIEW_ALL: "View all judgments and analytics",
    EVALUATIONS_SUBMIT: "Answer the evaluation tasks assigned to you",
    EVALUATIONS_JUDGE: "Configure and run LLM judges",
    EVALUATIONS_EXPORT: "Export judgments and analytics",
    EVALUATIONS_JUDGE_FILES: "Upload judge files and run them as batches",
    PROMPTS_VIEW: "View prompt templates",
    PROMPTS_EDIT: "Create and edit prompt templates",
    PROVIDERS_VIEW: "View models and their prices",
    PROVIDERS_MANAGE: "Manage provider connections, API keys and models",
    ACCOUNTS_VIEW: "View the team's members",
    ACCOUNTS_MANAGE: "Add and remove members, change roles",
    ADMIN_ACCESS: "Use the admin console for the team",
}


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"
    MANAGER = "manager", "Manager"
    CREATOR = "creator", "Creator"
    EVALUATOR = "evaluator", "Evaluator"
    VIEWER = "viewer", "Viewer"


_VIEW = frozenset(
    {
        GENERATION_VIEW,
        SCENARIOS_VIEW,
        EVALUATIONS_VIEW_ALL,
        PROMPTS_VIEW,
        PROVIDERS_VIEW,
        ACCOUNTS_VIEW,
    }
)
_CREATOR = _VIEW | {
    GENERATION_CREATE,
    GENERATION_MANAGE,
    GENERATION_EXPORT,
    GENERATION_TO_SCENARIO,
    SCENARIOS_CREATE,
    SCENARIOS_EXPORT,
    EVALUATIONS_SUBMIT,
    EVALUATIONS_JUDGE,
    EVALUATIONS_EXPORT,
    EVALUATIONS_JUDGE_FILES,
    PROMPTS_EDIT,
}
_MANAGER = _CREATOR | {SCENARIOS_MANAGE, PROVIDERS_MANAGE, ADMIN_ACCESS}

ROLE_FEATURES: dict[str, frozenset[str]] = {
    Role.ADMIN: frozenset(FEATURES),
    Role.MANAGER: frozenset(_MANAGER),
    Role.CREATOR: frozenset(_CREATOR),
    Role.EVALUATOR: frozenset({EVALUATIONS_SUBMIT}),
    Role.VIEWER: _VIEW,
}

assert all(codes <= set(FEATURES) for codes in ROLE_FEATURES.values())
