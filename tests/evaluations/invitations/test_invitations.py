"""Invitations by email: a manager invites addresses (API and scenario page), the invited
person creates an account from the link and evaluates that scenario only; withdrawn,
expired and used links stop working; bad input changes nothing."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from evaluations.models import Assignment, AssignmentStatus, Invitation, Judgment
from tests.factories import UserFactory
from tests.helpers.evaluations import open_scenario

PASSWORD = "a-long-pass-phrase"


def invite(api, manager, scenario, *emails):
    response = api(manager).post(
        f"/api/scenarios/{scenario.pk}/invitations",
        {"emails": list(emails), "note": "Thanks for helping"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()


def sign_up(link, username="guest1"):
    client = Client()
    path = link.split("testserver", 1)[1]
    page = client.get(path)
    assert page.status_code == 200 and "Create your account" in page.content.decode()
    answer = client.post(
        path,
        {"username": username, "password1": PASSWORD, "password2": PASSWORD},
    )
    return client, answer


@pytest.mark.django_db
def test_an_invited_person_signs_up_and_evaluates_that_scenario_only(
    api, creator, finished_job, people_inviters, mailoutbox
):
    scenario = open_scenario(api, creator, finished_job, people_inviters["manager"])
    other = open_scenario(api, creator, finished_job, people_inviters["manager"], name="Other")
    made = invite(api, people_inviters["manager"], scenario, "Guest@Example.org")
    assert [m["email"] for m in made] == ["guest@example.org"]
    assert made[0]["state"] == "pending" and made[0]["emailed_at"] is not None
    # The mail carries the link; the token is stored only as a hash.
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["guest@example.org"]
    assert made[0]["link"] in mailoutbox[0].body and "Thanks for helping" in mailoutbox[0].body
    token = made[0]["link"].rsplit("/", 1)[1]
    assert not Invitation.objects.filter(token_hash__contains=token).exists()

    client, answer = sign_up(made[0]["link"])
    assert answer.status_code == 302 and answer["Location"] == f"/evaluate/scenarios/{scenario.pk}"
    guest = Invitation.objects.get().accepted_by
    assert guest.email == "guest@example.org" and not guest.memberships.exists()

    # The queue lists this scenario and not the team's other one; so does their home page.
    queue = client.get("/evaluate/").content.decode()
    assert "Eval" in queue and "Other" not in queue
    home = client.get("/").content.decode()
    assert "Your open tasks" in home and f"/evaluate/scenarios/{scenario.pk}" in home
    assert "Other" not in home and "Batch generation" not in home
    task_url = client.get(f"/evaluate/scenarios/{scenario.pk}")["Location"]
    assert client.post(task_url, {"winner": "A"}).status_code == 302
    assert Judgment.objects.get().evaluator == guest
    assert client.get(f"/evaluate/scenarios/{other.pk}").status_code == 404
    # Through the API too, and nothing else of the team is visible to them.
    assert api(guest).post(f"/api/evaluations/scenarios/{scenario.pk}/next").status_code == 200
    assert api(guest).post(f"/api/evaluations/scenarios/{other.pk}/next").status_code == 404
    assert api(guest).get(f"/api/scenarios/{scenario.pk}").status_code == 403  # no team role
    assert client.get(f"/scenarios/{scenario.pk}").status_code == 404

    # The manager sees who accepted; the link cannot be used by another account.
    listed = api(people_inviters["manager"]).get(f"/api/scenarios/{scenario.pk}/invitations").json()
    assert listed[0]["state"] == "accepted" and listed[0]["accepted_by"] == "guest1"
    _, again = sign_up_attempt(made[0]["link"])
    assert again.status_code == 410


def sign_up_attempt(link):
    client = Client()
    return client, client.get(link.split("testserver", 1)[1])


@pytest.mark.django_db
def test_an_existing_user_accepts_after_signing_in(api, creator, finished_job, people_inviters):
    scenario = open_scenario(api, creator, finished_job, people_inviters["manager"])
    made = invite(api, people_inviters["manager"], scenario, "known@example.org")
    path = made[0]["link"].split("testserver", 1)[1]
    known = UserFactory(username="known")
    anonymous = Client().get(path).content.decode()
    assert f"/login/?next={path}" in anonymous
    client = Client()
    client.force_login(known)
    assert "Accept as known" in client.get(path).content.decode()
    accepted = client.post(path)
    assert accepted.status_code == 302
    assert client.post(path).status_code == 302  # twice is harmless
    assert Invitation.objects.get().accepted_by == known


@pytest.mark.django_db
def test_withdrawing_takes_the_scenario_away_and_gives_reserved_places_back(
    api, creator, finished_job, people_inviters
):
    scenario = open_scenario(api, creator, finished_job, people_inviters["manager"])
    made = invite(api, people_inviters["manager"], scenario, "g@example.org")
    client, _ = sign_up(made[0]["link"])
    guest = Invitation.objects.get().accepted_by
    assert api(guest).post(f"/api/evaluations/scenarios/{scenario.pk}/next").status_code == 200
    reserved = Assignment.objects.get(evaluator=guest)
    assert reserved.task.taken == 1

    gone = api(people_inviters["manager"]).delete(
        f"/api/scenarios/{scenario.pk}/invitations/{made[0]['id']}"
    )
    assert gone.status_code == 204
    reserved.refresh_from_db()
    assert reserved.status == AssignmentStatus.EXPIRED and reserved.task.taken == 0
    assert api(guest).post(f"/api/evaluations/scenarios/{scenario.pk}/next").status_code == 404
    assert "No scenario is open for you" in client.get("/evaluate/").content.decode()
    assert client.get(made[0]["link"].split("testserver", 1)[1]).status_code == 410


@pytest.mark.django_db
def test_expired_and_unknown_links(api, creator, finished_job, people_inviters):
    scenario = open_scenario(api, creator, finished_job, people_inviters["manager"])
    made = invite(api, people_inviters["manager"], scenario, "late@example.org")
    Invitation.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    path = made[0]["link"].split("testserver", 1)[1]
    expired = Client().get(path)
    assert expired.status_code == 410 and "expired" in expired.content.decode()
    _, signed_up = sign_up_attempt(made[0]["link"])
    assert signed_up.status_code == 410
    assert Client().get("/invitations/not-a-token").status_code == 404
    # Re-inviting the same address replaces the pending invitation with a fresh link.
    again = invite(api, people_inviters["manager"], scenario, "late@example.org")
    assert again[0]["link"] != made[0]["link"]
    states = {i.pk: i.state for i in Invitation.objects.all()}
    assert states == {made[0]["id"]: "withdrawn", again[0]["id"]: "pending"}


@pytest.mark.django_db
def test_bad_input_and_permissions_change_nothing(
    api, creator, finished_job, people_inviters, mailoutbox
):
    scenario = open_scenario(api, creator, finished_job, people_inviters["manager"])
    url = f"/api/scenarios/{scenario.pk}/invitations"
    bad = api(people_inviters["manager"]).post(
        url, {"emails": ["ok@example.org", "not an email"]}, format="json"
    )
    assert bad.status_code == 400 and "emails[1]" in bad.json()["errors"]
    for body in ({}, {"emails": []}, {"emails": 5}, {"emails": ["a@b.org"], "note": 3}):
        assert api(people_inviters["manager"]).post(url, body, format="json").status_code == 400
    # A creator may view the scenario but not invite; another team gets a 404.
    ok = {"emails": ["a@example.org"]}
    assert api(people_inviters["creator"]).post(url, ok, format="json").status_code == 403
    assert api(people_inviters["creator"]).get(url).status_code == 403
    assert api(people_inviters["outsider"]).post(url, ok, format="json").status_code == 404
    assert api(people_inviters["outsider"]).get(url).status_code == 404
    assert not Invitation.objects.exists() and not mailoutbox


@pytest.mark.django_db
def test_the_scenario_page_invites_and_lists(
    api, creator, finished_job, people_inviters, mailoutbox
):
    scenario = open_scenario(api, creator, finished_job, people_inviters["manager"])
    client = Client()
    client.force_login(people_inviters["manager"])
    page = client.get(f"/scenarios/{scenario.pk}").content.decode()
    assert "Invite" in page
    done = client.post(
        f"/scenarios/{scenario.pk}/invite",
        {"emails": "x@example.org, y@example.org"},
        follow=True,
    )
    html = done.content.decode()
    links = re.findall(r"http://testserver/invitations/[\w-]+", html)
    assert len(links) == 2 and len(mailoutbox) == 2
    assert "x@example.org" in html and "pending" in html
    bad = client.post(f"/scenarios/{scenario.pk}/invite", {"emails": "nope"}, follow=True)
    assert "Not an email address" in bad.content.decode() and Invitation.objects.count() == 2
    withdrawn = Invitation.objects.get(email="x@example.org")
    client.post(f"/scenarios/{scenario.pk}/invitations/{withdrawn.pk}/withdraw")
    withdrawn.refresh_from_db()
    assert withdrawn.state == "withdrawn"
    # A creator's page has no invitation form, and their POST is refused.
    creator_client = Client()
    creator_client.force_login(people_inviters["creator"])
    assert "Invite" not in creator_client.get(f"/scenarios/{scenario.pk}").content.decode()
    creator_client.post(f"/scenarios/{scenario.pk}/invite", {"emails": "z@example.org"})
    assert not Invitation.objects.filter(email="z@example.org").exists()
