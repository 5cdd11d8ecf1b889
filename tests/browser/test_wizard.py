"""The job wizard in a real browser: each step checked before the next opens, in the form's
words; a number past its bound shown on its own step (never a bubble on a hidden step nor a
dead Create button); the summary's errors lead back to their step."""

from __future__ import annotations

import json

import pytest

from generation.models import GenerationJob
from tests.helpers.browser import sign_in_as
from tests.helpers.generation import generation_setup

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(team_a):
    """Two prompt versions and two mock models (the browser tests' ``setup`` is another)."""
    return generation_setup(team_a)


def _step(page, n):
    return page.locator(f'[data-step="{n}"]')


def test_each_step_says_what_it_needs_before_the_next(page, creator, setup):
    from playwright.sync_api import expect

    sign_in_as(page, creator.username)
    page.goto("/generation/new")
    next_step = page.get_by_role("button", name="Next >")
    next_step.click()
    expect(_step(page, 1)).to_be_visible()
    expect(_step(page, 1).get_by_role("alert")).to_have_text("Upload a file or paste the items.")
    items = [{"id": "w1", "content": "A text"}, {"id": "w2", "content": "Another"}]
    page.get_by_label("… or paste items").fill(json.dumps(items))
    next_step.click()
    expect(_step(page, 2)).to_be_visible()
    # A later step cannot be reached past one that is not ready.
    page.locator('[data-step-tab="4"]').click()
    expect(_step(page, 2)).to_be_visible()
    expect(_step(page, 2).get_by_role("alert")).to_have_text("Choose at least one prompt template.")
    _step(page, 2).locator('input[name="prompt_versions"]').first.check()
    next_step.click()
    next_step.click()
    expect(_step(page, 3).get_by_role("alert")).to_have_text("Choose at least one model.")
    _step(page, 3).locator('input[name="models"]').first.check()
    next_step.click()
    expect(_step(page, 4)).to_be_visible()
    page.get_by_label("Repetitions").fill("100000")
    # The summary is not reached with a number past its bound: the step with it stays open,
    # its field marked (the browser's bubble can show: the field is visible).
    page.locator('[data-step-tab="5"]').click()
    expect(_step(page, 4)).to_be_visible()
    expect(_step(page, 5)).to_be_hidden()
    assert page.get_by_label("Repetitions").evaluate("f => !f.checkValidity()")
    # Creating checks every step too: nothing is sent.
    page.get_by_label("Repetitions").fill("2")
    page.get_by_label("Job name").fill("Stepwise")
    next_step.click()
    expect(page.locator("#estimate")).to_contain_text("4 outputs")
    page.get_by_role("button", name="Create job", exact=True).click()
    page.wait_for_url("**/generation/jobs/*")
    job = GenerationJob.objects.get(name="Stepwise")
    assert job.total_cells == 4


def test_the_summarys_errors_lead_to_their_step(page, creator, setup):
    from playwright.sync_api import expect

    sign_in_as(page, creator.username)
    page.goto("/generation/new")
    page.get_by_label("… or paste items").fill(json.dumps([{"id": "w1", "content": "A"}]))
    page.get_by_role("button", name="Next >").click()
    _step(page, 2).locator('input[name="prompt_versions"]').first.check()
    page.get_by_role("button", name="Next >").click()
    # No model ticked, but extra configurations typed (that are not a JSON list).
    _step(page, 3).get_by_text("More configurations of a model").click()
    page.get_by_label("JSON list").fill('{"model": 1}')
    page.locator('[data-step-tab="5"]').click()
    estimate = page.locator("#estimate")
    expect(estimate).to_contain_text("Extra configurations are a JSON list")
    expect(estimate).not_to_contain_text("models[")
    estimate.get_by_role("button", name="Step 3").click()
    expect(_step(page, 3)).to_be_visible()
    expect(_step(page, 5)).to_be_hidden()
    assert not GenerationJob.objects.exists()


def test_a_prompt_only_job_passes_the_first_step(page, creator, setup):
    from playwright.sync_api import expect

    sign_in_as(page, creator.username)
    page.goto("/generation/new")
    page.get_by_label("Prompt only").check()
    page.get_by_role("button", name="Next >").click()
    expect(_step(page, 2)).to_be_visible()
    expect(_step(page, 1).locator("[data-step-problem]")).to_be_hidden()
