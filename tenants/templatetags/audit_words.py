"""An audit-log row's detail in the reader's language. It is recorded once, in English, as the log's own words ("scope
write, acts for tenant, expires 2027-01-31"); the parts it names (a scope, a principal, a date, a key's prefix) stay
as they are, in code."""

from __future__ import annotations

import re

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

register = template.Library()

KEY = re.compile(
    r"scope (?P<scope>\w+), acts for (?P<who>.+?)(?:, expires (?P<until>[\d-]+))?(?:; by API key (?P<by>\S+))?"
)
EXPIRES = re.compile(r"expires (?P<until>[\d-]+ [\d:]+) UTC")


@register.filter
def audit_detail(detail: object) -> SafeString | str:
    """A key's or an invitation's detail in words; anything else as recorded."""
    text = str(detail or "").strip()
    found = KEY.fullmatch(text)
    if found is not None:
        who = format_html_join(", ", "<code>{}</code>", ((name,) for name in found["who"].split(", ")))
        shown = format_html(
            _("scope {scope}, acts for {who}"), scope=format_html("<code>{}</code>", found["scope"]), who=who
        )
        if found["until"]:
            shown = format_html("{}, {}", shown, format_html(_("expires {day}"), day=found["until"]))
        if found["by"]:
            shown = format_html("{}; {}", shown, format_html(_("by API key {prefix}"), prefix=found["by"]))
        return shown
    found = EXPIRES.fullmatch(text)
    if found is not None:
        return format_html(_("expires {at} UTC"), at=found["until"])
    return text
