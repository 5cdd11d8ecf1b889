"""Uploads are validated whole before anything is written; errors name line and field."""

from __future__ import annotations

import pytest
from django.test import override_settings

from evalplatform.errors import FieldErrors
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
        (b"\xff\xfebad", "text", "source.file", "Not UTF-8 text: line 1"),
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
