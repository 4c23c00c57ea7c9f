"""Pure mapping from a user profile (spec 2.4) to OpenID claims; no Flask, no database."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import app.json_text as json_text

# Claims the provider sets itself; a client's `id_token_claims` mapping can never override them.
RESERVED_CLAIMS = frozenset(
    {
        "iss",
        "sub",
        "aud",
        "exp",
        "iat",
        "nbf",
        "jti",
        "auth_time",
        "nonce",
        "at_hash",
        "c_hash",
        "azp",
        "acr",
        "amr",
        "sid",
        "user_id",
        "did",
        "client_id",
        "scope",
        "typ",
    }
)

SCOPE_CLAIMS: dict[str, tuple[str, ...]] = {
    "profile": (
        "name",
        "given_name",
        "family_name",
        "middle_name",
        "preferred_username",
        "picture",
        "gender",
        "birthdate",
        "locale",
    ),
    "email": ("email", "email_verified"),
    "phone": ("phone_number", "phone_number_verified"),
    "address": ("address",),
}
# Releases the client's own claims (its `id_token_claims` mapping), listed one by one on the consent page.
APP_CLAIMS_SCOPE = "app_claims"
# Lets the client read the user's verified credentials (`GET /v1/openidc/credentials`).
CREDENTIALS_SCOPE = "credentials"
# offline_access releases no claim: it asks for a refresh token.
SUPPORTED_SCOPES = ("openid", *SCOPE_CLAIMS, APP_CLAIMS_SCOPE, CREDENTIALS_SCOPE, "offline_access")


def _present(value: Any) -> bool:
    return value is not None and value != "" and value != []


def standard_claims(profile: Mapping[str, Any], email_address: str | None) -> dict[str, Any]:
    """Every OpenID standard claim the profile can answer, omitting what it does not hold."""
    names = [profile.get("first_name"), profile.get("middle_name"), profile.get("last_name")]
    claims: dict[str, Any] = {
        "given_name": profile.get("first_name"),
        "family_name": profile.get("last_name"),
        "middle_name": profile.get("middle_name"),
        "name": " ".join(part for part in names if _present(part)) or None,
        "preferred_username": profile.get("user_name"),
        "picture": profile.get("avatar"),
        "gender": profile.get("gender"),
        "birthdate": profile.get("date_of_birth"),
        "locale": profile.get("language_primary"),
    }
    if _present(email_address):
        claims["email"] = email_address
        # Every token comes from a login that proved control of this address with a mailed code.
        claims["email_verified"] = True
    code, number = profile.get("mobile_country_code"), profile.get("mobile_number")
    if _present(code) and _present(number):
        claims["phone_number"] = f"{code}{number}"
        claims["phone_number_verified"] = False
    address = {
        "country": profile.get("residence_country"),
        "region": profile.get("residence_province"),
        "locality": profile.get("residence_city"),
    }
    address = {key: value for key, value in address.items() if _present(value)}
    if address:
        claims["address"] = address
    return {name: value for name, value in claims.items() if _present(value)}


def claims_for_scopes(scopes: Iterable[str], standard: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of `standard` claims that the granted scopes release."""
    allowed = {claim for scope in scopes for claim in SCOPE_CLAIMS.get(scope, ())}
    return {name: value for name, value in standard.items() if name in allowed}


def application_claims(mapping: Mapping[str, str], profile: Mapping[str, Any], email_address: str | None) -> dict:
    """A client's own claims (`{"edu_username": "user_name"}`) read from the profile; absent fields omitted."""
    values = dict(profile)
    if email_address:
        values.setdefault("email_address", email_address)
    return {
        claim: values[field]
        for claim, field in (mapping or {}).items()
        if claim not in RESERVED_CLAIMS and _present(values.get(field))
    }


