"""Subject identifiers (OpenID Connect Core §8): the one owner of the `sub` a client sees of a user.

A client is `public` (the default, and every client made before pairwise subjects existed): `sub` is
the decimal user id, and the id_token and userinfo carry `user_id` and `did` beside it, as the
interface's clients expect. A `pairwise` client sees `sub` = base64url(HMAC-SHA256(the pairwise
secret, sector NUL user id)): stable for a user and a sector, unrelated across sectors, and never
`user_id` nor `did`, which would let clients of different sectors correlate their users. The id_token,
the access token (`tokens.issue_access_token`), userinfo, introspection and back-channel logout
tokens all ask this module.

The sector is fixed when an operator makes a client pairwise (`set_subject_type`): the host of its
`sector_identifier_uri` (an https JSON array that must list every redirect URI of the client, fetched
by the caller with no transaction open: `fetch_sector_document`), or else the host of its redirect
URIs, which must then all share one host.
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
from app.oidc.settings import OidcSettings
from app.settings import current
from app.tenancy.models import SUBJECT_PAIRWISE, SUBJECT_PUBLIC, Client

MAX_SECTOR_URIS = 100


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
    client_id: int, subject_type: str, *, sector_identifier_uri: str | None = None, listed: list[str] | None = None
) -> Client:
    """Make the client public or pairwise, fixing its sector (flushes, never commits).

    `listed` is what `fetch_sector_document(sector_identifier_uri)` answered. Raises NotFound and
    SubjectTypeRefused: pairwise while `OIDC_PAIRWISE_SUBJECTS` is off, a sector document that
    does not list every redirect URI, redirect URIs of several hosts without a sector document, or
    a pairwise client whose sector would change (its users' subjects would change with it).
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
    sector = _sector(client, sector_identifier_uri, listed)
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


def _sector(client: Client, sector_identifier_uri: str | None, listed: list[str] | None) -> str:
    redirect_uris = list(client.redirect_uris or [])
    if sector_identifier_uri is not None:
        missing = [uri for uri in redirect_uris if uri not in (listed or [])]
        if missing:
            raise SubjectTypeRefused(f"sector_identifier_uri does not list the redirect URI {missing[0]}.")
        return _host(sector_identifier_uri)
    hosts = sorted({_host(uri) for uri in redirect_uris})
    if not hosts:
        raise SubjectTypeRefused("A pairwise client needs a redirect URI or a sector_identifier_uri.")
    if len(hosts) > 1:
        raise SubjectTypeRefused(
            f"The redirect URIs have several hosts ({', '.join(hosts)}): give a sector_identifier_uri listing them."
        )
    return hosts[0]


def _host(uri: str) -> str:
    host = (urlsplit(uri).hostname or "").lower()
    if not host:
        raise SubjectTypeRefused(f"{uri} has no host.")
    return host
