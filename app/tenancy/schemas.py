"""Wire shapes of sub-clients (spec 2.2, 4.6-4.9), API tokens and client secrets."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import marshmallow as ma
from flask import current_app

from app.cache import Cache
from app.db import utcnow
from app.dialect import ROW_VERSION_TTL
from app.pagination import PageMeta
from app.profile.schemas import PROFILE_FIELDS
from app.serialization import PlannedSchema
from app.tenancy import service, validation
from app.tenancy.fields import AccentColor, DnsLabel, HostName, LogoUrl, PlainText, RedirectUri, UtcTimestamp
from app.tenancy.models import GRANT_TYPES, allowed_grant_types
from app.tenancy.service import SIGNING_ALGORITHMS

MAX_REDIRECT_URIS = 20
MAX_ID_TOKEN_CLAIMS = 20


def _unique_uris(uris: list[str]) -> None:
    if len(set(uris)) != len(uris):
        raise ma.ValidationError("Redirect URIs must be unique.")


def _valid_claim_names(claims: dict[str, str]) -> None:
    problems = [problem for name in claims if (problem := validation.claim_name_problem(name))]
    if problems:
        raise ma.ValidationError(problems)


def _text(max_length: int, description: str, **kwargs: Any) -> PlainText:
    return PlainText(
        validate=ma.validate.Length(min=1, max=max_length), metadata={"description": description}, **kwargs
    )


_SCOPE_TOKEN = r"^[\x21\x23-\x5B\x5D-\x7E]{1,64}$"
MAX_CLIENT_CREDENTIALS_SCOPES = 20
MAX_CLIENT_JWKS = 10
TOKEN_ENDPOINT_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "client_secret_jwt", "private_key_jwt")
_DAY = 24 * 3600


def _public_jwks(document: dict) -> None:
    keys = document.get("keys")
    if not isinstance(keys, list) or not keys or len(keys) > MAX_CLIENT_JWKS:
        raise ma.ValidationError(f'A JWK set: {{"keys": [...]}} with 1 to {MAX_CLIENT_JWKS} keys.')
    for key in keys:
        if not isinstance(key, dict) or key.get("kty") not in ("RSA", "EC", "OKP") or not key.get("kid"):
            raise ma.ValidationError("Each key must be an RSA, EC or OKP JWK with a kid.")
        if any(member in key for member in ("d", "p", "q", "dp", "dq", "qi")):
            raise ma.ValidationError("Register public keys only: a private key member was sent.")


class OpenIdClientFields(ma.Schema):
    """OpenID settings of a client: refresh tokens, client_credentials, authentication, PAR, logout."""

    token_endpoint_auth_method = ma.fields.String(
        validate=ma.validate.OneOf(TOKEN_ENDPOINT_AUTH_METHODS),
        allow_none=True,
        metadata={
            "description": "The one method the client authenticates with at the token, PAR, revocation "
            "and introspection endpoints; when null, client_secret_basic or client_secret_post."
        },
    )
    jwks = ma.fields.Dict(
        validate=_public_jwks,
        allow_none=True,
        metadata={
            "description": "Public JWK set (RSA, EC or OKP keys with kid) verifying private_key_jwt assertions "
            "and request objects."
        },
    )
    # Where the client publishes its JWK set (used when jwks is null), fetched through the outbound guard.
    jwks_uri = RedirectUri(allow_none=True)
    client_credentials_scopes = ma.fields.List(
        ma.fields.String(validate=ma.validate.Regexp(_SCOPE_TOKEN, error="Not an RFC 6749 scope token.")),
        validate=ma.validate.Length(max=MAX_CLIENT_CREDENTIALS_SCOPES),
        allow_none=True,
        metadata={"description": "Scopes the client may be granted with client_credentials (its own tokens)."},
    )
    grant_types = ma.fields.List(
        ma.fields.String(validate=ma.validate.OneOf(GRANT_TYPES)),
        allow_none=True,
        metadata={
            "description": "Grants the client may use at the token endpoint. authorization_code and "
            "refresh_token are always enabled; any other (client_credentials, "
            "urn:ietf:params:oauth:grant-type:device_code) only when listed here."
        },
    )
    require_pkce = ma.fields.Boolean(
        allow_none=True,
        metadata={"description": "Refuse authorization requests without a PKCE code_challenge."},
    )
    reads_credentials = ma.fields.Boolean(
        allow_none=True,
        metadata={
            "description": "Whether the client reads its users' credentials (GET /v1/openidc/credentials) "
            "once they consent; true by default. Its claim mapping and this are what the consent page lists."
        },
    )
    issue_refresh_tokens = ma.fields.Boolean(
        allow_none=True,
        metadata={"description": "Issue a refresh token with every code exchange, not only with offline_access."},
    )
    refresh_token_ttl = ma.fields.Integer(
        validate=ma.validate.Range(min=60, max=365 * _DAY),
        allow_none=True,
        metadata={"description": "Absolute refresh-token lifetime in seconds; null for the deployment default."},
    )
    refresh_token_idle_ttl = ma.fields.Integer(
        validate=ma.validate.Range(min=60, max=365 * _DAY),
        allow_none=True,
        metadata={"description": "Idle refresh-token lifetime in seconds; null for the deployment default."},
    )
    require_pushed_authorization_requests = ma.fields.Boolean(
        allow_none=True,
        metadata={"description": "Accept authorization requests only by a PAR request_uri."},
    )
    require_signed_request_object = ma.fields.Boolean(
        allow_none=True,
        metadata={"description": "Accept authorization requests only as a signed request object (RFC 9101)."},
    )
    # Receives OpenID back-channel logout tokens when a user's session ends.
    backchannel_logout_uri = RedirectUri(allow_none=True)
    access_token_signed_response_alg = ma.fields.String(
        validate=ma.validate.OneOf(SIGNING_ALGORITHMS),
        allow_none=True,
        metadata={"description": "JWS algorithm of this client's access tokens; when null, that of its id_tokens."},
    )


_OMITTED_UNSET = "Omitted while not set (never `null`)."
_OPENID_OPTIONAL = (
    "token_endpoint_auth_method",
    "jwks",
    "jwks_uri",
    "refresh_token_ttl",
    "refresh_token_idle_ttl",
    "backchannel_logout_uri",
    "access_token_signed_response_alg",
)


class OpenIdClientOut(PlannedSchema):
    token_endpoint_auth_method = ma.fields.String(metadata={"description": _OMITTED_UNSET})
    jwks = ma.fields.Dict(metadata={"description": _OMITTED_UNSET})
    jwks_uri = ma.fields.String(metadata={"description": _OMITTED_UNSET})
    client_credentials_scopes = ma.fields.List(ma.fields.String(), required=True)
    grant_types = ma.fields.Function(
        lambda client: allowed_grant_types(client.grant_types),
        required=True,
        metadata={
            "type": "array",
            "items": {"type": "string"},
            "description": "Grants the client may use: authorization_code, refresh_token and those enabled.",
        },
    )
    require_pkce = ma.fields.Boolean(required=True)
    reads_credentials = ma.fields.Boolean(required=True)
    issue_refresh_tokens = ma.fields.Boolean(required=True)
    refresh_token_ttl = ma.fields.Integer(metadata={"description": _OMITTED_UNSET})
    refresh_token_idle_ttl = ma.fields.Integer(metadata={"description": _OMITTED_UNSET})
    require_pushed_authorization_requests = ma.fields.Boolean(required=True)
    require_signed_request_object = ma.fields.Boolean(required=True)
    backchannel_logout_uri = ma.fields.String(metadata={"description": _OMITTED_UNSET})
    access_token_signed_response_alg = ma.fields.String(metadata={"description": _OMITTED_UNSET})

    @ma.post_dump
    def _omit_unset(self, data: dict, **_kwargs: Any) -> dict:
        for name in _OPENID_OPTIONAL:
            if data.get(name) is None:
                data.pop(name, None)
        return data


class SubClientFields(OpenIdClientFields):
    """Members shared by create and update; `null` clears an optional member."""

    name = _text(70, "Display name, 1 to 70 characters.")
    address_1 = _text(100, "Address line 1, 1 to 100 characters.", allow_none=True)
    address_2 = _text(100, "Address line 2, 1 to 100 characters.", allow_none=True)
    country = _text(255, "Country, at least 1 character.", allow_none=True)
    province = _text(255, "Province or state, at least 1 character.", allow_none=True)
    city = _text(255, "City, at least 1 character.", allow_none=True)
    timezone = ma.fields.String(
        validate=ma.validate.OneOf(
            validation.time_zones(), error="Must be an IANA time zone name such as Europe/Paris."
        ),
        allow_none=True,
        metadata={"description": "IANA time zone name; `UTC` when not given or null."},
    )
    domain = HostName(allow_none=True, metadata={"description": "DNS host name the client sends e-mail from."})
    subdomain = DnsLabel(
        allow_none=True,
        metadata={"description": "One DNS label; the pair (subdomain, domain) is unique across the service."},
    )
    redirect_uris = ma.fields.List(
        RedirectUri(),
        validate=[ma.validate.Length(max=MAX_REDIRECT_URIS), _unique_uris],
        metadata={"description": f"OpenID redirect URIs (at most {MAX_REDIRECT_URIS}), matched exactly."},
    )
    signing_alg = ma.fields.String(
        validate=ma.validate.OneOf(SIGNING_ALGORITHMS),
        allow_none=True,
        metadata={
            "description": "JWS algorithm of this client's id_tokens, and of its access tokens unless "
            "access_token_signed_response_alg is set; `RS256` when null."
        },
    )
    id_token_claims = ma.fields.Dict(
        keys=ma.fields.String(metadata={"pattern": validation.CLAIM_NAME_PATTERN}),
        values=ma.fields.String(validate=ma.validate.OneOf(PROFILE_FIELDS)),
        validate=[ma.validate.Length(max=MAX_ID_TOKEN_CLAIMS), _valid_claim_names],
        metadata={
            "description": "Extra id_token claims: claim name → user profile field, "
            'e.g. {"edu_username": "user_name"}.',
        },
    )

    logo_url = LogoUrl(
        allow_none=True, metadata={"description": "https URL of the logo shown on this client's sign-in pages."}
    )
    accent_color = AccentColor(
        allow_none=True, metadata={"description": "Accent colour `#rrggbb` of this client's sign-in pages."}
    )


class SubClientCreateIn(SubClientFields):
    name = _text(70, "Display name, 1 to 70 characters.", required=True)


class SubClientUpdateIn(SubClientFields):
    """A partial update: members sent are changed, members left out keep their value."""

    @ma.validates_schema
    def _not_empty(self, data: dict, **_kwargs: Any) -> None:
        if not data:
            raise ma.ValidationError("Send at least one member to change.", "_schema")


_UNSET_EMPTY = "An empty string while not set (never `null`)."
_UNSET_STRINGS = (
    "address_1", "address_2", "country", "province", "city", "domain", "subdomain", "logo_url", "accent_color",
)  # fmt: skip


def _optional_text() -> ma.fields.String:
    return ma.fields.String(required=True, metadata={"description": _UNSET_EMPTY})


class SubClientOut(OpenIdClientOut):
    """A sub-client (spec 2.2): every member present; optional text never set (or cleared) is `""`."""

    # A `Client` or a row of its columns (service.read_sub_client): both by attribute, never by key.
    by_attribute = True

    client_id = ma.fields.Integer(attribute="id", required=True)
    parent_client_id = ma.fields.Integer(
        attribute="parent_id", metadata={"description": "The parent client; omitted for a master client."}
    )
    name = ma.fields.String(required=True)
    address_1 = _optional_text()
    address_2 = _optional_text()
    country = _optional_text()
    province = _optional_text()
    city = _optional_text()
    timezone = ma.fields.String(required=True)
    domain = _optional_text()
    subdomain = _optional_text()
    from_email_address = ma.fields.Function(
        service.from_email_address,
        required=True,
        metadata={
            "type": "string",
            "format": "email",
            "description": "`no-reply@<subdomain>.<domain>` when both are set, else the deployment's default sender.",
        },
    )
    esp_token = ma.fields.String(
        required=True, metadata={"description": "Public identifier of the e-mail sender profile (not a secret)."}
    )
    recaptcha_key = ma.fields.String(
        required=True, metadata={"description": "Public reCAPTCHA v3 site key; empty until configured."}
    )
    recaptcha_threshold = ma.fields.Float(
        required=True, metadata={"minimum": 0.0, "maximum": 1.0, "description": "Minimum score to log in."}
    )
    recaptcha_enabled = ma.fields.Boolean(required=True)
    created_at = UtcTimestamp(required=True)
    privacy_link = ma.fields.Function(
        service.privacy_link,
        required=True,
        metadata={
            "type": "string",
            "format": "uri",
            "description": "Default `<base_url>/privacy/<client_id>-<tag>` "
            "(the tag is keyed, so pages cannot be listed by walking ids).",
        },
    )
    redirect_uris = ma.fields.List(ma.fields.String(), required=True)
    id_token_claims = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.String(), required=True)
    signing_alg = ma.fields.String(required=True, validate=ma.validate.OneOf(SIGNING_ALGORITHMS))
    logo_url = _optional_text()
    accent_color = _optional_text()

    @ma.post_dump
    def _no_nulls(self, data: dict, **_kwargs: Any) -> dict:
        for name in _UNSET_STRINGS:
            if data.get(name) is None:
                data[name] = ""
        if data.get("parent_client_id") is None:
            data.pop("parent_client_id", None)
        return data


class SubClientEnvelope(ma.Schema):
    data = ma.fields.Nested(SubClientOut, required=True)


# The dumps of sub-clients listed, per tenant and sub-client, valid for the row version and settings built from.
_LISTED_SUB_CLIENTS: Cache[dict] = Cache("listed_sub_clients", maxsize=4096, ttl=ROW_VERSION_TTL)


class ListedSubClients(ma.fields.Nested):
    """The `SubClientOut` dumps of a page's `service.SubClientRow`s, each built once per version of
    its row and of the settings the answer reads (`service.answer_settings`); a dump kept is shared,
    never changed."""

    def _serialize(self, nested_obj: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        if nested_obj is None:
            return None
        settings = service.answer_settings()
        sort_keys = getattr(current_app.json, "sort_keys", False)
        dumps = []
        for row in nested_obj:
            version = (row.version, settings)
            dump = _LISTED_SUB_CLIENTS.peek(row.key, version)
            if dump is None:
                dump = self.schema.dump(row, many=False)
                if sort_keys:  # kept in the order the JSON provider writes: its sort then finds them in order
                    dump = dict(sorted(dump.items()))
                _LISTED_SUB_CLIENTS.put(row.key, dump, version)
            dumps.append(dump)
        return dumps


class SubClientPage(PageMeta):
    data = ListedSubClients(SubClientOut, many=True, required=True)


def _in_future(value: Any) -> None:
    try:
        # The time is stored and shown in UTC, where it must still be a representable datetime.
        in_utc = value.astimezone(UTC)
    except OverflowError:
        raise ma.ValidationError("Must be before the year 10000 in UTC.") from None
    if in_utc <= utcnow():
        raise ma.ValidationError("Must be in the future.")


class ApiTokenIn(ma.Schema):
    name = PlainText(
        load_default="", validate=ma.validate.Length(max=100), metadata={"description": "A label for your records."}
    )
    expires_at = ma.fields.AwareDateTime(
        load_default=None,
        allow_none=True,
        validate=_in_future,
        metadata={"description": "ISO 8601 time with offset; the token stops working then. Default: never."},
    )


class ApiTokenOut(ma.Schema):
    id = ma.fields.Integer(required=True)
    client_id = ma.fields.Integer(required=True)
    name = ma.fields.String(required=True)
    prefix = ma.fields.String(required=True, metadata={"description": "First characters, to recognise a token."})
    created_at = UtcTimestamp(required=True)
    expires_at = UtcTimestamp(allow_none=True)
    revoked_at = UtcTimestamp(allow_none=True)
    last_used_at = UtcTimestamp(allow_none=True)


class IssuedApiTokenOut(ApiTokenOut):
    token = ma.fields.String(required=True, metadata={"description": "The x-api-token value; shown only once."})


class IssuedApiTokenEnvelope(ma.Schema):
    data = ma.fields.Nested(IssuedApiTokenOut, required=True)


class ApiTokenPage(PageMeta):
    data = ma.fields.List(ma.fields.Nested(ApiTokenOut), required=True)


class ClientSecretOut(ma.Schema):
    client_id = ma.fields.Integer(required=True)
    client_secret = ma.fields.String(required=True, metadata={"description": "Shown only once."})
    previous_secret_expires_at = UtcTimestamp(
        allow_none=True, metadata={"description": "Until then the previous secret is still accepted."}
    )


class ClientSecretEnvelope(ma.Schema):
    data = ma.fields.Nested(ClientSecretOut, required=True)
