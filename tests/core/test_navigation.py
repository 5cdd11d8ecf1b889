"""The navigation shows each role only what it can open: an evaluator sees Evaluate and its
password page (not Generation, Scenarios, Prompts, Judge files, API or Admin, whose pages are
refused or of no use to it); every link shown opens for that role, and the pages it is not
shown answer the site's 403 page."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role

LINKS = ("Generation", "Scenarios", "Prompts", "Judge files", "Evaluate", "API", "Admin")
# Every role changes its own password from the bar.
WORKING = {"Generation", "Scenarios", "Prompts", "Judge files", "Evaluate", "API", "Password"}
SHOWN = {
    Role.ADMIN: {*LINKS, "Password"},
    Role.MANAGER: {*LINKS, "Password"},
    Role.CREATOR: WORKING,
    Role.VIEWER: WORKING,
    Role.EVALUATOR: {"Evaluate", "Password"},
}


def nav_of(client):
    page = client.get("/evaluate/").content.decode()
    nav = page.split("<nav>", 1)[1].split("</nav>", 1)[0]
    return dict(re.findall(r'<a href="([^"]+)">([^<]+)</a>', nav))


@pytest.mark.django_db
@pytest.mark.parametrize("role", list(SHOWN))
def test_each_role_sees_the_links_it_can_open(team_a, member, role):
    client = Client()
    client.force_login(member(team_a, role))
    links = nav_of(client)
    assert set(links.values()) == SHOWN[role]
    for href in links:
        assert client.get(href).status_code == 200, href
    if role == Role.EVALUATOR:
        for href in ("/generation/", "/scenarios/", "/judge-files/"):
            refused = client.get(href)
            assert refused.status_code == 403 and "Not allowed" in refused.content.decode()


@pytest.mark.django_db
def test_a_user_without_a_team_sees_where_to_evaluate(django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user("guest"))
    assert set(nav_of(client).values()) == {"Evaluate", "Password"}
