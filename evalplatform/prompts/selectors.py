from __future__ import annotations

from django.db.models import Count, OuterRef, Prefetch, QuerySet, Subquery

from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion


def versions_with_blocks() -> QuerySet[PromptVersion]:
    return PromptVersion.objects.select_related("template__team", "created_by").prefetch_related(
        Prefetch("blocks", queryset=PromptBlock.objects.order_by("position", "id"))
    )


def template_versions(template: PromptTemplate) -> QuerySet[PromptVersion]:
    return versions_with_blocks().filter(template=template).order_by("number")


def templates_with_latest_version() -> QuerySet[PromptTemplate]:
    """Templates with ``version_count`` and ``latest_versions`` (a one-item list: the highest
    numbered version with its blocks); older versions are not loaded."""
    highest = (
        PromptVersion.objects.filter(template=OuterRef("template"))
        .order_by("-number")
        .values("number")[:1]
    )
    return (
        PromptTemplate.objects.select_related("team")
        .annotate(version_count=Count("versions"))
        .prefetch_related(
            Prefetch(
                "versions",
                queryset=versions_with_blocks().filter(number=Subquery(highest)),
                to_attr="latest_versions",
            )
        )
        # Aggregating queries drop Meta.ordering; pagination needs a stable order.
        .order_by("team__name", "name", "pk")
    )
