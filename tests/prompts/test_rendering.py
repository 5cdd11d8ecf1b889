from __future__ import annotations

import pytest

from evalplatform.prompts.rendering import (
    ALIAS_GROUPS,
    Block,
    MalformedPlaceholders,
    MissingVariables,
    placeholder_problems,
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


def test_variables_in_order_of_first_use_without_the_malformed():
    blocks = [Block("", "{{b}} {{ a }} {{b}}"), Block("", "{{c}} {{not a var}} {{}}")]
    assert variables_in(blocks) == ["b", "a", "c"]


def test_names_take_any_letters_digits_underscores_and_hyphens_and_paths():
    blocks = [
        Block("", "{{inhalt_ä}} {{email-thread}} {{ 名前 }} {{x2}} {{0}}"),
        Block("", "{{body.messages.0.content}} {{ body.meta.tags.1 }}"),
    ]
    assert variables_in(blocks) == [
        "inhalt_ä",
        "email-thread",
        "名前",
        "x2",
        "0",
        "body.messages.0.content",
        "body.meta.tags.1",
    ]
    item = {
        "inhalt_ä": "Ä",
        "email-thread": "T",
        "名前": "N",
        "x2": 2,
        "0": "zero",
        "body": {"messages": [{"content": "first"}], "meta": {"tags": ["a", {"b": [1]}]}},
    }
    assert render(blocks, item).user == 'Ä T N 2 zero\n\nfirst {"b": [1]}'


def test_paths_reach_dicts_and_lists_start_at_an_alias_and_fall_back_to_defaults():
    blocks = [Block("", "{{messages.1.text}} / {{cfg.tone}}")]
    item = {"email_thread": [{"text": "one"}, {"text": "two"}]}
    assert render(blocks, item, {"cfg": {"tone": "calm"}}).user == "two / calm"
    # A field named with the dots itself wins over the path.
    assert render([Block("", "{{a.b}}")], {"a.b": "flat", "a": {"b": "deep"}}).user == "flat"


@pytest.mark.parametrize(
    "item",
    [
        {},
        {"body": "not JSON to walk"},
        {"body": {"messages": []}},
        {"body": {"messages": [{"content": None}]}},
        {"body": {"messages": {"0": {}}}},
        {"body": {"messages": [{"text": "x"}]}},
    ],
)
def test_a_path_that_leads_nowhere_is_missing_and_named(item):
    with pytest.raises(MissingVariables) as err:
        render_all([Block("", "{{body.messages.0.content}}")], [("i1", item)])
    assert [(m.item_id, m.variable) for m in err.value.missing] == [
        ("i1", "body.messages.0.content")
    ]
    assert "item i1: {{body.messages.0.content}}" in err.value.message


def test_a_list_index_is_a_plain_number():
    item = {"xs": ["a", "b"]}
    assert render([Block("", "{{xs.1}}")], item).user == "b"
    for path in ("xs.-1", "xs.01x", "xs.²", "xs.99999999999999999999"):
        with pytest.raises(MissingVariables):
            render([Block("", f"{{{{{path}}}}}")], item)


@pytest.mark.parametrize(
    ("body", "text", "problem"),
    [
        ("a {{}} b", "{{}}", "is empty"),
        ("a {{   }} b", "{{   }}", "is empty"),
        ("{{ a..b }}", "{{ a..b }}", "is not a variable"),
        ("{{.a}}", "{{.a}}", "is not a variable"),
        ("{{a.}}", "{{a.}}", "is not a variable"),
        ("{{a b}}", "{{a b}}", "is not a variable"),
        ("{{a$}}", "{{a$}}", "is not a variable"),
        ("Hello {{name} and {{other}}", "{{name}", "has no closing '}}'"),
        ("Hello {{name", "{{name", "has no closing '}}'"),
        ("{{na\nme}}", "{{na\nme}}", "is not a variable"),
    ],
)
def test_malformed_placeholders_are_errors_naming_block_and_text(body, text, problem):
    blocks = [Block("System", "Fine {{x}}"), Block("Task", body)]
    [found] = placeholder_problems(blocks)
    assert (found.block, found.title, found.text) == (1, "Task", text)
    assert problem in found.problem
    assert str(found).startswith(f"block 2 (Task): {text!r} {problem}")
    with pytest.raises(MalformedPlaceholders) as err:
        render_all(blocks, [("i", {"x": 1, "name": "n", "other": "o", "a": "a"})])
    assert list(err.value.errors) == ["blocks[1].body"]
    assert err.value.errors["blocks[1].body"][0].startswith(f"{text!r} {problem}")
    # One cell of a job planned before placeholders were checked renders as it always did:
    # the malformed placeholder stays text (a running job never breaks on it).
    rendered = render(blocks, {"x": 1, "name": "n", "other": "o", "a": "a"})
    assert text.rstrip("}")[:2] == "{{" and "{{" in rendered.user


def test_braces_that_open_no_placeholder_are_text():
    blocks = [Block("", 'JSON: {"a": {"b": 1}} and {single} and }} and {{x}}')]
    assert placeholder_problems(blocks) == []
    assert render(blocks, {"x": "X"}).user == 'JSON: {"a": {"b": 1}} and {single} and }} and X'
