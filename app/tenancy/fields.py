"""Marshmallow fields of the tenancy schemas (no Flask import); the generic ones live in `app.fields`."""

from __future__ import annotations

from typing import Any

import marshmallow as ma

from app.fields import PlainText as PlainText
from app.fields import UtcTimestamp as UtcTimestamp
from app.tenancy import validation


class HostName(ma.fields.String):
    """A DNS host name (at least two labels), stored lower case in A-label form."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"format": "hostname", "maxLength": 253, "example": "example.org"}
        metadata.update(kwargs.pop("metadata", {}))
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        canonical = validation.canonical_host_name(super()._deserialize(value, attr, data, **kwargs))
        if canonical is None:
            raise ma.ValidationError("Must be a DNS host name such as example.org.")
        return canonical


class DnsLabel(ma.fields.String):
    """One DNS label, stored lower case."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"pattern": "^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$", "minLength": 1, "maxLength": 63}
        metadata.update(kwargs.pop("metadata", {}))
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        canonical = validation.canonical_dns_label(super()._deserialize(value, attr, data, **kwargs))
        if canonical is None:
            raise ma.ValidationError("Must be one DNS label: 1 to 63 letters, digits or inner hyphens.")
        return canonical


class RedirectUri(ma.fields.String):
    def __init__(self, **kwargs: Any) -> None:
        metadata = {
            "format": "uri",
            "maxLength": validation.MAX_REDIRECT_URI_LENGTH,
            "description": "Absolute https URI, or http to a loopback address; no fragment.",
        }
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        uri = super()._deserialize(value, attr, data, **kwargs)
        problem = validation.redirect_uri_problem(uri)
        if problem:
            raise ma.ValidationError(problem)
        return uri


class LogoUrl(ma.fields.String):
    """The https URL of a client's logo, shown on its hosted pages."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"format": "uri", "maxLength": validation.MAX_LOGO_URL_LENGTH}
        metadata.update(kwargs.pop("metadata", {}))
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        url = super()._deserialize(value, attr, data, **kwargs)
        problem = validation.logo_url_problem(url)
        if problem:
            raise ma.ValidationError(problem)
        return url


class AccentColor(ma.fields.String):
    """A `#rrggbb` colour, stored lower case."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"pattern": "^#[0-9a-fA-F]{6}$", "example": "#0b5fff"}
        metadata.update(kwargs.pop("metadata", {}))
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        color = super()._deserialize(value, attr, data, **kwargs)
        problem = validation.accent_color_problem(color)
        if problem:
            raise ma.ValidationError(problem)
        return color.lower()
