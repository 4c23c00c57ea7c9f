"""Wire shapes of users: creation and the user with its profile (`app.profile.schemas`)."""

from __future__ import annotations

import marshmallow as ma

from app.fields import UtcTimestamp
from app.profile.schemas import ProfileSchema


class UserCreateIn(ma.Schema):
    profile = ma.fields.Nested(ProfileSchema, required=True)


class UserOut(ma.Schema):
    user_id = ma.fields.Integer(attribute="id", required=True)
    did = ma.fields.String(required=True, metadata={"description": "`did:<method>:<40 hex>`."})
    created_at = UtcTimestamp(required=True)
    profile = ma.fields.Nested(ProfileSchema, required=True)


class UserEnvelope(ma.Schema):
    data = ma.fields.Nested(UserOut, required=True)
