"""Middleware of the pages."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.utils.html import format_html, format_html_join

from evalplatform.validation import text_problem

# Bodies the API's parsers read and check themselves (``evalplatform.api.parsers``).
_PARSED_BY_THE_API = ("/api/", "/v1/")
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class StorableTextMiddleware:
    """Django middleware: a page's form whose fields (or file names) hold text the
    databases cannot store, a NUL character above all, is a 400 naming the fields, before
    any view reads it (PostgreSQL would refuse the write with a 500; SQLite would keep it).
    Django's form fields refuse NUL themselves, but many views read ``request.POST``."""

    def __init__(self, get_response: Any):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        content_type = request.META.get("CONTENT_TYPE", "").lower()
        if (
            request.method in ("POST", "PUT", "PATCH")
            and content_type.startswith(_FORM_TYPES)
            and not request.path_info.startswith(_PARSED_BY_THE_API)
        ):
            problems = _form_problems(request)
            if problems:
                return HttpResponseBadRequest(
                    format_html(
                        "<!doctype html><title>Bad request</title><h1>Bad request</h1>"
                        "<p>Nothing was saved.</p><ul>{}</ul>",
                        format_html_join("", "<li>{}: {}</li>", problems.items()),
                    )
                )
        return self.get_response(request)


def _form_problems(request: HttpRequest) -> dict[str, str]:
    problems: dict[str, str] = {}
    for key, values in request.POST.lists():
        for value in [key, *values]:
            if problem := text_problem(value):
                problems[key] = problem
    for key, uploads in request.FILES.lists():
        for upload in uploads:
            if problem := text_problem(upload.name or ""):
                problems[key] = f"The file name: {problem}"
    return problems
