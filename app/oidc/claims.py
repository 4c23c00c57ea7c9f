"""Pure mapping from a user profile (spec 2.4) to OpenID claims; no Flask, no database."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

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
