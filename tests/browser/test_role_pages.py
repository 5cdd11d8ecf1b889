"""Pages per role in a real browser: an evaluator who opens a page not theirs gets the
site's own page (its navigation, a way back), never a bare "Not Found" or "403 Forbidden",
and sees no link it cannot use."""

from __future__ import annotations

import pytest

from tests.helpers.browser import sign_in_as

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_evaluator_gets_the_sites_own_pages(page, setup):
    from playwright.sync_api import expect

    sign_in_as(page, "eve")
    missing = page.goto("/scenarios/999999/review")
    assert missing.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    nav = page.locator("header.bar nav")
    expect(nav.get_by_role("link", name="Evaluate")).to_be_visible()
    # Nothing an evaluator cannot use: no API, no generation, no scenarios, no admin.
    for name in ("API", "Generation", "Scenarios", "Judge files", "Admin"):
        expect(nav.get_by_role("link", name=name, exact=True)).to_have_count(0)
    expect(page.get_by_role("link", name="Your evaluation tasks")).to_be_visible()
    refused = page.goto("/generation/")
    assert refused.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.locator("header.bar nav")).to_be_visible()
    home = page.goto("/")
    assert home.status == 200
    expect(page.get_by_text("create_token")).to_have_count(0)
    expect(page.get_by_text("manage.py")).to_have_count(0)
