"""The evaluator workspace through Django's test client: the queue, one page per task type,
answers from the forms stored with the presented order, blind pages, model text rendered as
inert sanitized Markdown, CSRF, other people's tasks."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from evaluations.markdown import render
from evaluations.models import Judgment
from scenarios.models import Task, Variant
from tests.helpers.evaluations import open_scenario

PAYLOAD = (
    '<script>alert(1)</script><img src=x onerror="alert(2)"> **bold** [x](javascript:alert(3))'
)


def browser(user, **kwargs):
    client = Client(**kwargs)
    client.force_login(user)
    return client


def start(client, scenario):
    response = client.get(f"/evaluate/scenarios/{scenario.pk}")
    assert response.status_code == 302, response.status_code
    return response["Location"]


@pytest.mark.django_db
def test_a_comparison_from_the_queue_to_the_answer(
    api, creator, finished_job, people_manager_and_eve
):
    scenario = open_scenario(api, creator, finished_job, people_manager_and_eve["manager"])
    eve = browser(people_manager_and_eve["eve"])
    queue = eve.get("/evaluate/").content.decode()
    assert "Eval" in queue and "0 done · up to 18 left" in queue
    page_url = start(eve, scenario)
    page = eve.get(page_url)
    html = page.content.decode()
    assert page.status_code == 200 and "A is better" in html and "Tie" in html
    # Blind: no model or prompt name anywhere in the page source.
    for model, prompt in scenario.variants.values_list("model_label", "prompt_label"):
        assert model not in html and prompt not in html
    answered = eve.post(page_url, {"winner": "B", "time_spent_ms": "3100", "rationale": "ok"})
    assert (
        answered.status_code == 302 and answered["Location"] == f"/evaluate/scenarios/{scenario.pk}"
    )
    judgment = Judgment.objects.get()
    task = Task.objects.get(pk=judgment.task_id)
    assert judgment.presented == [task.variant_a_id, task.variant_b_id]
    assert judgment.payload == {"winner": "B"} and judgment.time_spent_ms == 3100
    assert eve.get(page_url).status_code == 302  # answered: on to the next one
    assert "1 done · up to 17 left" in eve.get("/evaluate/").content.decode()


@pytest.mark.django_db
def test_a_rating_and_a_bad_answer(api, creator, finished_job, people_manager_and_eve):
    rubric = {
        "dimensions": [
            {"name": "Clarity", "min": 1, "max": 5, "anchors": {"5": "crisp"}},
            {"name": "Depth", "min": 0, "max": 3, "justification": True},
        ]
    }
    scenario = open_scenario(
        api, creator, finished_job, people_manager_and_eve["manager"], type="rating", config=rubric
    )
    eve = browser(people_manager_and_eve["eve"])
    page_url = start(eve, scenario)
    html = eve.get(page_url).content.decode()
    assert "Clarity" in html and "crisp" in html and 'name="note_1"' in html
    bad = eve.post(page_url, {"score_0": "9", "score_1": "2"})
    assert bad.status_code == 400 and "From 1 to 5." in bad.content.decode()
    assert not Judgment.objects.exists()
    eve.post(page_url, {"score_0": "4", "score_1": "2", "note_1": "thin"})
    judgment = Judgment.objects.get()
    assert judgment.payload == {
        "scores": {"Clarity": 4, "Depth": 2},
        "justifications": {"Depth": "thin"},
    }


@pytest.mark.django_db
def test_a_ranking_and_a_labeling_page(api, creator, finished_job, people_manager_and_eve):
    ranking = open_scenario(
        api, creator, finished_job, people_manager_and_eve["manager"], type="ranking"
    )
    eve = browser(people_manager_and_eve["eve"])
    page_url = start(eve, ranking)
    assert 'draggable="true"' in eve.get(page_url).content.decode()
    # The order first shown, sent untouched, is no answer unless the evaluator says so.
    untouched = eve.post(page_url, {"ranking": "A,B,C,D"})
    assert untouched.status_code == 400 and not Judgment.objects.exists()
    assert "Order the responses first" in untouched.content.decode()
    eve.post(page_url, {"ranking": "D,C,B,A", "ranking_as_shown": "1"})
    judgment = Judgment.objects.get()
    assert judgment.payload["ranking"] == list(reversed(judgment.presented))

    labels = {"labels": ["good", "bad"], "free_text": True}
    labeling = open_scenario(
        api,
        creator,
        finished_job,
        people_manager_and_eve["manager"],
        type="labeling",
        config=labels,
        name="Labels",
    )
    page_url = start(eve, labeling)
    assert 'data-digit="2"' in eve.get(page_url).content.decode()
    eve.post(page_url, {"labels": "bad", "text": "off"})
    assert Judgment.objects.get(scenario=labeling).payload == {"labels": ["bad"], "text": "off"}


@pytest.mark.django_db
def test_model_text_never_runs(api, creator, finished_job, people_manager_and_eve):
    scenario = open_scenario(api, creator, finished_job, people_manager_and_eve["manager"])
    Variant.objects.filter(scenario=scenario).update(content=PAYLOAD)
    eve = browser(people_manager_and_eve["eve"])
    html = eve.get(start(eve, scenario)).content.decode()
    for bad in ("<script>alert", "<img", 'href="javascript:'):
        assert bad not in html, html[max(0, html.find(bad) - 200) : html.find(bad) + 100]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<strong>bold</strong>" in html
    assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", html))
    assert render("# Title\n\n- a\n- b") == "<h1>Title</h1>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n"


@pytest.mark.django_db
def test_only_your_own_tasks_and_csrf(
    api, creator, finished_job, people_manager_and_eve, team_a, member
):
    scenario = open_scenario(api, creator, finished_job, people_manager_and_eve["manager"])
    eve = browser(people_manager_and_eve["eve"])
    page_url = start(eve, scenario)
    other = browser(member(team_a, Role.EVALUATOR))
    assert other.get(page_url).status_code == 404
    assert other.post(page_url, {"winner": "A"}).status_code == 404
    strict = browser(people_manager_and_eve["eve"], enforce_csrf_checks=True)
    assert strict.post(page_url, {"winner": "A"}).status_code == 403
    assert not Judgment.objects.exists()
    skipped = eve.post(f"{page_url}/skip")
    assert skipped.status_code == 302
    # Progress in words that stay true: what was skipped is said, not folded into a total.
    assert "0 done · 1 skipped · up to 17 left" in eve.get("/evaluate/").content.decode()
    listed = api(people_manager_and_eve["eve"]).get("/api/evaluations/scenarios").json()
    assert {k: listed[0][k] for k in ("done", "skipped", "left")} == {
        "done": 0,
        "skipped": 1,
        "left": 17,
    }
    assert Client().get("/evaluate/").status_code == 302  # sign in first
