"""The problem+json body (RFC 9457) every error response carries: its media type and schema."""

from __future__ import annotations

import marshmallow as _ma

PROBLEM_MIMETYPE = "application/problem+json"


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
