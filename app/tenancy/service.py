"""Clients and API tokens: the rules of the tenant tree."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from app.db import as_utc, utcnow
from app.errors import NotFound
from app.extensions import db
from app.security import hash_secret, random_token
from app.tenancy.models import ApiToken, Client

TOKEN_PREFIX = "tsk_"


@dataclass(frozen=True)
class IssuedToken:
    """A new API token: the plaintext is only ever available here, once."""

    token: ApiToken
    plaintext: str


def create_master_client(
    name: str,
    *,
    redirect_uris: list[str] | None = None,
    id_token_claims: dict[str, str] | None = None,
) -> tuple[Client, str]:
    """Create a master client (a tree root) and its client secret. Flushes; returns (client, secret)."""
    secret = random_token(32)
    client = Client(
        name=name,
        parent_id=None,
        esp_token=new_esp_token(),
        redirect_uris=list(redirect_uris or []),
        id_token_claims=dict(id_token_claims or {}),
        secret_hash=hash_secret(secret),
        created_at=utcnow(),
    )
    db.session.add(client)
    db.session.flush()
    client.root_id = client.id
    client.path = f"/{client.id}/"
    return client, secret


def new_esp_token() -> str:
    """Public identifier of a client's e-mail sender profile (not a secret)."""
    return "esp_" + uuid.uuid4().hex


def issue_api_token(client_id: int, *, name: str = "", expires_at: datetime | None = None) -> IssuedToken:
    """Create an API token for a client; the plaintext is returned once and stored only hashed."""
    plaintext = TOKEN_PREFIX + random_token(32)
    token = ApiToken(
        client_id=client_id,
        name=name,
        token_hash=hash_secret(plaintext),
        prefix=plaintext[: len(TOKEN_PREFIX) + 6],
        expires_at=expires_at,
        created_at=utcnow(),
    )
    db.session.add(token)
    db.session.flush()
    return IssuedToken(token=token, plaintext=plaintext)


def find_active_token(plaintext: str) -> tuple[ApiToken | None, Client | None]:
    """The token and its client if the token is valid now (not revoked, expired or disabled)."""
    statement = (
        select(ApiToken, Client)
        .join(Client, Client.id == ApiToken.client_id)
        .where(ApiToken.token_hash == hash_secret(plaintext))
    )
    row = db.session.execute(statement).first()
    if row is None:
        return None, None
    token, client = row
    now = utcnow()
    if token.revoked_at is not None or client.disabled_at is not None:
        return None, None
    if token.expires_at is not None and as_utc(token.expires_at) <= now:
        return None, None
    return token, client


def get_client_in_subtree(client_id: int, subtree_path: str) -> Client | None:
    """The client with this id if it lies within the subtree rooted at `subtree_path`."""
    client = db.session.get(Client, client_id)
    if client is None or not client.path.startswith(subtree_path):
        return None
    return client


def require_client_in_subtree(client_id: int, subtree_path: str) -> Client:
    client = get_client_in_subtree(client_id, subtree_path)
    if client is None:
        raise NotFound("No such client.")
    return client


def subtree_client_ids(subtree_path: str) -> set[int]:
    """Ids of every client within the subtree rooted at `subtree_path`."""
    statement = select(Client.id).where(Client.path.startswith(subtree_path, autoescape=True))
    return set(db.session.execute(statement).scalars())
