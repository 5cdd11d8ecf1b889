"""Invitation pages: the manager invites and withdraws on the scenario page; the invited
person opens their link, signs in or creates an account, and accepts."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from evalplatform.errors import ApplicationError, FieldErrors, NotFound
from evaluations.invitations import selectors
from evaluations.invitations import services as invitations
from evaluations.invitations.api import invitation_link
from evaluations.pages import scenario_or_404
from scenarios.models import ScenarioStatus


class SignUpForm(UserCreationForm):
    """A new account for an invited person; the email is the invitation's."""

    email = forms.EmailField(disabled=True, required=False)

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")


def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """The link in the email. Signed in: accept. Not signed in: create an account (or sign in
    and come back), then accept."""
    try:
        found = invitations.find(token)
    except NotFound:
        return render(request, "evaluations/invitation.html", {"invalid": True}, status=404)
    scenario = found.scenario
    context = {"invitation": found, "scenario": scenario, "state": found.state}
    if (
        found.state in ("withdrawn", "expired")
        or (found.state == "accepted" and found.accepted_by_id != request.user.pk)
        or scenario.status == ScenarioStatus.CLOSED
    ):
        return render(request, "evaluations/invitation.html", context, status=410)
    if request.method == "POST" and request.user.is_authenticated:
        return _accept(request, token, context)
    if request.method == "POST":
        form = SignUpForm(request.POST, initial={"email": found.email})
        if form.is_valid():
            # The account exists only if the invitation is accepted with it.
            try:
                with transaction.atomic():
                    user = form.save(commit=False)
                    user.email = found.email
                    user.save()
                    accepted = invitations.accept(user=user, token=token)
            except ApplicationError as exc:
                context |= {"error": exc.message, "form": form}
                return render(request, "evaluations/invitation.html", context, status=409)
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, f"Welcome: you are an evaluator of {scenario.name}.")
            return redirect("workspace:next", scenario_id=accepted.scenario_id)
        context["form"] = form
        return render(request, "evaluations/invitation.html", context, status=400)
    if request.user.is_authenticated and found.accepted_by_id == request.user.pk:
        return redirect("workspace:next", scenario_id=scenario.pk)
    context["form"] = SignUpForm(initial={"email": found.email})
    context["login_url"] = f"{reverse('login')}?next={request.path}"
    return render(request, "evaluations/invitation.html", context)


def _accept(request: HttpRequest, token: str, context: dict) -> HttpResponse:
    try:
        accepted = invitations.accept(user=request.user, token=token)
    except ApplicationError as exc:
        context["error"] = exc.message
        return render(request, "evaluations/invitation.html", context, status=409)
    messages.success(request, f"Welcome: you are an evaluator of {accepted.scenario.name}.")
    return redirect("workspace:next", scenario_id=accepted.scenario_id)


@login_required
@require_POST
def invite(request: HttpRequest, scenario_id: int) -> HttpResponse:
    scenario = scenario_or_404(request, scenario_id)
    try:
        made = invitations.invite(
            user=request.user,
            scenario=scenario,
            emails=request.POST.get("emails", ""),
            note=request.POST.get("note", ""),
            link_for=lambda token: invitation_link(request, token),
        )
    except FieldErrors as exc:
        for problems in exc.errors.values():
            for problem in problems:
                messages.error(request, problem)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        for made_invitation, link in made:
            mailed = "mailed" if made_invitation.emailed_at else "not mailed (copy the link)"
            messages.success(request, f"Invited {made_invitation.email}, {mailed}: {link}")
    return redirect("manager:scenario-page", scenario_id=scenario.pk)


@login_required
@require_POST
def withdraw(request: HttpRequest, scenario_id: int, invitation_id: int) -> HttpResponse:
    scenario = scenario_or_404(request, scenario_id)
    found = selectors.invitation_of(scenario, invitation_id)
    if found is None:
        raise Http404
    try:
        invitations.withdraw(user=request.user, invitation=found)
        messages.success(request, f"Invitation of {found.email} withdrawn.")
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("manager:scenario-page", scenario_id=scenario.pk)
