from __future__ import annotations

import pytest

from evalplatform.prompts.rendering import (
    ALIAS_GROUPS,
    Block,
    MissingVariables,
    render,
    render_all,
    variables_in,
)


def test_system_block_is_the_system_prompt_and_others_join_in_order():
    blocks = [
        Block("Intro", "First {{content}}."),
        Block("System", "You are terse."),
        Block("Task", "Second."),
        Block(" system ", "Answer in {{language}}."),
        Block("", "Third."),
    ]
    rendered = render(blocks, {"content": "X", "language": "German"})
    assert rendered.system == "You are terse.\n\nAnswer in German."
    assert rendered.user == "First X.\n\nSecond.\n\nThird."


def test_block_titles_are_not_sent():
    rendered = render([Block("Secret heading", "body")], {})
    assert "Secret heading" not in rendered.user and rendered.system == ""


@pytest.mark.parametrize(
    ("group", "field"),
    [(group, field) for group in ALIAS_GROUPS for field in group],
)
def test_every_alias_fills_every_name_of_its_group(group, field):
    for name in group:
        blocks = [Block("", f"<{{{{ {name} }}}}>")]
        assert render(blocks, {field: "V"}).user == "<V>", (name, field)


def test_the_alias_table_is_the_specs():
    assert ALIAS_GROUPS == (
        ("content", "input", "text_content", "thread_content", "thread"),
        ("messages", "email_thread", "email_content"),
        ("subject", "betreff"),
    )


def test_exact_name_wins_over_alias_and_item_over_defaults():
    blocks = [Block("", "{{input}}|{{subject}}|{{tone}}")]
    item = {"content": "alias", "input": "exact", "betreff": "Betreff"}
    assert render(blocks, item, {"subject": "default", "tone": "calm"}).user == "exact|Betreff|calm"


def test_values_are_inserted_once_not_re_expanded_and_structures_are_json():
    blocks = [Block("", "{{content}} {{meta}} {{n}}")]
    out = render(blocks, {"content": "{{meta}}", "meta": {"a": [1, "ü"]}, "n": 3}).user
    assert out == '{{meta}} {"a": [1, "ü"]} 3'


def test_missing_variables_are_reported_for_every_item_and_name():
    blocks = [Block("System", "Speak {{language}}"), Block("", "{{content}} / {{subject}}")]
    items = [
        ("a", {"content": "x", "subject": "s", "language": "en"}),
        ("b", {"text": "wrong field"}),
        ("c", {"thread": "ok", "language": "de"}),
    ]
    with pytest.raises(MissingVariables) as err:
        render_all(blocks, items)
    assert [(m.item_id, m.variable) for m in err.value.missing] == [
        ("b", "language"),
        ("b", "content"),
        ("b", "subject"),
        ("c", "subject"),
    ]
    assert "item b: {{content}}" in err.value.message
    assert err.value.extra["missing"][0] == {"item_id": "b", "variable": "language"}


def test_none_counts_as_missing_but_empty_text_is_a_value():
    blocks = [Block("", "[{{content}}]")]
    assert render(blocks, {"content": ""}).user == "[]"
    with pytest.raises(MissingVariables):
        render(blocks, {"content": None})


def test_variables_in_order_of_first_use():
    blocks = [Block("", "{{b}} {{ a }} {{b}}"), Block("", "{{c}} {{not a var}} {{}}")]
    assert variables_in(blocks) == ["b", "a", "c"]
