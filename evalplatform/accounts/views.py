"""The team's evaluator groups page (``/teams/<slug>/groups``): those who may see the team's
members (``feature:accounts:view``) read it; those who assign evaluators
(``feature:scenarios:manage``) create, rename and delete groups and change their members
there, through the same services as the API. Another team's page is a 404."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from evalplatform import validation
from evalplatform.accounts import policy, selectors, services
from evalplatform.accounts.models import Membership, Team, TeamGroup
from evalplatform.accounts.roles import ACCOUNTS_VIEW, SCENARIOS_MANAGE
from evalplatform.errors import ApplicationError, NotFound, report_on_page


@login_required
def groups(request: HttpRequest, team: str) -> HttpResponse:
    try:
        found = policy.access(request.user, ACCOUNTS_VIEW, Team.objects.all(), slug=team)
    except NotFound as exc:
        raise Http404 from exc
    may_manage = policy.has_feature(request.user, SCENARIOS_MANAGE, found)
    if request.method == "POST":
        if not may_manage:
            raise PermissionDenied
        _change(request, found)
        return redirect("accounts-groups", team=found.slug)
    members = (
        Membership.objects.filter(team=found).select_related("user").order_by("user__username")
    )
    return render(
        request,
        "accounts/groups.html",
        {
            "team": found,
            "groups": selectors.groups().filter(team=found),
            "members": [m.user for m in members],
            "may_manage": may_manage,
        },
    )


def _change(request: HttpRequest, team: Team) -> None:
    """``action``: ``create`` (``name``), ``rename`` (``group``, ``name``), ``delete``
    (``group``), ``add`` (``group``, ``member``: user ids) or ``remove`` (``group``,
    ``member``)."""
    action = request.POST.get("action")
    user = request.user
    try:
        if action == "create":
            group = services.group_create(user=user, team=team, name=request.POST.get("name"))
            messages.success(request, f"Group {group.name} created.")
            return
        group = _group(request, team)
        if action == "rename":
            services.group_rename(user=user, group=group, name=request.POST.get("name"))
            messages.success(request, f"Group renamed {group.name}.")
        elif action == "delete":
            services.group_delete(user=user, group=group)
            messages.success(request, f"Group {group.name} deleted.")
        elif action == "add":
            ids = [validation.digits(i, most=10) for i in request.POST.getlist("member")[:1000]]
            services.group_members_add(user=user, group=group, members=ids)
            messages.success(request, f"Members added to {group.name}.")
        elif action == "remove":
            member = services.group_member(group, request.POST.get("member", ""))
            services.group_members_remove(user=user, group=group, member=member)
            messages.success(request, f"{member.get_username()} left {group.name}.")
        else:
            messages.error(request, "Unknown action.")
    except IntegrityError:  # a group of that name was made at the same moment
        messages.error(request, "name: The team has a group of that name.")
    except ApplicationError as exc:
        report_on_page(request, exc)


def _group(request: HttpRequest, team: Team) -> TeamGroup:
    number = validation.digits(request.POST.get("group", ""), most=10)
    found = TeamGroup.objects.filter(team=team, pk=number).first() if number is not None else None
    if found is None:
        raise Http404
    return found
