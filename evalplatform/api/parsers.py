"""The API's body parsers: DRF's, with what the databases cannot store refused where the body
is read, for every endpoint at once.

A JSON body nested deeper than ``JSON_MAX_DEPTH`` (``evalplatform.limits``), or holding a NUL
character, a lone surrogate (``"\\ud800"``) or a number that is not finite (``NaN``,
``Infinity``, ``1e999``) anywhere, keys included, is a 400 naming the path of the offending
field (``source.content``, ``blocks[2].body``; ``body`` for the whole). A form or multipart
body's fields and file names get the same text check. Without this, such text reached a
service that stored it: PostgreSQL then refused the write (a 500) where SQLite kept it.
"""

from __future__ import annotations

import codecs
import json
from typing import Any

from django.conf import settings
from django.http import QueryDict
from django.utils.datastructures import MultiValueDict
from rest_framework import exceptions, parsers

from evalplatform.errors import FieldErrors
from evalplatform.limits import JSON_MAX_DEPTH
from evalplatform.validation import storable_problems, text_problem


def _refuse(problems: dict[str, str]) -> None:
    if problems:
        raise FieldErrors(problems)


def check_fields(data: QueryDict | MultiValueDict, files: MultiValueDict | None = None) -> None:
    """A 400 naming each form field (or file) whose text the databases cannot store."""
    problems: dict[str, str] = {}
    for key, values in data.lists():
        if problem := text_problem(key):
            problems["body"] = f"A field name {problem[0].lower()}{problem[1:]}"
        for value in values:
            if isinstance(value, str) and (problem := text_problem(value)):
                problems[key] = problem
    for key, uploads in (files or MultiValueDict()).lists():
        for upload in uploads:
            if problem := text_problem(upload.name or ""):
                problems[key] = f"The file name: {problem}"
    _refuse(problems)


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            # NaN and Infinity are read (as floats) so that the check below names the field.
            data = json.load(codecs.getreader(encoding)(stream))
        except RecursionError as exc:
            raise FieldErrors({"body": f"Nested more than {JSON_MAX_DEPTH} levels deep."}) from exc
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from exc
        _refuse(storable_problems(data))
        return data


class FormParser(parsers.FormParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        check_fields(data)
        return data


class MultiPartParser(parsers.MultiPartParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        check_fields(parsed.data, parsed.files)
        return parsed
