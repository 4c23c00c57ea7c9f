"""Client metadata of a registration (RFC 7591 §2, OpenID Connect Registration 1.0 §2), checked; pure.

`parse_metadata` turns a request body into `ClientMetadata` or raises `InvalidClientMetadata` /
`InvalidRedirectUri`. Metadata Tessera does not use is ignored (and not answered back). No Flask,
no database: the `jwks_uri` is fetched by the service.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.fields import has_unstorable_characters
from app.registration.errors import InvalidClientMetadata, InvalidRedirectUri
from app.tenancy.models import GRANT_TYPES, SUBJECT_PAIRWISE, SUBJECT_PUBLIC
from app.tenancy.validation import is_loopback_host, logo_url_problem, redirect_uri_problem

APPLICATION_TYPES = ("web", "native")
RESPONSE_TYPES = ("code",)
DEFAULT_AUTH_METHOD = "client_secret_basic"
DEFAULT_NAME = "Registered application"
MAX_REDIRECT_URIS = 20
MAX_NAME = 70
MAX_JWKS_KEYS = 10
_KEY_TYPES = ("RSA", "EC", "OKP")
# RFC 6749 §3.3 scope tokens, as the sub-client resource takes them.
SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]{1,64}")
MAX_SCOPES = 20
_PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "k")


@dataclass(frozen=True)
class ClientMetadata:
    """What a registration asks for, checked, with the defaults of the specifications filled in."""

    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    response_types: tuple[str, ...]
    application_type: str
    client_name: str
    token_endpoint_auth_method: str
    jwks: dict | None
    jwks_uri: str | None
    id_token_signed_response_alg: str
    logo_uri: str | None
    require_signed_request_object: bool
    require_pushed_authorization_requests: bool
    # The scopes a client_credentials client may be granted (RFC 7591 `scope`).
    scopes: tuple[str, ...] = ()
    # OpenID Connect Registration §2: `public` or `pairwise`; the sector is checked by `subjects`.
    subject_type: str = SUBJECT_PUBLIC
    sector_identifier_uri: str | None = None
    userinfo_signed_response_alg: str | None = None
    authorization_signed_response_alg: str | None = None
    dpop_bound_access_tokens: bool = False

    def operator_fields(self) -> dict[str, Any]:
        """The members `configure_client` alone sets (the sub-client resource does not carry them)."""
        return {
            "dpop_bound_access_tokens": self.dpop_bound_access_tokens,
            "userinfo_signed_response_alg": self.userinfo_signed_response_alg,
            "authorization_signed_response_alg": self.authorization_signed_response_alg,
        }

    def client_fields(self) -> dict[str, Any]:
        """The members of the sub-client this registration is (as `SubClientCreateIn` names them)."""
        return {
            "name": self.client_name,
            "redirect_uris": list(self.redirect_uris),
            "grant_types": list(self.grant_types),
            "token_endpoint_auth_method": self.token_endpoint_auth_method,
            "jwks": self.jwks,
            "jwks_uri": self.jwks_uri,
            "signing_alg": self.id_token_signed_response_alg,
            "logo_url": self.logo_uri,
            "require_signed_request_object": self.require_signed_request_object,
            "require_pushed_authorization_requests": self.require_pushed_authorization_requests,
            "client_credentials_scopes": list(self.scopes),
        }


def _strings(body: Mapping[str, Any], name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidClientMetadata(f"{name} must be an array of strings.")
    return tuple(dict.fromkeys(value))


def _string(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidClientMetadata(f"{name} must be a string.")
    return value


def _boolean(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidClientMetadata(f"{name} must be true or false.")
    return value


def _redirect_uris(uris: tuple[str, ...], application_type: str) -> tuple[str, ...]:
    """OpenID Connect Registration §2: web clients use https (never localhost); native clients may
    also use http to a loopback address. No fragment, no user information."""
    if len(uris) > MAX_REDIRECT_URIS:
        raise InvalidRedirectUri(f"At most {MAX_REDIRECT_URIS} redirect_uris.")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem is None and application_type == "web":
            host = urlsplit(uri).hostname or ""
            if is_loopback_host(host):
                problem = "A web client cannot redirect to localhost; register it as application_type native."
        if problem is not None:
            raise InvalidRedirectUri(f"{uri[:200]}: {problem}")
    return uris


def _public_jwks(document: Any) -> dict:
    if not isinstance(document, dict):
        raise InvalidClientMetadata("jwks must be a JWK set object.")
    keys = document.get("keys")
    if not isinstance(keys, list) or not keys or len(keys) > MAX_JWKS_KEYS:
        raise InvalidClientMetadata(f'jwks must be {{"keys": [...]}} with 1 to {MAX_JWKS_KEYS} keys.')
    for key in keys:
        if not isinstance(key, dict) or key.get("kty") not in _KEY_TYPES or not isinstance(key.get("kid"), str):
            raise InvalidClientMetadata("Each key of jwks must be an RSA, EC or OKP JWK with a kid.")
        if any(member in key for member in _PRIVATE_MEMBERS):
            raise InvalidClientMetadata("Register public keys only: a private key member was sent.")
    return {"keys": keys}


def _alg(body: Mapping[str, Any], name: str, signing_algs: Collection[str]) -> str | None:
    alg = _string(body, name)
    if alg is not None and alg not in signing_algs:
        raise InvalidClientMetadata(f"{name} must be one of {', '.join(signing_algs)}.")
    return alg


def parse_metadata(
    body: Any,
    *,
    auth_methods: Collection[str],
    signing_algs: Collection[str],
    default_alg: str,
    subject_types: Collection[str] = (SUBJECT_PUBLIC,),
    grant_types_supported: Collection[str] = GRANT_TYPES,
) -> ClientMetadata:
    """Check a registration's metadata; `auth_methods`, `signing_algs`, `subject_types` and
    `grant_types_supported` are what the provider offers (a sector document is checked by
    `subjects.set_subject_type`).

    Raises `InvalidRedirectUri` for a redirect URI the client type may not use and
    `InvalidClientMetadata` for anything else wrong or inconsistent.
    """
    if not isinstance(body, dict):
        raise InvalidClientMetadata("The body must be a JSON object of client metadata.")
    application_type = _string(body, "application_type") or "web"
    if application_type not in APPLICATION_TYPES:
        raise InvalidClientMetadata("application_type must be web or native.")
    grant_types = _strings(body, "grant_types", ("authorization_code",))
    unknown = [grant for grant in grant_types if grant not in grant_types_supported]
    if unknown or not grant_types:
        raise InvalidClientMetadata(f"grant_types may hold {', '.join(grant_types_supported)}.")
    code_flow = "authorization_code" in grant_types
    response_types = _strings(body, "response_types", RESPONSE_TYPES if code_flow else ())
    if any(response_type not in RESPONSE_TYPES for response_type in response_types):
        raise InvalidClientMetadata("Only the response type code is supported.")
    if ("code" in response_types) != code_flow:
        raise InvalidClientMetadata("response_type code goes with grant_type authorization_code, and only with it.")
    redirect_uris = _redirect_uris(_strings(body, "redirect_uris", ()), application_type)
    if code_flow and not redirect_uris:
        raise InvalidRedirectUri("redirect_uris are required for the authorization_code grant.")
    method = _string(body, "token_endpoint_auth_method") or DEFAULT_AUTH_METHOD
    if method not in auth_methods:
        raise InvalidClientMetadata(f"token_endpoint_auth_method must be one of {', '.join(auth_methods)}.")
    if body.get("jwks") is not None and body.get("jwks_uri") is not None:
        raise InvalidClientMetadata("Register jwks or jwks_uri, not both.")
    jwks = _public_jwks(body["jwks"]) if body.get("jwks") is not None else None
    jwks_uri = _string(body, "jwks_uri")
    if jwks_uri is not None and (problem := redirect_uri_problem(jwks_uri)):
        raise InvalidClientMetadata(f"jwks_uri: {problem}")
    if method == "private_key_jwt" and jwks is None and jwks_uri is None:
        raise InvalidClientMetadata("private_key_jwt needs the client's keys: jwks or jwks_uri.")
    alg = _string(body, "id_token_signed_response_alg") or default_alg
    if alg not in signing_algs:
        raise InvalidClientMetadata(f"id_token_signed_response_alg must be one of {', '.join(signing_algs)}.")
    name = _string(body, "client_name") or DEFAULT_NAME
    if len(name) > MAX_NAME or not name.strip() or has_unstorable_characters(name):
        raise InvalidClientMetadata(f"client_name is 1 to {MAX_NAME} characters.")
    logo_uri = _string(body, "logo_uri")
    if logo_uri is not None and (problem := logo_url_problem(logo_uri)):
        raise InvalidClientMetadata(f"logo_uri: {problem}")
    scopes = tuple(dict.fromkeys((_string(body, "scope") or "").split()))
    if len(scopes) > MAX_SCOPES or not all(SCOPE_TOKEN.fullmatch(scope) for scope in scopes):
        raise InvalidClientMetadata(f"scope is at most {MAX_SCOPES} RFC 6749 scope tokens.")
    if scopes and "client_credentials" not in grant_types:
        raise InvalidClientMetadata("scope names what the client_credentials grant may be given: register that grant.")
    subject_type = _string(body, "subject_type") or SUBJECT_PUBLIC
    if subject_type not in subject_types:
        raise InvalidClientMetadata(f"subject_type must be one of {', '.join(subject_types)}.")
    sector_identifier_uri = _string(body, "sector_identifier_uri")
    if sector_identifier_uri is not None and subject_type != SUBJECT_PAIRWISE:
        raise InvalidClientMetadata("sector_identifier_uri is for subject_type pairwise only.")
    return ClientMetadata(
        redirect_uris=redirect_uris,
        grant_types=grant_types,
        response_types=response_types,
        application_type=application_type,
        client_name=name,
        token_endpoint_auth_method=method,
        jwks=jwks,
        jwks_uri=jwks_uri,
        id_token_signed_response_alg=alg,
        logo_uri=logo_uri,
        require_signed_request_object=_boolean(body, "require_signed_request_object"),
        require_pushed_authorization_requests=_boolean(body, "require_pushed_authorization_requests"),
        scopes=scopes,
        subject_type=subject_type,
        sector_identifier_uri=sector_identifier_uri,
        userinfo_signed_response_alg=_alg(body, "userinfo_signed_response_alg", signing_algs),
        authorization_signed_response_alg=_alg(body, "authorization_signed_response_alg", signing_algs),
        dpop_bound_access_tokens=_boolean(body, "dpop_bound_access_tokens"),
    )
