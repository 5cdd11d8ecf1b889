"""Concurrent duplicates: the same create sent several times at once makes one object and
answers the others with a 400 or a 409 naming the field, never a 500 (the services check
names before writing, and two requests at once can both pass that check)."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from evalplatform.accounts.roles import Role
from evalplatform.prompts.models import PromptTemplate
from evalplatform.providers.models import ProviderConnection
from evaluations.models import LLMJudge
from tests.factories import ConnectionFactory, LLMModelFactory
from tests.helpers.evaluations import make_scenario

pytestmark = pytest.mark.django_db(transaction=True)


def at_once(client, path, body, times=6):
    barrier = threading.Barrier(times)
    answers, failures = [], []

    def send():
        try:
            barrier.wait(10)
            response = client.post(path, body, format="json")
            answers.append((response.status_code, response.json()))
        except Exception as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    return answers


def one_made(answers):
    codes = sorted(code for code, _ in answers)
    assert codes.count(201) == 1 and set(codes) <= {201, 400, 409}, answers
    for code, body in answers:
        if code != 201:
            assert "name" in body["errors"], body


def test_the_same_connection_at_once(api, team_a, member):
    admin = member(team_a, Role.ADMIN)
    body = {"team": team_a.slug, "name": "twin", "kind": "mock"}
    one_made(at_once(api(admin), "/api/providers/connections", body))
    assert ProviderConnection.objects.filter(team=team_a, name="twin").count() == 1


def test_the_same_prompt_template_at_once(api, team_a, member):
    creator = member(team_a, Role.CREATOR)
    body = {"team": team_a.slug, "name": "Twin", "blocks": [{"title": "", "body": "Hi"}]}
    one_made(at_once(api(creator), "/api/prompts/templates", body))
    assert PromptTemplate.objects.filter(team=team_a, name="Twin").count() == 1


def test_the_same_judge_at_once(api, team_a, member):
    people = {"manager": member(team_a, Role.MANAGER)}
    scenario = make_scenario(people, team_a, "comparison", {})
    model = LLMModelFactory(connection=ConnectionFactory(team=team_a, kind="mock"))
    body = {"name": "Twin", "model": model.pk}
    one_made(at_once(api(people["manager"]), f"/api/scenarios/{scenario.pk}/judges", body))
    assert LLMJudge.objects.filter(scenario=scenario, name="Twin").count() == 1


def test_the_same_group_at_once(api, team_a, member):
    from evalplatform.accounts.models import TeamGroup

    manager = member(team_a, Role.MANAGER)
    one_made(at_once(api(manager), "/api/groups", {"team": team_a.slug, "name": "Twin"}))
    assert TeamGroup.objects.filter(team=team_a, name="Twin").count() == 1
