"""Browser tests: Playwright for Python driving Debian's Chromium (never a downloaded
browser). Without Chromium or the playwright package they are skipped on a developer's
machine and fail under CI (``CI=true``), where ``.ci/run`` installs both."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from evalplatform.accounts.roles import Role
from tests.helpers.browser import open_scenario_of

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"Browser tests cannot run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(executable):
        _missing("Debian's chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed")
    # Playwright's sync API keeps an event loop on this thread; the tests' own ORM calls are
    # synchronous and run between browser calls, never inside the loop.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            yield browser
            browser.close()


@pytest.fixture
def page(chromium, live_server):
    """A fresh browser context (no cookies) on the live server; any JavaScript dialog or
    page error fails the test (model text must never run)."""
    context = chromium.new_context(base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    problems: list[str] = []

    def on_dialog(dialog: Any) -> None:
        problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    yield page
    context.close()
    assert not problems, problems


PAYLOAD = "<script>alert('xss')</script><img src=x onerror=\"alert('img')\"> **bold**"


@pytest.fixture
def setup(transactional_db, team_a, member):
    manager = member(team_a, Role.MANAGER)
    evaluator = member(team_a, Role.EVALUATOR, username="eve")
    rows = [
        {
            "item_id": "q1",
            "variant_id": "v1",
            "content": PAYLOAD,
            "model": "secret-model-alpha",
            "prompt": "secret-prompt-one",
            "context": {"question": "Which answer is kinder?"},
        },
        {
            "item_id": "q1",
            "variant_id": "v2",
            "content": "A plain *answer*.",
            "model": "secret-model-beta",
            "prompt": "secret-prompt-two",
            "context": {"question": "Which answer is kinder?"},
        },
    ]
    comparison = open_scenario_of(
        team_a, manager, "comparison", {"ties": True}, rows, "Kindness (pairs)"
    )
    rubric = {
        "dimensions": [
            {"name": "clarity", "min": 1, "max": 5, "anchors": {"1": "Muddled", "5": "Clear"}},
            {"name": "tone", "min": 1, "max": 3},
        ]
    }
    rating = open_scenario_of(team_a, manager, "rating", rubric, rows[:1], "Clarity (rubric)")
    return {"evaluator": evaluator, "comparison": comparison, "rating": rating}
