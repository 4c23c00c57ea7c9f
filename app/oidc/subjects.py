"""Subject identifiers (OpenID Connect Core §8): the one owner of the `sub` a client sees of a user.

A client is `public` (the default, and every client made before pairwise subjects existed): `sub` is
the decimal user id, and the id_token and userinfo carry `user_id` and `did` beside it, as the
interface's clients expect. A `pairwise` client sees `sub` = base64url(HMAC-SHA256(the pairwise
secret, sector NUL user id)): stable for a user and a sector, unrelated across sectors, and never
`user_id` nor `did`, which would let clients of different sectors correlate their users. The id_token,
the access token (`tokens.issue_access_token`), userinfo, introspection and back-channel logout
tokens all ask this module.

The sector is fixed when a client is made pairwise (`set_subject_type`): the host of its
`sector_identifier_uri` (OpenID Connect Core §8.1: an https JSON array that must list every redirect
URI of the client, fetched by the caller with no transaction open: `fetch_sector_document`), or else
the one host of its redirect URIs, but only for a client whose users' tokens all travel through them
(`redirects_carry_tokens`). A redirect URI a client merely lists proves nothing: the code flow sends
its codes there, so only the host's owner receives them, but a grant that needs no redirect (the
device flow) would hand that host's subjects to whoever holds the client. Such a client, and one
that does not use the code flow, gets a sector of its own (`own_sector`) unless its sector document
vouches for it, and a sector taken from redirect URIs is refused to those grants
(`require_sector_for_redirectless_grant`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any, Protocol
from urllib.parse import urlsplit

from app.errors import DomainError, NotFound
from app.extensions import db
from app.oidc import outbound
from app.oidc.errors import UnauthorizedClient
from app.oidc.settings import OidcSettings
from app.settings import current
from app.tenancy.models import DEVICE_CODE_GRANT, SUBJECT_PAIRWISE, SUBJECT_PUBLIC, Client

MAX_SECTOR_URIS = 100
# Grants that hand a user's tokens to the client without sending the browser to one of its redirect
# URIs: whoever holds the client's credentials receives them (CIBA will join them).
REDIRECTLESS_GRANTS = frozenset({DEVICE_CODE_GRANT})
_OWN_SECTOR_PREFIX = "client:"


class SubjectTypeRefused(DomainError):
    status, code, title = 422, "subject_type_refused", "Subject type not accepted"


class Subjected(Protocol):
    """What the subject of a client's tokens depends on (`Client`'s fields of the same names)."""

    subject_type: str | None
    sector_identifier: str | None


def is_pairwise(client: Subjected) -> bool:
    return client.subject_type == SUBJECT_PAIRWISE and bool(client.sector_identifier)


def subject_for(client: Subjected, user_id: int) -> str:
    """The `sub` of `user_id` in the tokens and answers of `client`."""
    if not is_pairwise(client):
        return str(user_id)
    key = current(OidcSettings).pairwise_secret.encode()
    message = f"{client.sector_identifier}\x00{user_id}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def identity_claims(client: Subjected, user_id: int, did: str | None) -> dict[str, Any]:
    """The claims naming the user to `client`: `sub`, and for a public client `user_id` and `did`."""
    if is_pairwise(client):
        return {"sub": subject_for(client, user_id)}
    return {"sub": str(user_id), "user_id": user_id, "did": did}


def own_sector(client_id: int) -> str:
    """The sector of a client that shares its users' subjects with no other client (never a host name)."""
    return f"{_OWN_SECTOR_PREFIX}{client_id}"


def redirects_carry_tokens(client: Client, *, code_flow: bool = True) -> bool:
    """Whether every user token of `client` travels through its redirect URIs: it uses the code flow
    (it has redirect URIs, and `code_flow`: False for a registration without `authorization_code`)
    and has no grant in `REDIRECTLESS_GRANTS`."""
    return code_flow and bool(client.redirect_uris) and not REDIRECTLESS_GRANTS & set(client.grant_types or ())


def require_sector_for_redirectless_grant(client: Client) -> None:
    """Refuse a grant of `REDIRECTLESS_GRANTS` to a pairwise client whose sector was taken from its
    redirect URIs (fixed before it had such a grant, or before this rule): UnauthorizedClient
    (RFC 6749 §5.2). A sector of its own or one of a `sector_identifier_uri` passes."""
    if not is_pairwise(client) or client.sector_identifier_uri is not None:
        return
    if client.sector_identifier != own_sector(client.id):
        raise UnauthorizedClient(
            f"The client's pairwise sector {client.sector_identifier} comes from its redirect URIs, which this "
            "grant does not use: give it a sector_identifier_uri on that host that lists its jwks_uri, or a "
            "sector of its own (make it public, then pairwise again)."
        )


def subject_types_supported() -> list[str]:
    """What discovery's `subject_types_supported` says."""
    return [SUBJECT_PUBLIC, SUBJECT_PAIRWISE] if current(OidcSettings).pairwise_subjects else [SUBJECT_PUBLIC]


