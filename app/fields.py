"""Marshmallow fields every feature's schemas share (no Flask import)."""

from __future__ import annotations

import unicodedata
from typing import Any

import marshmallow as ma

from app.db import isoformat


def has_unstorable_characters(value: str) -> bool:
    """Whether `value` holds control characters (NUL included) or lone surrogates.

    Neither belongs in a name or an address, and PostgreSQL cannot store NUL or lone surrogates.
    """
    return any(unicodedata.category(ch) in {"Cc", "Cs"} for ch in value)


class PlainText(ma.fields.String):
    """A string without control characters or lone surrogates (422 otherwise)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if has_unstorable_characters(text):
            raise ma.ValidationError("Must not contain control characters.")
        return text


class JsonBoolean(ma.fields.Boolean):
    """`true` or `false` as JSON writes them; "false", "no", 0 and the like are refused (422), never read."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class UtcTimestamp(ma.fields.Field):
    """A datetime written as ISO 8601 UTC with `Z` (output only)."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"type": "string", "format": "date-time"}
        metadata.update(kwargs.pop("metadata", {}))
        super().__init__(dump_only=True, metadata=metadata, **kwargs)

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return isoformat(value)
