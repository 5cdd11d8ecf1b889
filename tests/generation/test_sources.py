"""Uploads are validated whole before anything is written; errors name line and field. They
are read as streams (a JSON array element by element), with the same results and messages as
reading them whole."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from evalplatform.errors import FieldErrors
from generation import sources
from generation.sources import detect_format, parse_upload


def test_formats():
    assert parse_upload(b'[{"id": "a", "content": "x"}, "plain"]', "json") == [
        ("a", {"id": "a", "content": "x"}),
        ("2", {"content": "plain"}),
    ]
    assert parse_upload(b'{"id": 7, "text": "x"}\n\n{"text": "y"}\n', "jsonl") == [
        ("7", {"id": 7, "text": "x"}),
        ("2", {"text": "y"}),
    ]
    assert parse_upload(b'id,content\nr1,"a, b"\n\n r2 ,c\n', "csv") == [
        ("r1", {"id": "r1", "content": "a, b"}),
        ("r2", {"id": " r2 ", "content": "c"}),
    ]
    assert parse_upload("\ufeffone\n\ntwo\n".encode(), "text") == [
        ("1", {"id": 1, "content": "one"}),
        ("3", {"id": 3, "content": "two"}),
    ]
    assert detect_format("items.JSONL") == "jsonl" and detect_format("x.csv") == "csv"
    assert detect_format("notes") == "text"


@pytest.mark.parametrize(
    ("raw", "fmt", "field", "words"),
    [
        (b"\xff\xfebad", "text", "source.file", "This is text in UTF-16 (save it as UTF-8)"),
        (b"fine\n\xffbad", "text", "source.file", "Not UTF-8 text: line 2"),
        (b"   \n", "text", "source.file", "empty"),
        (b'{"a": 1}', "json", "source.file", "array"),
        (b"[1, 2", "json", "source.file", "Invalid JSON at line 1"),
        (b'{"a": 1}\n{oops}\n', "jsonl", "line 2", "Invalid JSON"),
        (b"id,content\nx,1,extra\n", "csv", "line 2", "3 fields; the header has 2"),
        (b",content\nx,1\n", "csv", "source.file", "header"),
        (b'[{"id": "a"}, {"id": "a"}]', "json", "items[1].id", "Duplicate id 'a'"),
        (b"[[1]]", "json", "items[0]", "must be an object"),
        (b'[{"id": true}]', "json", "items[0].id", "non-empty string"),
    ],
)
def test_bad_uploads_name_the_line_and_field(raw, fmt, field, words):
    with pytest.raises(FieldErrors) as err:
        parse_upload(raw, fmt)
    assert field in err.value.errors, err.value.errors
    assert words in err.value.errors[field][0]


@override_settings(UPLOAD_MAX_BYTES=10)
def test_size_limit():
    with pytest.raises(FieldErrors) as err:
        parse_upload(b"0123456789ab", "text")
    assert "the limit is 10" in err.value.errors["source.file"][0]


def test_a_json_array_names_the_index_of_a_bad_element_far_into_the_file():
    items = [{"id": f"i{n}", "content": "x" * 100} for n in range(20_000)]
    items[12_345] = [1, 2]  # not an object
    items[19_999] = {"id": "i7", "content": "again"}  # a duplicate id, at the very end
    with pytest.raises(FieldErrors) as err:
        parse_upload(json.dumps(items).encode(), "json")  # ~2.7 MB: many read windows
    assert err.value.errors == {
        "items[12345]": ["An item must be an object of fields (or a string)."],
        "items[19998].id": ["Duplicate id 'i7' (first used by item 8)."],
    }


def test_a_large_upload_is_read_from_a_file_and_names_its_bad_lines():
    lines = [json.dumps({"id": n, "content": "é" * 50}) for n in range(1, 40_001)]
    lines[29_999] = '{"id": 30000, "content": "cut'
    upload = SimpleUploadedFile("items.jsonl", "\n".join(lines).encode())
    with pytest.raises(FieldErrors) as err:
        parse_upload(upload, "jsonl")
    assert list(err.value.errors) == ["line 30000"]
    assert "Unterminated string" in err.value.errors["line 30000"][0]
    lines[29_999] = json.dumps({"id": 30_000, "content": "fixed"})
    items = parse_upload(SimpleUploadedFile("items.jsonl", "\n".join(lines).encode()), "jsonl")
    assert len(items) == 40_000 and items[-1] == ("40000", {"id": 40_000, "content": "é" * 50})


def test_not_utf8_far_into_the_file_names_its_line_and_byte():
    # Two-byte characters straddle every read window; the bad byte is on line 30,001.
    head = ("é" * 40 + "\n") * 30_000
    raw = head.encode() + b"ok \xff\n"
    with pytest.raises(FieldErrors) as err:
        parse_upload(raw, "text")
    assert err.value.errors["source.file"] == [
        f"Not UTF-8 text: line 30001, byte {len(head.encode()) + 3}. Save the file as UTF-8."
    ]


def test_the_streamed_json_reader_agrees_with_json_loads(monkeypatch):
    """Cut and corrupted JSON documents, read through windows a few characters wide: the
    items, or the error with its line and column, are exactly those of ``json.loads``."""
    monkeypatch.setattr(sources, "READ_CHARS", 5)
    rng = random.Random(7)
    leaves = [1, -2.5e10, 12345678901234567890, 'a"b\\n\u2028é', True, None, 0.1, "x" * 40]

    def value(depth: int = 0) -> Any:
        roll = rng.random()
        if depth > 3 or roll < 0.3:
            return rng.choice(leaves)
        if roll < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {f"k{i}": value(depth + 1) for i in range(rng.randint(0, 3))}

    def expected(text: str) -> tuple[str, Any]:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return "error", f"Invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}."
        if not isinstance(data, list):
            return "error", "A JSON upload is an array of items."
        if not all(isinstance(v, str) or (isinstance(v, dict) and v) for v in data):
            return "other", None  # not items: their errors are checked above
        return "items", [v if isinstance(v, dict) else {"content": v} for v in data]

    checked = 0
    for _ in range(1500):
        elements = [rng.choice([{"id": f"e{n}", "v": value()}, f"text {n}"]) for n in range(4)]
        text = json.dumps(elements, indent=rng.choice([None, 1]), ensure_ascii=False)
        cut = rng.randrange(len(text))
        text = rng.choice([text, text[:cut], text[:cut] + rng.choice(',]}[{":x 1\\') + text[cut:]])
        want = expected(text)
        if not text.strip() or want[0] == "other" or want == ("items", []):
            continue  # an empty file, no items, or bad items: other errors
        try:
            got: tuple[str, Any] = ("items", [v for _, v in parse_upload(text.encode(), "json")])
        except FieldErrors as exc:
            got = (
                "error",
                exc.errors["source.file"][0] if "source.file" in exc.errors else exc.errors,
            )
        assert got == want, text
        checked += 1
    assert checked > 1000


def test_deep_nesting_in_a_json_array_is_refused():
    with pytest.raises(FieldErrors) as err:
        parse_upload(b"[" + b"[" * 100_000 + b"]" * 100_000 + b"]", "json")
    assert err.value.errors == {"source.file": ["The JSON is nested too deeply."]}


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_a_number_too_long_to_read_is_a_field_error(fmt):
    item = '{"id": 1, "content": "x", "n": ' + "9" * 5000 + "}"
    raw = (f"[{item}]" if fmt == "json" else item).encode()
    with pytest.raises(FieldErrors) as caught:
        parse_upload(raw, fmt)
    assert "number too long" in str(caught.value.errors)