def fetch_sector_document(uri: str) -> list[str]:
    """The redirect URIs listed at a `sector_identifier_uri` (a JSON array of strings), fetched
    through the outbound guard. Must be called with no transaction open; raises SubjectTypeRefused."""
    if urlsplit(uri).scheme != "https" and not _listed_for_tests(uri):
        raise SubjectTypeRefused("sector_identifier_uri must be an https URL.")
    try:
        response = outbound.request("GET", uri)
    except outbound.OutboundRefused as error:
        raise SubjectTypeRefused(outbound.unfetched("sector_identifier_uri", error)) from None
    if response.status_code != 200:
        raise SubjectTypeRefused(outbound.unfetched("sector_identifier_uri", f"HTTP {response.status_code}"))
    try:
        listed = json.loads(response.content)
    except (ValueError, RecursionError):
        listed = None
    if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed) or not listed:
        raise SubjectTypeRefused("sector_identifier_uri must answer a JSON array of redirect URIs.")
    if len(listed) > MAX_SECTOR_URIS:
        raise SubjectTypeRefused(f"sector_identifier_uri lists more than {MAX_SECTOR_URIS} URIs.")
    return listed


def _listed_for_tests(uri: str) -> bool:
    """Plain http only to a host of `OIDC_OUTBOUND_ALLOW_HOSTS` (loopback test servers)."""
    parts = urlsplit(uri)
    return parts.scheme == "http" and f"{parts.hostname}:{parts.port or 80}" in outbound.allowed_hosts()


def set_subject_type(
    client_id: int,
    subject_type: str,
    *,
    sector_identifier_uri: str | None = None,
    listed: list[str] | None = None,
    code_flow: bool = True,
) -> Client:
    """Make the client public or pairwise, fixing its sector (flushes, never commits).

    `listed` is what `fetch_sector_document(sector_identifier_uri)` answered; `code_flow` is False for
    a registration without the `authorization_code` grant. Raises NotFound and SubjectTypeRefused:
    pairwise while `OIDC_PAIRWISE_SUBJECTS` is off, a sector document that does not list every
    redirect URI (and, for a client whose tokens need no redirect, its `jwks_uri`), redirect URIs of
    several hosts without a sector document, or a pairwise client whose sector would change (its
    users' subjects would change with it).
    """
    client = db.session.get(Client, client_id)
    if client is None:
        raise NotFound(f"No client {client_id}.")
    if subject_type == SUBJECT_PUBLIC:
        client.subject_type, client.sector_identifier_uri, client.sector_identifier = SUBJECT_PUBLIC, None, None
        db.session.flush()
        return client
    if subject_type != SUBJECT_PAIRWISE:
        raise SubjectTypeRefused(f"subject_type must be {SUBJECT_PUBLIC} or {SUBJECT_PAIRWISE}.")
    if not current(OidcSettings).pairwise_subjects:
        raise SubjectTypeRefused("Pairwise subjects are turned off (OIDC_PAIRWISE_SUBJECTS).")
    sector = _sector(client, sector_identifier_uri, listed, code_flow=code_flow)
    if client.subject_type == SUBJECT_PAIRWISE and client.sector_identifier and client.sector_identifier != sector:
        raise SubjectTypeRefused(
            f"The client's sector is {client.sector_identifier}; changing it to {sector} would change its users' sub."
        )
    client.subject_type, client.sector_identifier_uri, client.sector_identifier = (
        SUBJECT_PAIRWISE,
        sector_identifier_uri,
        sector,
    )
    db.session.flush()
    return client


def _sector(client: Client, sector_identifier_uri: str | None, listed: list[str] | None, *, code_flow: bool) -> str:
    redirect_uris = list(client.redirect_uris or [])
    carried = redirects_carry_tokens(client, code_flow=code_flow)
    if sector_identifier_uri is not None:
        missing = [uri for uri in redirect_uris if uri not in (listed or [])]
        if missing:
            raise SubjectTypeRefused(f"sector_identifier_uri does not list the redirect URI {missing[0]}.")
        if not carried:
            _require_vouched_keys(client, listed or [])
        return _host(sector_identifier_uri)
    if not carried:
        return own_sector(client.id)
    hosts = sorted({_host(uri) for uri in redirect_uris})
    if len(hosts) > 1:
        raise SubjectTypeRefused(
            f"The redirect URIs have several hosts ({', '.join(hosts)}): give a sector_identifier_uri listing them."
        )
    return hosts[0]


def _require_vouched_keys(client: Client, listed: list[str]) -> None:
    """A client whose tokens need no redirect joins a sector only when the sector's document names
    the keys it must authenticate with (`jwks_uri`, `private_key_jwt`): redirect URIs it lists are
    not where its tokens go (as CIBA binds a pairwise sector to the client's keys)."""
    if client.token_endpoint_auth_method != "private_key_jwt" or client.jwks_uri not in listed:
        raise SubjectTypeRefused(
            "This client receives tokens without its redirect URIs (device flow, or no code flow): its "
            "sector_identifier_uri must also list its jwks_uri, and it must authenticate with private_key_jwt. "
            "Without a sector_identifier_uri it gets a sector of its own."
        )


def _host(uri: str) -> str:
    host = (urlsplit(uri).hostname or "").lower()
    if not host:
        raise SubjectTypeRefused(f"{uri} has no host.")
    return host
