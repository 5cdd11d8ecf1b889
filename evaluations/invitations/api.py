"""The invitations API: ``/api/scenarios/{id}/invitations`` (list, invite by email) and
``/api/scenarios/{id}/invitations/{invitation_id}`` (withdraw), ``feature:scenarios:manage``."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import policy
from evalplatform.accounts.roles import SCENARIOS_MANAGE, SCENARIOS_VIEW
from evalplatform.api.parsers import JSONParser
from evalplatform.errors import FieldErrors, NotFound
from evaluations.invitations import selectors
from evaluations.invitations import services as invitations
from evaluations.invitations.models import Invitation
from scenarios.models import Scenario


class InvitationSerializer(serializers.ModelSerializer):
    invited_by = serializers.CharField(source="invited_by.username", default=None, allow_null=True)
    accepted_by = serializers.CharField(
        source="accepted_by.username", default=None, allow_null=True
    )

    class Meta:
        model = Invitation
        fields = [
            "id",
            "email",
            "state",
            "invited_by",
            "created_at",
            "expires_at",
            "emailed_at",
            "accepted_by",
            "accepted_at",
            "revoked_at",
        ]
        read_only_fields = fields


class InvitationCreatedSerializer(InvitationSerializer):
    link = serializers.CharField(help_text="The invitation link; shown once (also mailed).")

    class Meta(InvitationSerializer.Meta):
        fields = [*InvitationSerializer.Meta.fields, "link"]
        read_only_fields = fields


class InvitationInputSerializer(serializers.Serializer):
    emails = serializers.ListField(child=serializers.EmailField())
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


def _managed_scenario(user: Any, pk: int) -> Scenario:
    return policy.access(
        user,
        SCENARIOS_MANAGE,
        Scenario.objects.select_related("team"),
        view_feature=SCENARIOS_VIEW,
        pk=pk,
    )


def invitation_link(request, token: str) -> str:
    return request.build_absolute_uri(reverse("invitations:invitation", kwargs={"token": token}))


class InvitationListView(APIView):
    """``/api/scenarios/{id}/invitations`` (``feature:scenarios:manage``): the scenario's
    invitations; POST ``{"emails": [...], "note": ...}`` invites people by email. Each new
    invitation comes back once with its ``link`` (also mailed); whoever accepts it may
    evaluate this scenario, and only this one."""

    parser_classes = [JSONParser]

    @extend_schema(responses=InvitationSerializer(many=True))
    def get(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        rows = selectors.scenario_invitations(scenario)
        return Response(InvitationSerializer(rows, many=True).data)

    @extend_schema(
        request=InvitationInputSerializer,
        responses={201: InvitationCreatedSerializer(many=True)},
    )
    def post(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        made = invitations.invite(
            user=request.user,
            scenario=scenario,
            emails=request.data.get("emails"),
            note=request.data.get("note", ""),
            link_for=lambda token: invitation_link(request, token),
        )
        body = [
            {**InvitationSerializer(invitation).data, "link": link} for invitation, link in made
        ]
        return Response(body, status=status.HTTP_201_CREATED)


class InvitationView(APIView):
    """``DELETE /api/scenarios/{id}/invitations/{invitation_id}`` withdraws an invitation:
    a pending link stops working, and someone who accepted it leaves the pool."""

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, pk: int, invitation_id: int):
        scenario = _managed_scenario(request.user, pk)
        invitation = selectors.invitation_of(scenario, invitation_id)
        if invitation is None:
            raise NotFound()
        invitations.withdraw(user=request.user, invitation=invitation)
        return Response(status=status.HTTP_204_NO_CONTENT)
