"""The analytics page's plots in a real browser: labels and hover texts made of the team's
own text (items, outputs, models) show as text. Plotly reads a little HTML in its strings
(``<a href>``, ``<b>``, ``<br>``): an output named ``<a href=…>`` must not become a link in
the Bradley-Terry plot or the win-rate heatmap."""

from __future__ import annotations

import json

import pytest

from evalplatform.accounts.roles import Role
from evaluations.models import Judgment, RaterKind
from scenarios import services

pytestmark = pytest.mark.slow

LINK = '<a href="https://evil.example/">{}</a>'


def _judged(team, member, rows, name):
    """An open comparison of ``rows`` by mara, every task judged by ann (A, B, A, ...)."""
    manager = member(team, Role.MANAGER, username="mara")
    scenario = services.scenario_from_upload(
        user=manager,
        team=team,
        data={"name": name, "type": "comparison", "config": {"ties": True}, "format": "jsonl"},
        raw="\n".join(json.dumps(r) for r in rows).encode(),
    )
    scenario = services.scenario_open(user=manager, scenario=scenario)
    ann = member(team, Role.EVALUATOR, username="ann")
    for n, task in enumerate(scenario.tasks.order_by("position")):
        Judgment.objects.create(
            scenario=scenario,
            task=task,
            rater_kind=RaterKind.HUMAN,
            evaluator=ann,
            presented=[task.variant_a_id, task.variant_b_id],
            payload={"winner": "AB"[n % 2]},
        )
    return scenario


@pytest.fixture
def hostile_scenario(transactional_db, team_a, member):
    rows = [
        {
            "item_id": LINK.format("item"),
            "variant_id": LINK.format(f"v{v}"),
            "content": f"answer {v}",
            "model": LINK.format(f"m{v}") if v == 0 else f"<b>m{v}</b> & co",
        }
        for v in range(3)
    ]
    return _judged(team_a, member, rows, "Links")


def _sign_in_to_analytics(page, scenario):
    page.goto(f"/login/?next=/scenarios/{scenario.pk}/analytics")
    page.get_by_label("Username").fill("mara")
    page.get_by_label("Password").fill("pw-Secret-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**/scenarios/{scenario.pk}/analytics")


def test_plot_labels_and_hovers_are_text_not_links(page, hostile_scenario):
    scenario = hostile_scenario
    _sign_in_to_analytics(page, scenario)
    for plot in ("#plot-bt", "#plot-heatmap"):
        page.locator(f"{plot} .main-svg").first.wait_for()

    # No link anywhere on the page leads where the labels point (the tables escape them too).
    assert not [href for href in links(page) if "evil.example" in href]
    assert page.locator(".plot svg a").count() == 0
    # The labels show the text as it was written.
    outputs = " ".join(page.locator("#plot-bt .ytick text").all_text_contents())
    assert LINK.format("item") in outputs and LINK.format("m0") in outputs
    models = " ".join(page.locator("#plot-heatmap .xtick text").all_text_contents())
    assert LINK.format("m0") in models and "<b>m1</b> & co" in models
    assert page.locator(".plot svg b, .plot svg tspan[style*='bold']").count() == 0

    # A hover over the heatmap's cells names the models as text too.
    cells = page.locator("#plot-heatmap .nsewdrag").first
    cells.scroll_into_view_if_needed()
    box = cells.bounding_box()
    assert box is not None
    seen = ""
    for fx, fy in ((0.2, 0.2), (0.5, 0.5), (0.8, 0.8), (0.2, 0.8)):
        page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy, steps=3)
        page.wait_for_timeout(100)  # plotly draws the hover label on its next frame
        seen += " ".join(page.locator("#plot-heatmap .hoverlayer text").all_text_contents())
    assert LINK.format("m0") in seen or "<b>m1</b> & co" in seen, seen
    assert page.locator(".plot svg a").count() == 0
    assert not [href for href in links(page) if "evil.example" in href]


def links(page) -> list[str]:
    """Every link's target, HTML's ``href`` and SVG's ``xlink:href`` (plotly's) alike."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll("a")).map((a) =>
            a.getAttribute("href") ||
            a.getAttributeNS("http://www.w3.org/1999/xlink", "href") || "")"""
    )


LONG = "An unusually long model name, version 2025-11-30, with thinking"


@pytest.fixture
def long_named(transactional_db, team_a, member):
    rows = [
        {
            "item_id": f"q{i}",
            "variant_id": f"q{i}-v{v}",
            "content": f"answer {v}",
            "model": f"{LONG} {v}",
        }
        for i in range(3)
        for v in range(3)
    ]
    return _judged(team_a, member, rows, "Long")


def test_the_summary_first_then_sections_in_tabs_with_whole_labels(page, long_named):
    from playwright.sync_api import expect

    scenario = long_named
    _sign_in_to_analytics(page, scenario)
    summary = page.locator("#summary")
    expect(summary).to_be_visible()
    expect(summary.locator(".summary-ranking li")).to_have_count(3)
    tabs = page.get_by_role("tab")
    names = tabs.all_text_contents()
    assert names[0] == "Rankings" and names[-1] == "All" and "Agreement" in names, names
    # The first tab opens: the rankings, not the agreement.
    expect(page.locator("#models")).to_be_visible()
    expect(page.locator("#agreement")).to_be_hidden()
    page.get_by_role("tab", name="Agreement").click()
    expect(page.locator("#agreement")).to_be_visible()
    expect(page.locator("#models")).to_be_hidden()
    expect(summary).to_be_visible()
    page.get_by_role("tab", name="All").click()
    expect(page.locator("#models")).to_be_visible()
    expect(page.locator("#agreement")).to_be_visible()
    # A long model name is drawn whole: its tick label inside the plot, none cut at the left.
    page.get_by_role("tab", name="Rankings").click()
    heatmap = page.locator("#plot-heatmap")
    expect(heatmap.locator(".ytick text").first).to_be_visible()
    left = heatmap.bounding_box()["x"]
    for tick in heatmap.locator(".ytick text").all():
        box = tick.bounding_box()
        assert box["x"] >= left - 1, (box, left)
    assert LONG in heatmap.locator(".ytick text").first.text_content()
    # A link to a section opens its tab (the search box and the pagers end in one).
    page.goto(f"/scenarios/{scenario.pk}/analytics?q=q1#agreement")
    expect(page.locator("#agreement")).to_be_visible()
    expect(page.locator("#models")).to_be_hidden()
