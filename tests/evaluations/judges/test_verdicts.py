"""Reading judge replies: plain, fenced and prose-wrapped JSON; truncated, malformed and
out-of-range replies rejected with a reason."""

from __future__ import annotations

import pytest

from evaluations.judges.verdicts import Rejected, read

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
