"""Wire shapes of jobs."""

from __future__ import annotations

import marshmallow as ma

from app.db import isoformat


class JobOut(ma.Schema):
    id = ma.fields.String(required=True)
    kind = ma.fields.String(required=True)
    state = ma.fields.String(required=True, validate=ma.validate.OneOf(["queued", "running", "succeeded", "failed"]))
    result = ma.fields.Dict(allow_none=True)
    error = ma.fields.Dict(allow_none=True)
    created_at = ma.fields.Function(lambda job: isoformat(job.created_at), required=True)
    started_at = ma.fields.Function(lambda job: isoformat(job.started_at), allow_none=True)
    finished_at = ma.fields.Function(lambda job: isoformat(job.finished_at), allow_none=True)


class JobEnvelope(ma.Schema):
    data = ma.fields.Nested(JobOut, required=True)


class CanaryIn(ma.Schema):
    delay_ms = ma.fields.Integer(
        load_default=0,
        validate=ma.validate.Range(min=0, max=10_000),
        metadata={"description": "Milliseconds the job waits before writing its effect."},
    )
