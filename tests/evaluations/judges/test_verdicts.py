"""Reading judge replies: plain, fenced and prose-wrapped JSON; truncated, malformed and
out-of-range replies rejected with a reason."""

from __future__ import annotations

import pytest

from evaluations.judges.verdicts import Rejected, read, reshape

RUBRIC = {
    "dimensions": [{"name": "clarity", "min": 1, "max": 5}, {"name": "tone", "min": 0, "max": 1}]
}


def test_plain_fenced_and_prose_wrapped_json():
    plain = read("comparison", {}, '{"winner": "B", "rationale": "Clearer."}')
    assert plain.payload == {"winner": "B"} and plain.rationale == "Clearer."
    assert plain.parse_status == "ok"
    fenced = read("comparison", {}, 'Verdict:\n```json\n{"winner": "a"}\n```\nThanks.')
    assert fenced.payload == {"winner": "A"} and fenced.parse_status == "extracted"
    prose = read(
        "rating",
        RUBRIC,
        'I think {this} matters. Final: {"scores": {"clarity": 4.0, "tone": "1"}} done',
    )
    assert prose.payload["scores"] == {"clarity": 4, "tone": 1}
    assert prose.parse_status == "extracted"
    tie = read("comparison", {"ties": True}, '{"winner": "TIE"}')
    assert tie.payload == {"winner": "tie"}


@pytest.mark.parametrize(
    ("kind", "config", "text", "why"),
    [
        ("comparison", {}, '{"winner": "A", "rationale": "Because A is', "no complete JSON"),
        ("comparison", {}, "A is better.", "no JSON object"),
        ("comparison", {}, "[1, 2]", "not an object"),
        ("comparison", {"ties": False}, '{"winner": "tie"}', "winner must be A or B"),
        ("comparison", {}, '{"winner": "C"}', "winner must be"),
        ("rating", RUBRIC, '{"scores": {"clarity": 6, "tone": 1}}', "outside 1-5"),
        ("rating", RUBRIC, '{"scores": {"clarity": 3}}', "No score for tone"),
        ("rating", RUBRIC, '{"scores": {"clarity": 3, "tone": 0, "wit": 2}}', "Unknown"),
        ("rating", RUBRIC, '{"scores": {"clarity": "high", "tone": 0}}', "not a number"),
        ("rating", RUBRIC, '{"score": 3}', 'No "scores"'),
        ("ranking", {}, '{"ranking": ["A", "A"]}', "once each"),
        ("labeling", {"labels": ["x", "y"]}, '{"labels": ["z"]}', "not one of the labels"),
        ("labeling", {"labels": ["x", "y"]}, '{"labels": ["x", "y"]}', "One label only"),
    ],
)
def test_bad_replies_are_rejected_with_a_reason(kind, config, text, why):
    with pytest.raises(Rejected, match=why):
        read(kind, config, text, keys=["A", "B", "C"] if kind == "ranking" else ["A", "B"])


def test_rankings_and_labels():
    ranked = read("ranking", {}, '{"ranking": ["c", "A", "B"]}', keys=["A", "B", "C"])
    assert ranked.payload == {"ranking": ["C", "A", "B"]}
    labels = read(
        "labeling", {"labels": ["Good", "Bad"], "multiple": True}, '{"labels": ["good", "BAD"]}'
    )
    assert labels.payload == {"labels": ["Good", "Bad"], "text": ""}


def test_the_tag_reader_reads_as_the_backreferencing_pattern_it_replaced():
    """``tags`` is linear in the reply (bench/pathological_inputs.py: 80,000 characters of
    unclosed tags in 11 ms, where the pattern took 4 s); its parts are exactly the
    pattern's, checked on 5,000 seeded random texts of tags, near-tags and text."""
    import random
    import re

    from evaluations.judges.verdicts import tags

    rng = random.Random(35)
    pieces = ["<a>", "</a>", "<b>", "</b>", "<a.b>", "</a.b>", "<ab>", "</ab>", "x", "<", ">"]
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        pattern = re.compile(r"<([A-Za-z_][\w.-]{0,63})>(.{0,12}?)</\1>", re.DOTALL)
        expected = [(m.group(1), m.group(2)) for m in pattern.finditer(text)]
        assert tags(text, most=12) == expected, text


def test_a_reply_of_unclosed_tags_is_refused_and_a_closed_one_still_read():
    form = {"kind": "tags", "fields": {"winner": "BETTER"}, "values": {"S1": "A", "S2": "B"}}
    with pytest.raises(Rejected):
        reshape("<a>" * 20_000, form)
    found = read("comparison", {}, "<a>" * 20_000 + "<BETTER>S2</BETTER>", reply_format=form)
    assert found.payload == {"winner": "B"}
