"""The suite's flush after a transactional test (tests/conftest.py): every table emptied,
the content types and permissions that ``migrate`` made kept as they were, and Django's own
flush when a test changed those."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.test import TransactionTestCase

from evalplatform.accounts.roles import Role
from evalplatform.accounts.services import token_create

pytestmark = pytest.mark.django_db(transaction=True)


class _Case(TransactionTestCase):
    __test__ = False  # a handle on the teardown, not a test
    databases = {"default"}


def _filled_tables() -> list[str]:
    reference = {ContentType, Permission}
    return [
        model._meta.db_table
        for model in apps.get_models(include_auto_created=True)
        if model._meta.managed and model not in reference and model.objects.exists()
    ]


def test_every_table_is_emptied_and_the_reference_rows_stay(team_a, member):
    token_create(user=member(team_a, Role.MANAGER), name="t")
    kinds = list(ContentType.objects.order_by("pk").values_list("pk", "app_label", "model"))
    rights = list(Permission.objects.order_by("pk").values_list("pk", "codename"))
    assert {"accounts_team", "accounts_membership", "accounts_apitoken"} <= set(_filled_tables())
    _Case()._fixture_teardown()
    assert _filled_tables() == []
    assert list(ContentType.objects.order_by("pk").values_list("pk", "app_label", "model")) == kinds
    assert list(Permission.objects.order_by("pk").values_list("pk", "codename")) == rights


def test_a_test_that_adds_a_permission_gets_djangos_flush(team_a):
    rights = set(Permission.objects.values_list("content_type__app_label", "codename"))
    Permission.objects.create(
        codename="extra", name="Extra", content_type=ContentType.objects.get_for_model(Permission)
    )
    _Case()._fixture_teardown()
    assert _filled_tables() == []
    # Django's flush emptied the table and migrate's signal made the permissions again.
    assert set(Permission.objects.values_list("content_type__app_label", "codename")) == rights
