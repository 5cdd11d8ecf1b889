"""Sign-in throttling on the sign-in page and the admin console: five failures for a
username (or thirty from an address) within 15 minutes refuse sign-in, even with the right
password, until they age out; a success clears them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from evalplatform.accounts.models import LoginFailure
from evalplatform.accounts.roles import Role
from tests.factories import UserFactory

PASSWORD = "pw-Secret-123"


def sign_in(client, username, password, url="/login/"):
    return client.post(url, {"username": username, "password": password})


@pytest.mark.django_db
def test_five_failures_lock_the_username_until_they_age_out(team_a, member):
    user = member(team_a, Role.VIEWER, username="ana")
    client = Client()
    for _ in range(5):
        assert sign_in(client, "ana", "wrong").status_code == 200  # the form again
    refused = sign_in(client, "ana", PASSWORD)
    assert refused.status_code == 200 and "Too many failed sign-ins" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    # Another username is not locked by Ana's failures.
    UserFactory(username="bo")
    assert sign_in(Client(), "bo", PASSWORD).status_code == 302
    # Once the failures leave the window, the right password works and clears them.
    LoginFailure.objects.update(created_at=timezone.now() - timedelta(minutes=16))
    assert sign_in(client, "ana", PASSWORD).status_code == 302
    assert not LoginFailure.objects.filter(username="ana").exists()
    assert int(client.session["_auth_user_id"]) == user.pk


@pytest.mark.django_db
def test_an_address_with_many_failures_is_refused_and_the_admin_counts_too(team_a, member):
    member(team_a, Role.MANAGER, username="manager")
    client = Client()
    for n in range(30):
        sign_in(client, f"nobody{n}", "wrong")
    refused = sign_in(client, "manager", PASSWORD, url="/admin/login/")
    assert "Too many failed sign-ins" in refused.content.decode()
    LoginFailure.objects.all().delete()
    for _ in range(5):
        sign_in(client, "manager", "wrong", url="/admin/login/")
    assert "Too many failed sign-ins" in sign_in(client, "manager", PASSWORD).content.decode()
    assert LoginFailure.objects.filter(username="manager").count() == 5


@pytest.mark.django_db
@pytest.mark.parametrize("spelling", [" ana", "ana ", "ANA", "\uff41\uff4e\uff41", " \uff21na "])
def test_another_spelling_of_the_name_buys_no_more_guesses(team_a, member, spelling):
    member(team_a, Role.VIEWER, username="ana")
    client = Client()
    for n in range(5):
        # Four spellings Django signs in as "ana", and the name itself.
        sign_in(client, [" ana", "ana ", "\uff41\uff4e\uff41", "ana", spelling][n], "wrong")
    refused = sign_in(client, spelling, PASSWORD)
    assert "Too many failed sign-ins" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    assert set(LoginFailure.objects.values_list("username", flat=True)) == {"ana"}
