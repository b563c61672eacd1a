"""Why a file was skipped or failed, in the reader's language. The ingestion records its reasons in English, once,
for every reader (a job is read in English and in Spanish); the ones it writes itself are put into words here, and
what a parser or the system said inside them (a library's message, an OS error) stays as it was, marked English."""

from __future__ import annotations

import re

from django import template
from django.utils.functional import Promise
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

register = template.Library()

# (the reason as the ingestion writes it, its words here); `detail` is a parser's or the system's own message.
REASONS: list[tuple[str, Promise]] = [
    (r"The file is not valid UTF-8 text\.|not valid UTF-8 text", _("The file is not valid UTF-8 text.")),
    (r"The file looks binary, not text\.|binary file", _("The file looks binary, not text.")),
    (r"The document has no text( to index)?\.|empty(: no text to index)?", _("Empty: no text to index.")),
    (r"The PDF is password-protected\.", _("The PDF is password-protected.")),
    (r"The PDF has no pages\.", _("The PDF has no pages.")),
    (r"The PDF is damaged or not a PDF \((?P<detail>.*)\)\.", _("The PDF is damaged or not a PDF")),
    (r"The PDF is encrypted and cannot be read \((?P<detail>.*)\)\.", _("The PDF is encrypted and cannot be read")),
    (r"The image could not be read: (?P<detail>.*)", _("The image could not be read")),
    (r"The HTML could not be parsed: (?P<detail>.*)", _("The HTML could not be parsed")),
    (r"The image needs OCR, which is not available: (?P<detail>.*)", _("The image needs OCR, which is not available")),
    (
        r"The PDF has no text on any of its (?P<n>\d+) page\(s\), not even by OCR \((?P<detail>.*)\)\.",
        _("The PDF has no text on any of its pages, not even by OCR"),
    ),
    (r"OCR found no text in the image\.", _("OCR found no text in the image.")),
    (r"symbolic link \(not followed\)", _("A symbolic link (not followed).")),
    (r"excluded folder", _("An excluded folder.")),
    (r"ignored by \.gitignore", _("Ignored by .gitignore.")),
    (r"not a regular file", _("Not a regular file.")),
    (r"repository metadata", _("Repository metadata.")),
    (r"lock file", _("A lock file.")),
    (r"generated file", _("A generated file.")),
    (r"binary or media file \((?P<detail>[^)]*)\)", _("A binary or media file")),
    (r"unreadable( folder)?: (?P<detail>.*)", _("It could not be read")),
]
COMPILED = [(re.compile(pattern), words) for pattern, words in REASONS]


@register.filter
def ingest_reason(reason: object) -> SafeString | str:
    """The reason in the reader's language when the ingestion wrote it; anything else as it was written."""
    text = str(reason or "")
    for pattern, words in COMPILED:
        found = pattern.fullmatch(text.strip())
        if found is None:
            continue
        detail = (found.groupdict().get("detail") or "").strip()
        if not detail:
            return str(words)
        return format_html('{} (<span lang="en">{}</span>).', str(words).rstrip("."), detail)
    return text
