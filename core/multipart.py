"""Uploaded files keep the name they were sent with. Django strips a file name's folder parts (and refuses "..")
before an application sees it, so `../../evil.md` arrived as `evil.md` and nobody was told; ragsite names what it
stored and why (knowledge/ingest/uploads.py), so it needs the name as sent: each uploaded file gets `raw_name`
beside Django's own cleaned `name`. A name Django would drop entirely ("..", "") is kept too, as a file named
"unnamed" whose `raw_name` says what was sent, so the upload can refuse it by name instead of losing it silently.

Both parsers use it: Django's (the pages: `RawNameMiddleware`, before the CSRF check reads the form) and DRF's
(`RawNameMultiPartParser`, the REST upload)."""

from __future__ import annotations

import html
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParser, MultiPartParserError
from django.utils.datastructures import ImmutableList
from rest_framework import parsers
from rest_framework.exceptions import ParseError


class RawNameParser(MultiPartParser):
    """Django's multipart parser, which remembers each file's name as sent."""

    _raw_name = ""

    def sanitize_file_name(self, file_name: str) -> str | None:
        self._raw_name = html.unescape(file_name)
        return super().sanitize_file_name(file_name) or ("unnamed" if self._raw_name else None)

    def handle_file_complete(self, old_field_name: str, counters: list[int]) -> None:
        files = self._files  # type: ignore[attr-defined]  # Django's parser's own dict of the files so far
        before = {key: len(values) for key, values in files.lists()}
        super().handle_file_complete(old_field_name, counters)
        for key, values in files.lists():
            if len(values) > before.get(key, 0):
                values[-1].raw_name = self._raw_name


def raw_name(uploaded: Any) -> str:
    """The name a file was sent with (Django's cleaned name when the parser did not see it)."""
    return str(getattr(uploaded, "raw_name", "") or uploaded.name)


class RawNameMultiPartParser(parsers.MultiPartParser):
    """DRF's multipart parser on RawNameParser."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parser_context = parser_context or {}
        request = parser_context["request"]
        meta = request.META.copy()
        meta["CONTENT_TYPE"] = media_type
        try:
            encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)  # as DRF's own parser reads it
            data, files = RawNameParser(meta, stream, request.upload_handlers, encoding).parse()
        except MultiPartParserError as exc:
            raise ParseError(f"Multipart form parse error - {exc}") from exc
        return parsers.DataAndFiles(data, files)


class RawNameMiddleware:
    """Django's own parsing of a multipart request goes through RawNameParser (placed before the CSRF check, which
    reads the form first)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        if request.content_type == "multipart/form-data":
            setattr(request, "parse_file_upload", lambda meta, post_data: _parsed(request, meta, post_data))  # noqa: B010
        return self.get_response(request)


def _parsed(request: HttpRequest, meta: Any, post_data: Any) -> Any:
    """HttpRequest.parse_file_upload, with RawNameParser."""
    request.upload_handlers = ImmutableList(
        request.upload_handlers, warning="You cannot alter upload handlers after the upload has been processed."
    )
    return RawNameParser(meta, post_data, request.upload_handlers, request.encoding).parse()
