"""Browser tests (Playwright): signing in."""

from __future__ import annotations

from tests.factories import ScenarioFactory


def sign_in(page, username):
    page.goto("/login/?next=/evaluate/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-Secret-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/evaluate/")


def sign_in_as(page, username):
    page.context.clear_cookies()
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-Secret-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def open_scenario_of(team, manager, kind, config, rows, name):
    """An open scenario of ``kind`` made by ``manager`` from ``rows`` (``ScenarioFactory``)."""
    return ScenarioFactory(
        team=team,
        created_by=manager,
        type=kind,
        config=config,
        rows=rows,
        name=name,
        open_it=True,
    )
