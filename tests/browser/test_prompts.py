"""The prompt editor in a real browser: blocks added, moved and removed in place, the live
preview following the typing (messages, variables, a malformed placeholder), and the
template saved as the blocks read on the screen."""

from __future__ import annotations

import json

import pytest

from evalplatform.accounts.roles import Role
from evalplatform.prompts.models import PromptTemplate
from tests.helpers.browser import sign_in_as


@pytest.mark.django_db(transaction=True)
def test_write_a_template_with_the_live_preview(page, team_a, member):
    member(team_a, Role.CREATOR, username="writer")
    sign_in_as(page, "writer")
    page.get_by_role("link", name="Prompts").click()
    page.get_by_role("link", name="+ New template").click()
    page.get_by_label("Name").fill("Greeting")
    bodies = page.locator("ol.blocks textarea[name=block_body]")
    bodies.nth(0).fill("You answer in {{language}}.")
    bodies.nth(1).fill("Greet {{content}}.")
    page.get_by_label("Default variables").fill(json.dumps({"language": "French"}))
    page.get_by_label("Sample item").fill(json.dumps({"content": "Ada"}))
    preview = page.locator("#preview")
    preview.get_by_text("Greet Ada.").wait_for()
    assert preview.locator("pre").all_inner_texts() == ["You answer in French.", "Greet Ada."]

    # A third block, with a broken placeholder: the preview says where.
    page.get_by_role("button", name="+ Add block").click()
    assert bodies.count() == 3
    assert page.locator("[data-block-number]").all_inner_texts() == [
        "Block 1",
        "Block 2",
        "Block 3",
    ]
    bodies.nth(2).fill("Bye {{name")
    preview.get_by_text("Block 3, body: '{{name' has no closing '}}'.").wait_for()

    # Moved to the top, then removed: the preview renders again.
    page.locator("ol.blocks > li").nth(2).get_by_role("button", name="Move block up").click()
    page.locator("ol.blocks > li").nth(1).get_by_role("button", name="Move block up").click()
    assert bodies.nth(0).input_value() == "Bye {{name"
    page.locator("ol.blocks > li").nth(0).get_by_role("button", name="Remove block").click()
    assert bodies.count() == 2
    preview.get_by_text("Greet Ada.").wait_for()

    page.get_by_role("button", name="Create template").click()
    page.get_by_text("Template “Greeting” created with version 1.").wait_for()
    version = PromptTemplate.objects.get(name="Greeting").versions.get()
    assert [(b.title, b.body) for b in version.blocks.all()] == [
        ("System", "You answer in {{language}}."),
        ("", "Greet {{content}}."),
    ]
