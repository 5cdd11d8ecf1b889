"""The job page while a job runs and once it ends, in a real browser against the platform's
ASGI server (WebSockets included): the header, the statistics, the outputs table and the
messages agree without a reload. And the step from a job to its evaluation: the scenario
form shows the chosen type's settings alone, previews the design, and keeps what was typed
when it is refused."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections

from generation.models import GenerationJob
from tests.helpers.browser import sign_in_as
from tests.helpers.generation import JOBS, generation_setup, job_body, run_in_background

pytestmark = pytest.mark.django_db(transaction=True)

SHOWN = 25  # the outputs table's first page


@pytest.fixture
def setup(team_a):
    """Two prompt versions and two mock models (the browser tests' ``setup`` is another)."""
    return generation_setup(team_a)


@pytest.fixture
def served(chromium, platform_server):
    """A page on the ASGI server (so the job's WebSocket is live); page errors fail."""
    context = chromium.new_context(base_url=f"http://{platform_server}")
    page = context.new_page()
    page.set_default_timeout(20_000)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    yield page
    context.close()
    assert not problems, problems


def _off_the_loop(fn):
    """``fn()`` in a thread of its own: Playwright's sync API keeps an event loop on the
    test's thread, where the channel layer refuses to send a live event (as starting a job
    does on Redis)."""
    found: dict[str, Any] = {}

    def call() -> None:
        try:
            found["value"] = fn()
        finally:
            connections.close_all()

    thread = threading.Thread(target=call)
    thread.start()
    thread.join(60)
    return found["value"]


def _agrees_at_completion(page: Any, total: int) -> None:
    from playwright.sync_api import expect

    expect(page.locator('h1 [data-field="status"]')).to_have_text("Completed")
    expect(page.locator('[data-field="done"]')).to_have_text(str(total))
    expect(page.locator("#outputs .status-pending")).to_have_count(0)
    expect(page.locator("#outputs tr.output-completed")).to_have_count(SHOWN)
    # The statistics by model: every output counted, every one completed.
    by_model = page.locator("#statistics table").first.locator("tbody tr")
    expect(by_model).to_have_count(2)
    for row in range(2):
        cells = by_model.nth(row).locator("td")
        expect(cells.nth(1)).to_have_text(str(total // 2))
        expect(cells.nth(2)).to_have_text(str(total // 2))
    expect(page.get_by_text("Job running.")).to_have_count(0)


def test_the_page_follows_a_job_to_its_end(served, api, creator, setup):
    # Calls that take a while, two at a time: the job ends over several of the page's
    # two-second refresh windows, its last cells inside one.
    setup["connection"].options = {"latency_s": 0.1}
    setup["connection"].save()
    response = api(creator).post(JOBS, job_body(setup, concurrency=2), format="json")
    job_id = response.json()["id"]
    sign_in_as(served, creator.username)
    served.goto(f"/generation/jobs/{job_id}")
    served.get_by_role("button", name="▶ Start").click()
    served.wait_for_url(f"**/generation/jobs/{job_id}")
    from playwright.sync_api import expect

    expect(served.locator(".messages")).to_contain_text("Job running.")
    served.wait_for_timeout(500)  # the socket's snapshot first
    thread, result = run_in_background(job_id)
    thread.join(120)
    assert result["summary"]
    _agrees_at_completion(served, 48)


def test_a_job_that_ended_before_the_socket_opened_is_shown_ended(served, api, creator, setup):
    """The page rendered while the job ran; the job ended before the page's socket connected
    (a fast job): its snapshot brings the tables up to date."""
    response = _off_the_loop(lambda: api(creator).post(JOBS, job_body(setup), format="json"))
    job_id = response.json()["id"]
    started = _off_the_loop(lambda: api(creator).post(f"{JOBS}/{job_id}/start"))
    assert started.json()["status"] == "running"
    sign_in_as(served, creator.username)

    def hold_until_done(socket: Any) -> None:
        thread, _ = run_in_background(job_id)
        thread.join(120)
        socket.connect_to_server()

    served.route_web_socket(f"**/ws/generation/jobs/{job_id}", hold_until_done)
    served.goto(f"/generation/jobs/{job_id}")
    assert GenerationJob.objects.get(pk=job_id).status == "completed"
    _agrees_at_completion(served, 48)


def test_the_conversion_form_keeps_what_was_typed(page, api, creator, setup):
    from playwright.sync_api import expect

    response = api(creator).post(JOBS, job_body(setup), format="json")
    job = GenerationJob.objects.get(pk=response.json()["id"])
    job.outputs.update(status="completed", content="An answer")
    GenerationJob.objects.filter(pk=job.pk).update(status="completed")
    sign_in_as(page, creator.username)
    page.goto(f"/generation/jobs/{job.pk}")
    page.get_by_role("link", name="Evaluate these outputs").click()
    page.wait_for_url(f"**/generation/jobs/{job.pk}/to-scenario")
    # One type's settings at a time.
    expect(page.locator('fieldset[data-for="comparison"]')).to_be_visible()
    expect(page.locator('fieldset[data-for="rating"]')).to_be_hidden()
    page.get_by_label("Type").select_option("rating")
    expect(page.locator('fieldset[data-for="rating"]')).to_be_visible()
    expect(page.locator('fieldset[data-for="comparison"]')).to_be_hidden()
    page.locator('[name="dim-0-name"]').fill("Clarity")
    page.locator('[name="dim-0-min"]').fill("5")
    page.locator('[name="dim-0-max"]').fill("1")
    page.get_by_label("Evaluators per task").fill("3")
    page.get_by_role("button", name="Preview the design").click()
    expect(page.locator("#scenario-preview")).to_contain_text("Rubric row “Clarity”: min and max")
    page.get_by_role("button", name="Create scenario").click()
    expect(page.locator(".card.error")).to_contain_text("Rubric row “Clarity”: min and max")
    # and beside the type's settings it is about
    expect(page.locator("p.field-error")).to_contain_text("Rubric row “Clarity”: min and max")
    # The form came back as it was sent: the type, its settings, the other fields.
    expect(page.get_by_label("Type")).to_have_value("rating")
    expect(page.locator('fieldset[data-for="rating"]')).to_be_visible()
    expect(page.locator('[name="dim-0-name"]')).to_have_value("Clarity")
    expect(page.locator('[name="dim-0-min"]')).to_have_value("5")
    expect(page.get_by_label("Evaluators per task")).to_have_value("3")
    page.locator('[name="dim-0-min"]').fill("1")
    page.locator('[name="dim-0-max"]').fill("5")
    page.get_by_role("button", name="Create scenario").click()
    expect(page.locator("h1")).to_contain_text(f"{job.name} evaluation")
