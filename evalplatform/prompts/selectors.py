from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion


def versions_with_blocks() -> QuerySet[PromptVersion]:
    return PromptVersion.objects.select_related("template__team", "created_by").prefetch_related(
        Prefetch("blocks", queryset=PromptBlock.objects.order_by("position", "id"))
    )


def templates_with_versions() -> QuerySet[PromptTemplate]:
    return PromptTemplate.objects.select_related("team").prefetch_related(
        Prefetch("versions", queryset=versions_with_blocks().order_by("number"))
    )
