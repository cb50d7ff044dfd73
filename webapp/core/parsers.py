"""Request body parsers of the API (webapp/api and the dashboards' API views)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, answering 400 for JSON nested deeper than Python's decoder recurses
    ("[" x 100000), which it would otherwise raise as a RecursionError (a 500)."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None


# The API's parsers: DRF's defaults with the JSON parser above.
PARSER_CLASSES = [JSONParser, parsers.FormParser, parsers.MultiPartParser]
