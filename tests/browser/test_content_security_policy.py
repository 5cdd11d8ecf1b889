"""The Content-Security-Policy in a real browser: every page of the platform (the demo's jobs,
scenarios, analytics plots, an evaluator's task, the admin, the API docs) loads and runs its
scripts with no violation of the policy, and a script injected into a page is refused."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connections

from generation.models import GenerationJob
from scenarios.models import Scenario

# Registered before any page script runs: every violation the browser reports is kept.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


def _demo() -> None:
    try:
        call_command("demo", stdout=io.StringIO())
    finally:
        connections.close_all()  # this thread's own connection


@pytest.fixture
def demo(transactional_db):
    # In a thread of its own: Playwright keeps an event loop running on this one, and the
    # demo's live events reach channels-redis through async_to_sync in scale mode.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_demo).result()
    users = get_user_model().objects
    for username in ("demo-manager", "demo-evaluator"):
        user = users.get(username=username)
        user.set_password("pw-Secret-123")
        user.save()
    return {
        "job": GenerationJob.objects.get(name__startswith="Demo:"),
        "comparison": Scenario.objects.get(type="comparison"),
        "rating": Scenario.objects.get(type="rating"),
    }


def sign_in(page: Any, username: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-Secret-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/")


def visit(page: Any, path: str, console: list[str]) -> list[str]:
    console.clear()
    response = page.goto(path)
    assert response.status < 400, (path, response.status)
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    page.wait_for_load_state("networkidle")
    found = page.evaluate("window.__violations")
    return [f"{path}: {v}" for v in found] + [f"{path}: {m}" for m in console]


def test_every_page_runs_under_the_policy(chromium, live_server, demo):
    context = chromium.new_context(base_url=live_server.url)
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    page.set_default_timeout(20_000)
    console: list[str] = []
    page.on(
        "console",
        lambda m: console.append(m.text) if "Content Security Policy" in m.text else None,
    )
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    job, comparison = demo["job"], demo["comparison"]
    try:
        sign_in(page, "demo-manager")
        violations: list[str] = []
        for path in (
            "/",
            "/generation/",
            "/generation/new",
            f"/generation/jobs/{job.pk}",
            "/scenarios/",
            "/scenarios/new",
            f"/scenarios/{comparison.pk}",
            f"/scenarios/{comparison.pk}/analytics",
            f"/scenarios/{demo['rating'].pk}/analytics",
            "/evaluate/",
            "/admin/",
            "/admin/generation/generationjob/",
            "/api/docs/",
        ):
            violations += visit(page, path, console)
        # The analytics plots were drawn (plotly ran under the policy).
        page.goto(f"/scenarios/{comparison.pk}/analytics")
        page.wait_for_load_state("networkidle")
        assert page.locator(".js-plotly-plot").count() >= 1
        # The Swagger UI rendered the operations from its separately served script.
        page.goto("/api/docs/")
        page.wait_for_selector(".opblock", timeout=20_000)
        violations += page.evaluate("window.__violations")

        # A script that found its way into a page does not run.
        ran = page.evaluate(
            """() => {
                const s = document.createElement("script");
                s.textContent = "window.__ran = true";
                document.body.appendChild(s);
                return window.__ran === true;
            }"""
        )
        assert ran is False
        assert any(v.startswith("script-src") for v in page.evaluate("window.__violations"))

        # An evaluator's task page.
        page.context.clear_cookies()
        sign_in(page, "demo-evaluator")
        page.goto("/evaluate/")
        page.get_by_role("link", name="Start").first.click()
        page.wait_for_url("**/evaluate/tasks/*")
        violations += page.evaluate("window.__violations")
    finally:
        context.close()
    assert violations == []
    assert errors == []
