"""Domain errors: each subclass is one problem+json shape (RFC 9457), which app/web/problem.py
renders; services raise them and know nothing of responses."""

from __future__ import annotations

from typing import Any

import marshmallow as _ma
from flask import current_app

PROBLEM_BASE = "https://tessera.dev/problems/"
PROBLEM_MIMETYPE = "application/problem+json"


class DomainError(Exception):
    """Base of every error the service raises on purpose; each subclass is one response shape."""

    status: int = 400
    code: str = "bad_request"
    title: str = "Bad request"

    def __init__(
        self,
        detail: str | None = None,
        *,
        errors: dict | None = None,
        headers: dict | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.errors = errors
        self.headers = headers or {}
        self.extra = extra

    def to_problem(self) -> dict:
        body = {
            "type": PROBLEM_BASE + self.code,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "code": self.code,
        }
        if self.errors is not None:
            body["errors"] = self.errors
        body.update(self.extra)
        return body


class BadRequest(DomainError):
    status, code, title = 400, "bad_request", "Bad request"


class Unauthorized(DomainError):
    status, code, title = 401, "unauthorized", "Authentication required"

    def __init__(self, detail: str | None = None, *, scheme: str = "ApiToken", **kwargs: Any) -> None:
        headers = {"WWW-Authenticate": f'{scheme} realm="tessera"'}
        headers.update(kwargs.pop("headers", {}) or {})
        super().__init__(detail, headers=headers, **kwargs)


class Forbidden(DomainError):
    status, code, title = 403, "forbidden", "Not allowed"


class NotFound(DomainError):
    status, code, title = 404, "not_found", "Not found"


class Conflict(DomainError):
    status, code, title = 409, "conflict", "Conflict"


class ValidationFailed(DomainError):
    status, code, title = 422, "validation_failed", "Validation failed"


class ServiceUnavailable(DomainError):
    status, code, title = 503, "service_unavailable", "Service unavailable"

    def __init__(self, detail: str | None = None, **kwargs: Any) -> None:
        retry_after = str(current_app.config.get("RETRY_AFTER_SECONDS", 5))
        headers = {"Retry-After": retry_after}
        headers.update(kwargs.pop("headers", {}) or {})
        super().__init__(detail, headers=headers, **kwargs)


class UnstorableValue(DomainError):
    status, code, title = 400, "invalid_value", "Invalid value"


class ProblemSchema(_ma.Schema):
    """RFC 9457 problem details, as every error response carries them."""

    type = _ma.fields.String(required=True)
    title = _ma.fields.String(required=True)
    status = _ma.fields.Integer(required=True)
    detail = _ma.fields.String()
    code = _ma.fields.String(required=True)
    errors = _ma.fields.Dict(
        keys=_ma.fields.String(),
        values=_ma.fields.List(_ma.fields.String()),
        metadata={"description": "Field name → messages, on validation failures (422)."},
    )

    class Meta:
        unknown = _ma.INCLUDE
