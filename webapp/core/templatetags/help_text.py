"""Help texts are written with `backticks` around commands and names (as in the API's
schema); on pages those become <code>, the rest stays escaped text."""

from __future__ import annotations

import re

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_CODE = re.compile(r"`([^`]+)`")


@register.filter
def inline_code(text: str) -> SafeString:
    """Run `celery` -> Run <code>celery</code>; the text is escaped before the tags go in."""
    escaped = str(conditional_escape(text))
    return mark_safe(_CODE.sub(r"<code>\1</code>", escaped))