def mapping_fingerprint(mapping: Mapping[str, str] | None) -> str:
    """A stable digest of a client's claim mapping: consent given to one mapping does not cover another."""
    canonical = json.dumps(dict(mapping or {}), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def parse_scope(raw: str | None) -> list[str]:
    """Scopes of a request in order, without duplicates or unknown values."""
    seen: list[str] = []
    for scope in (raw or "").split():
        if scope in SUPPORTED_SCOPES and scope not in seen:
            seen.append(scope)
    return seen


# The `claims` request parameter (OpenID Connect Core 5.5): standard claims asked for one by one.
CLAIM_ITEM_PREFIX = "claim:"
STANDARD_CLAIMS = tuple(dict.fromkeys(name for names in SCOPE_CLAIMS.values() for name in names))
CLAIMS_TARGETS = ("id_token", "userinfo")


class ClaimsRequestInvalid(ValueError):
    """The `claims` parameter is not a JSON object of the shape OpenID Connect Core 5.5 says."""


@dataclass(frozen=True)
class RequestedClaims:
    """The standard claims a `claims` parameter asks for in the id_token and at userinfo, in order;
    `essential` names those the client says it needs. Other names (`acr` aside) are ignored.

    `subjects`: the `sub` values it names (`{"id_token": {"sub": {"value": ...}}}`, or at
    userinfo; both: the values in both), None when it names none. OpenID Connect Core 5.5.1: the
    provider answers positively only for the user those name, signed in or authenticated by the
    request, never for another (`admits`).
    """

    id_token: tuple[str, ...] = ()
    userinfo: tuple[str, ...] = ()
    essential: frozenset[str] = frozenset()
    subjects: frozenset[str] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.id_token, *self.userinfo)))

    def admits(self, subject: str) -> bool:
        """Whether the user whose `sub` (for the client) is `subject` may be the one signed in."""
        return self.subjects is None or subject in self.subjects

    def to_json(self) -> str | None:
        """The stored form (None when nothing is asked for)."""
        if not self.names and self.subjects is None:
            return None
        document: dict[str, Any] = {
            "id_token": list(self.id_token),
            "userinfo": list(self.userinfo),
            "essential": sorted(self.essential),
        }
        if self.subjects is not None:
            document["sub"] = sorted(self.subjects)
        return json.dumps(document, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> RequestedClaims:
        """The stored form read back (`to_json`); nothing asked for when None."""
        if not text:
            return cls()
        document = json.loads(text)
        subjects = frozenset(document["sub"]) if "sub" in document else None
        return cls(tuple(document["id_token"]), tuple(document["userinfo"]), frozenset(document["essential"]), subjects)


def parse_claims_request(text: str) -> RequestedClaims:
    """The standard claims a `claims` parameter asks for; `ClaimsRequestInvalid` when malformed.

    Each member is null or an object with `essential` (boolean), `value` or `values` (an array).
    """
    try:
        document = json_text.loads(text, "claims")
    except ValueError:
        raise ClaimsRequestInvalid("claims is not a JSON object.") from None
    if not isinstance(document, dict):
        raise ClaimsRequestInvalid("claims is not a JSON object.")
    asked: dict[str, tuple[str, ...]] = {}
    essential: set[str] = set()
    subjects: frozenset[str] | None = None
    for target in CLAIMS_TARGETS:
        members = document.get(target) or {}
        if not isinstance(members, dict):
            raise ClaimsRequestInvalid(f"claims.{target} must be an object.")
        for name, spec in members.items():
            if spec is not None and not isinstance(spec, dict):
                raise ClaimsRequestInvalid(f"claims.{target}.{name[:64]} must be an object or null.")
            spec = spec or {}
            if not isinstance(spec.get("essential", False), bool) or not isinstance(spec.get("values", []), list):
                raise ClaimsRequestInvalid(f"claims.{target}.{name[:64]}: essential is a boolean, values an array.")
            if spec.get("essential") and name in STANDARD_CLAIMS:
                essential.add(name)
            if name == "sub" and ("value" in spec or "values" in spec):
                named = _subject_values(target, spec)
                subjects = named if subjects is None else subjects & named
        asked[target] = tuple(name for name in members if name in STANDARD_CLAIMS)
    return RequestedClaims(asked["id_token"], asked["userinfo"], frozenset(essential), subjects)


_MAX_SUBJECT_VALUES = 10
_MAX_SUBJECT_LENGTH = 255


def _subject_values(target: str, spec: Mapping[str, Any]) -> frozenset[str]:
    """The `sub` values of one target's request (`value`, and `values` too when both are sent)."""
    values = ([spec["value"]] if "value" in spec else []) + list(spec.get("values", []))
    if (
        not values
        or len(values) > _MAX_SUBJECT_VALUES
        or not all(isinstance(value, str) and 0 < len(value) <= _MAX_SUBJECT_LENGTH for value in values)
    ):
        raise ClaimsRequestInvalid(
            f"claims.{target}.sub: value is a string, values an array of 1 to {_MAX_SUBJECT_VALUES} strings."
        )
    return frozenset(values)


def claim_items(requested: RequestedClaims, scopes: Iterable[str]) -> tuple[str, ...]:
    """The consent items of the claims asked for one by one that the scopes do not already release."""
    released = {claim for scope in scopes for claim in SCOPE_CLAIMS.get(scope, ())}
    return tuple(CLAIM_ITEM_PREFIX + name for name in requested.names if name not in released)


def selected_claims(standard: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The claims `names` of `standard`, omitting those the profile does not hold."""
    return {name: standard[name] for name in names if name in standard}
