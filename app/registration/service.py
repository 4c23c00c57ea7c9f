"""Use cases of dynamic client registration: initial access tokens, register, read, update, delete.

A registration creates a child of the client whose initial access token it presents (a master
client, or the node of its tree the master issued the token for); the client is then managed with
its registration access token (RFC 7592), which every read and update replaces (the service keeps
only its hash, so it can answer it only when new). Functions flush but never commit;
`register_client` and `update_client` fetch a `jwks_uri` before their first write, ending the
reads (never inside a transaction).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select

from app.db import as_utc, end_reads, utcnow
from app.errors import NotFound
from app.extensions import db
from app.oidc import client_auth, outbound, subjects
from app.oidc.service import supported_grant_types
from app.oidc.settings import OidcSettings
from app.registration.errors import InvalidClientMetadata, InvalidRegistrationToken
from app.registration.metadata import ClientMetadata, parse_metadata
from app.registration.models import InitialAccessToken, RegisteredClient, RegistrationPolicy
from app.registration.settings import RegistrationSettings
from app.security import hash_secret, random_token, secret_hash_candidates
from app.settings import current
from app.tenancy import service as tenancy
from app.tenancy.caller import Caller
from app.tenancy.errors import MasterClientRequired
from app.tenancy.models import SUBJECT_PUBLIC, Client

INITIAL_TOKEN_PREFIX = "tit_"
REGISTRATION_TOKEN_PREFIX = "trt_"


@dataclass(frozen=True)
class IssuedInitialToken:
    """A new initial access token: the plaintext is only ever available here, once."""

    token: InitialAccessToken
    plaintext: str


@dataclass(frozen=True)
class Registration:
    """A registered client as RFC 7591 §3.2.1 answers it; `client_secret` only when just issued."""

    client: Client
    record: RegisteredClient
    registration_access_token: str
    client_secret: str | None = None


def require_enabled() -> None:
    """NotFound (404) while the operator has turned registration off."""
    if not current(RegistrationSettings).enabled:
        raise NotFound("Dynamic client registration is turned off.")


# --- initial access tokens -----------------------------------------------------------------------


def issue_initial_token(client_id: int, *, name: str = "", expires_in: int | None = None) -> IssuedInitialToken:
    """An initial access token registering sub-clients of the master client `client_id` (the operator's).

    `expires_in` seconds (None: `OIDC_INITIAL_ACCESS_TOKEN_TTL`; 0: never). Raises `NotFound` for an
    unknown or disabled client and `MasterClientRequired` (403) for a sub-client. Flushes.
    """
    client = tenancy.get_active_client(client_id)
    if client is None:
        raise NotFound(f"No client {client_id}.")
    if not client.is_master:
        raise MasterClientRequired("Initial access tokens are issued to master clients.")
    return _issue_initial_token(client.id, name=name, expires_in=expires_in)


def _issue_initial_token(client_id: int, *, name: str, expires_in: int | None) -> IssuedInitialToken:
    ttl = current(RegistrationSettings).initial_token_ttl if expires_in is None else expires_in
    plaintext = INITIAL_TOKEN_PREFIX + random_token(32)
    token = InitialAccessToken(
        client_id=client_id,
        name=name,
        token_hash=hash_secret(plaintext),
        prefix=plaintext[: len(INITIAL_TOKEN_PREFIX) + 6],
        created_at=utcnow(),
        expires_at=utcnow() + timedelta(seconds=ttl) if ttl else None,
    )
    db.session.add(token)
    db.session.flush()
    return IssuedInitialToken(token, plaintext)


def create_initial_token(caller: Caller, *, name: str = "", expires_in: int | None = None) -> IssuedInitialToken:
    """An initial access token of the caller's acting node (its own client, or the node of its tree
    `x-api-subclient-id` selected), registering children of that node; a master client's API token
    only (`MasterClientRequired`, 403, for a sub-client's). Flushes."""
    require_enabled()
    if not caller.is_master:
        raise MasterClientRequired("Initial access tokens are issued with a master client's API token.")
    return _issue_initial_token(caller.acting_client_id, name=name, expires_in=expires_in)


def revoke_initial_token(token_id: int) -> InitialAccessToken:
    """Revoke an initial access token (idempotent); clients it registered stay. Raises `NotFound`."""
    token = db.session.get(InitialAccessToken, token_id)
    if token is None:
        raise NotFound(f"No initial access token {token_id}.")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        db.session.flush()
    return token


def _live_initial_token(plaintext: str | None) -> tuple[InitialAccessToken, Client]:
    refused = InvalidRegistrationToken()
    if not plaintext or not plaintext.startswith(INITIAL_TOKEN_PREFIX):
        raise refused
    token = db.session.scalar(
        select(InitialAccessToken).where(
            InitialAccessToken.token_hash.in_(secret_hash_candidates(plaintext)),
            InitialAccessToken.revoked_at.is_(None),
        )
    )
    if token is None or (token.expires_at is not None and as_utc(token.expires_at) <= utcnow()):
        raise refused
    parent = tenancy.get_active_client(token.client_id)
    if parent is None:
        raise refused
    return token, parent


# --- what registrations may ask for ----------------------------------------------------------------


def registration_scopes(client_id: int) -> tuple[str, ...]:
    """The scopes a client registered under `client_id`'s initial access tokens may ask its
    `client_credentials` grant to be given; none unless that client allowed some."""
    policy = db.session.get(RegistrationPolicy, client_id)
    return tuple(policy.client_credentials_scopes) if policy is not None else ()


def configure_registration_scopes(client_id: int, scopes: list[str]) -> tuple[str, ...]:
    """Set the scopes of `registration_scopes` (the operator's, for any client; `scopes` already
    checked: RFC 6749 scope tokens). Raises `NotFound` for an unknown or disabled client. Flushes."""
    if tenancy.get_active_client(client_id) is None:
        raise NotFound(f"No client {client_id}.")
    policy = db.session.get(RegistrationPolicy, client_id)
    if policy is None:
        policy = RegistrationPolicy(client_id=client_id)
        db.session.add(policy)
    policy.client_credentials_scopes = list(dict.fromkeys(scopes))
    policy.updated_at = utcnow()
    db.session.flush()
    return tuple(policy.client_credentials_scopes)


def registration_policy(caller: Caller) -> tuple[str, ...]:
    """`registration_scopes` of the caller's acting node, for a master client's API token only
    (`MasterClientRequired`, 403, for a sub-client's)."""
    _require_master_caller(caller)
    return registration_scopes(caller.acting_client_id)


def set_registration_scopes(caller: Caller, scopes: list[str]) -> tuple[str, ...]:
    """`configure_registration_scopes` for the caller's acting node, for a master client's API
    token only (`MasterClientRequired`, 403, for a sub-client's)."""
    _require_master_caller(caller)
    return configure_registration_scopes(caller.acting_client_id, scopes)


def _require_master_caller(caller: Caller) -> None:
    require_enabled()
    if not caller.is_master:
        raise MasterClientRequired("What registrations may ask for is managed with a master client's API token.")


def _check_scopes_allowed(metadata: ClientMetadata, registering_client_id: int) -> None:
    """A registration (or its update) asks only for scopes the client it is registered under allows
    (`InvalidClientMetadata` otherwise): a client cannot give itself a scope its master's resource
    servers trust (RFC 7591 §2: the server decides what `scope` it grants)."""
    allowed = registration_scopes(registering_client_id)
    refused = [scope for scope in metadata.scopes if scope not in allowed]
    if refused:
        permitted = ", ".join(allowed) if allowed else "none"
        raise InvalidClientMetadata(
            f"scope may hold only what the registering client allows ({permitted[:500]}); not {refused[0][:64]}."
        )


# --- registration --------------------------------------------------------------------------------


def _checked_metadata(body: Any) -> ClientMetadata:
    return parse_metadata(
        body,
        auth_methods=client_auth.METHODS,
        signing_algs=tenancy.SIGNING_ALGORITHMS,
        default_alg=current(OidcSettings).default_alg,
        subject_types=subjects.subject_types_supported(),
        grant_types_supported=supported_grant_types(),
    )


def _check_jwks_uri(uri: str) -> None:
    """Fetch a registered `jwks_uri` once (through the outbound guard, with no transaction open: the
    reads so far are ended): a client must register keys that can be read. `InvalidClientMetadata` otherwise."""
    end_reads("a registration's jwks_uri is fetched with no transaction open")
    try:
        document = client_auth.fetch_jwks(uri)
    except outbound.OutboundRefused as error:
        raise InvalidClientMetadata(outbound.unfetched("jwks_uri", error)) from None
    if not any(isinstance(key, dict) and "d" not in key for key in document["keys"]):
        raise InvalidClientMetadata("jwks_uri holds no public key.")


def _fetch_sector_document(metadata: ClientMetadata) -> list[str] | None:
    """The redirect URIs a pairwise client's `sector_identifier_uri` lists, fetched through the
    outbound guard with no transaction open (the reads so far are ended); `InvalidClientMetadata`
    when it cannot be used."""
    if metadata.sector_identifier_uri is None:
        return None
    end_reads("a registration's sector_identifier_uri is fetched with no transaction open")
    try:
        return subjects.fetch_sector_document(metadata.sector_identifier_uri)
    except subjects.SubjectTypeRefused as error:
        raise InvalidClientMetadata(error.detail) from None


def _set_subject_type(client: Client, metadata: ClientMetadata, listed: list[str] | None) -> None:
    """The client's subject type, checked by the one owner of subjects (as `clients set-subject` is)."""
    try:
        subjects.set_subject_type(
            client.id,
            metadata.subject_type,
            sector_identifier_uri=metadata.sector_identifier_uri,
            listed=listed,
            code_flow="authorization_code" in metadata.grant_types,
        )
    except subjects.SubjectTypeRefused as error:
        raise InvalidClientMetadata(error.detail) from None


def _new_registration_token(record: RegisteredClient) -> str:
    plaintext = REGISTRATION_TOKEN_PREFIX + random_token(32)
    record.token_hash = hash_secret(plaintext)
    return plaintext


def register_client(initial_token: str | None, body: Any) -> Registration:
    """Register a client (RFC 7591): a child of the client the initial access token belongs to.

    Raises `InvalidRegistrationToken` (401), `InvalidClientMetadata` / `InvalidRedirectUri` (400).
    A client secret is issued unless the client authenticates with `private_key_jwt`.
    """
    require_enabled()
    token, parent = _live_initial_token(initial_token)
    metadata = _checked_metadata(body)
    _check_scopes_allowed(metadata, parent.id)
    if metadata.jwks_uri is not None:
        _check_jwks_uri(metadata.jwks_uri)
    listed = _fetch_sector_document(metadata)
    if metadata.jwks_uri is not None or listed is not None:
        token, parent = _live_initial_token(initial_token)  # read again: the fetches ended the reads
    client = tenancy.add_child_client(parent, metadata.client_fields())
    tenancy.configure_client(client.id, metadata.operator_fields())
    _set_subject_type(client, metadata, listed)
    secret = None
    if metadata.token_endpoint_auth_method != "private_key_jwt":
        secret = tenancy.issue_client_secret(client).client_secret
    record = RegisteredClient(
        client_id=client.id,
        initial_token_id=token.id,
        extra_metadata={"application_type": metadata.application_type},
        issued_at=utcnow(),
    )
    plaintext = _new_registration_token(record)
    db.session.add(record)
    db.session.flush()
    return Registration(client, record, plaintext, secret)


def _registered(client_id: int, registration_token: str | None) -> tuple[RegisteredClient, Client]:
    """The registration the token manages, which must be `client_id`'s; `InvalidRegistrationToken`
    otherwise, whether or not the client exists."""
    refused = InvalidRegistrationToken()
    if not registration_token or not registration_token.startswith(REGISTRATION_TOKEN_PREFIX):
        raise refused
    record = db.session.scalar(
        select(RegisteredClient).where(RegisteredClient.token_hash.in_(secret_hash_candidates(registration_token)))
    )
    if record is None or record.client_id != client_id:
        raise refused
    client = tenancy.get_active_client(client_id)
    if client is None:
        raise refused
    return record, client


def read_client(client_id: int, registration_token: str | None) -> Registration:
    """The client's registration (RFC 7592 §2.1), with a new registration access token."""
    require_enabled()
    record, client = _registered(client_id, registration_token)
    plaintext = _new_registration_token(record)
    db.session.flush()
    return Registration(client, record, plaintext)


def update_client(client_id: int, registration_token: str | None, body: Any) -> Registration:
    """Replace the client's metadata (RFC 7592 §2.2: members left out return to their defaults).

    The body's `client_id` must be the client's and a `client_secret` in it its current secret.
    Answers with a new registration access token; the client secret is kept.
    """
    require_enabled()
    _record, registered = _registered(client_id, registration_token)
    if isinstance(body, dict):
        if body.get("client_id") not in (None, str(client_id)):
            raise InvalidClientMetadata("client_id differs from the client being updated.")
        if body.get("client_secret") is not None:
            client = tenancy.get_active_client(client_id)
            if not isinstance(body["client_secret"], str) or not tenancy.verify_client_secret(
                client, body["client_secret"]
            ):
                raise InvalidClientMetadata("client_secret is not the client's secret.")
    metadata = _checked_metadata(body)
    _check_scopes_allowed(metadata, registered.parent_id)
    if metadata.jwks_uri is not None:
        _check_jwks_uri(metadata.jwks_uri)
    listed = _fetch_sector_document(metadata)
    record, client = _registered(client_id, registration_token)
    tenancy.configure_client(client.id, {**metadata.client_fields(), **metadata.operator_fields()})
    _set_subject_type(client, metadata, listed)
    record.extra_metadata = {"application_type": metadata.application_type}
    plaintext = _new_registration_token(record)
    db.session.flush()
    return Registration(client, record, plaintext)


def delete_client(client_id: int, registration_token: str | None) -> None:
    """Deregister the client (RFC 7592 §2.3): it is disabled with its subtree, its token stops working."""
    require_enabled()
    record, client = _registered(client_id, registration_token)
    tenancy.disable_client(client.id)
    db.session.delete(record)
    db.session.flush()


def registration_document(registration: Registration, client_uri: str) -> dict[str, Any]:
    """The client information response (RFC 7591 §3.2.1, RFC 7592 §3): what the client is now."""
    client = registration.client
    document: dict[str, Any] = {
        "client_id": str(client.id),
        "client_id_issued_at": int(as_utc(registration.record.issued_at).timestamp()),
        "registration_access_token": registration.registration_access_token,
        "registration_client_uri": client_uri,
        "client_name": client.name,
        "application_type": registration.record.extra_metadata.get("application_type", "web"),
        "redirect_uris": list(client.redirect_uris or []),
        "grant_types": client.allowed_grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": client.token_endpoint_auth_method or "client_secret_basic",
        "id_token_signed_response_alg": client.signing_alg,
        "require_signed_request_object": bool(client.require_signed_request_object),
        "require_pushed_authorization_requests": bool(client.require_pushed_authorization_requests),
        "subject_type": client.subject_type or SUBJECT_PUBLIC,
        "dpop_bound_access_tokens": bool(client.dpop_bound_access_tokens),
    }
    if registration.client_secret is not None:
        document["client_secret"] = registration.client_secret
        document["client_secret_expires_at"] = 0
    optional = {
        "jwks": client.jwks,
        "jwks_uri": client.jwks_uri,
        "logo_uri": client.logo_url,
        "scope": " ".join(client.client_credentials_scopes or []) or None,
        "sector_identifier_uri": client.sector_identifier_uri,
        "userinfo_signed_response_alg": client.userinfo_signed_response_alg,
        "authorization_signed_response_alg": client.authorization_signed_response_alg,
    }
    document.update({name: value for name, value in optional.items() if value is not None})
    return document
