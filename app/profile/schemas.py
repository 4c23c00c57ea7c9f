"""The user profile of spec 2.4 with the formats of design section 5 (no Flask import).

Used by users (what is stored) and tenancy (the profile fields a client may map to id_token claims).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any

import marshmallow as ma

from app.fields import PlainText
from app.profile import formats

_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_CALLING_CODE = re.compile(r"^\+[0-9]{1,3}$")


def _calling_code(value: str) -> None:
    # fullmatch: `$` alone also matches before a trailing newline.
    if not _CALLING_CODE.fullmatch(value):
        raise ma.ValidationError("Must be + followed by 1 to 3 digits.")


MAX_MOBILE_NUMBER = 10**15 - 1  # E.164 numbers have at most 15 digits.


class LanguageTag(ma.fields.String):
    """A BCP 47 language tag, checked offline and returned in canonical case."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"description": "BCP 47 language tag (RFC 5646), e.g. `en-US`.", "maxLength": 64}
        metadata.update(kwargs.pop("metadata", {}))
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        canonical = formats.canonical_language_tag(text)
        if canonical is None:
            raise ma.ValidationError("Not a valid BCP 47 language tag.")
        return canonical


class CountryCode(ma.fields.String):
    """An ISO 3166-1 alpha-2 country code, upper case exactly as the standard writes it."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"description": "ISO 3166-1 alpha-2 country code, upper case.", "enum": formats.country_codes()}
        metadata.update(kwargs.pop("metadata", {}))
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if not formats.is_country_code(text):
            raise ma.ValidationError("Must be an ISO 3166-1 alpha-2 country code in upper case, e.g. GB.")
        return text


class PastDate(ma.fields.String):
    """A calendar date `YYYY-MM-DD` strictly before today (UTC); kept as the string sent."""

    def __init__(self, **kwargs: Any) -> None:
        metadata = {"format": "date", "description": "`YYYY-MM-DD`, in the past.", "pattern": _DATE.pattern}
        metadata.update(kwargs.pop("metadata", {}))
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if not _DATE.match(text):
            raise ma.ValidationError("Must be a date in the form YYYY-MM-DD.")
        try:
            parsed = date.fromisoformat(text)
        except ValueError as exc:
            raise ma.ValidationError("Not a valid calendar date.") from exc
        from app.db import utcnow

        if parsed >= utcnow().date():
            raise ma.ValidationError("Must be in the past.")
        return text


def _name(description: str, max_length: int = 100) -> PlainText:
    return PlainText(validate=ma.validate.Length(min=1, max=max_length), metadata={"description": description})


class ProfileSchema(ma.Schema):
    """A user profile (spec 2.4). Only `email_address` is required; unknown members are refused."""

    email_address = ma.fields.Email(
        required=True,
        validate=ma.validate.Length(max=254),
        metadata={"description": "Unique within the client tree; stored lower case."},
    )
    first_name = _name("Given name.")
    last_name = _name("Family name.")
    middle_name = _name("Middle name(s).")
    user_name = _name("Application user name.", 64)
    mobile_number = ma.fields.Integer(
        strict=True,
        validate=ma.validate.Range(min=1, max=MAX_MOBILE_NUMBER),
        metadata={"description": "Subscriber number without the country code; a positive integer."},
    )
    mobile_country_code = ma.fields.String(
        validate=_calling_code,
        metadata={"pattern": _CALLING_CODE.pattern, "description": "International calling code, e.g. `+44`."},
    )
    avatar = ma.fields.URL(
        schemes={"http", "https"},
        validate=ma.validate.Length(max=2048),
        metadata={"description": "Absolute http(s) URL of the avatar image."},
    )
    language_primary = LanguageTag()
    language_others = ma.fields.List(
        LanguageTag(), validate=ma.validate.Length(max=20), metadata={"description": "Up to 20 BCP 47 tags."}
    )
    residence_country = CountryCode()
    residence_province = _name("Province, state or region of residence.")
    residence_city = _name("City of residence.")
    gender = ma.fields.String(validate=ma.validate.OneOf(formats.GENDERS))
    date_of_birth = PastDate()
    employment_status = ma.fields.String(validate=ma.validate.OneOf(formats.EMPLOYMENT_STATUSES))
    employment_industry = ma.fields.Integer(
        strict=True,
        validate=ma.validate.Range(min=1, max=999_999),
        metadata={"description": "Industry classification code (e.g. NAICS), a positive integer."},
    )
    marital_status = ma.fields.String(validate=ma.validate.OneOf(formats.MARITAL_STATUSES))
    education = ma.fields.String(validate=ma.validate.OneOf(formats.EDUCATION_LEVELS))
    household_income = ma.fields.String(
        validate=ma.validate.OneOf(formats.HOUSEHOLD_INCOMES),
        metadata={"description": "Yearly household income band; `200000-` has no upper end."},
    )

    @ma.post_load
    def _normalise_email(self, data: dict, **_kwargs: Any) -> dict:
        data["email_address"] = data["email_address"].strip().lower()
        return data


PROFILE_FIELDS: tuple[str, ...] = tuple(ProfileSchema._declared_fields)
