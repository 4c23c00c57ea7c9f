"""Issuer keys of clients and the DID documents that publish them.

Each client publishes `did:web:<service host>:clients:<id>` (served at `/clients/<id>/did.json`)
listing every key it ever had: active keys sign, retired ones stay listed so credentials they
signed keep verifying. Every key is also usable as its own did:key. Private keys are encrypted
with `ENCRYPTION_KEYS` (purpose `issuer.client_key`). Functions flush, never commit; every one
that takes a `Caller` acts on the caller's acting client only (other clients' keys are 404s).
"""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import quote, urlsplit

from flask import current_app
from sqlalchemy import select

from app.db import isoformat, utcnow
from app.dids.errors import DidResolutionFailed
from app.extensions import db
from app.issuer import proofs
from app.issuer.errors import IssuerDidNotFound, IssuerKeyNotFound, IssuerKeyRetired
from app.issuer.models import KEY_ACTIVE, KEY_RETIRED, ClientIssuerKey
from app.multiformats import encode_multikey
from app.security import decrypt, encrypt
from app.tenancy.caller import Caller
from app.tenancy.service import get_active_client

KEY_PURPOSE = "issuer.client_key"
DID_CONTEXTS = ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"]
_RELATIONSHIPS = ("assertionMethod", "authentication")
_KEY_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_MAX_CLIENT_ID = 2**31 - 1


def _did_web_base() -> str:
    """`did:web:<host>[%3A<port>][:<path segments>]` of the service's `BASE_URL`."""
    parts = urlsplit(current_app.config["BASE_URL"])
    authority = (parts.hostname or "localhost").lower()
    if parts.port:
        authority += f"%3A{parts.port}"
    segments = [quote(segment, safe="") for segment in parts.path.split("/") if segment]
    return ":".join(["did:web", authority, *segments])


def client_did(client_id: int) -> str:
    """The did:web of a client: its documents are served at `/clients/<id>/did.json`."""
    return f"{_did_web_base()}:clients:{client_id}"


def key_fragment(key: ClientIssuerKey) -> str:
    return f"key-{key.id}"


def did_key_of(key: ClientIssuerKey) -> str:
    return f"did:key:{key.public_key_multibase}"


def verification_method_ids(key: ClientIssuerKey) -> dict[str, str]:
    """The key's verification method under the client's did:web and as a did:key."""
    did_key = did_key_of(key)
    return {
        "did:web": f"{client_did(key.client_id)}#{key_fragment(key)}",
        "did:key": f"{did_key}#{key.public_key_multibase}",
    }


def key_view(key: ClientIssuerKey) -> dict[str, Any]:
    """A key as the API shows it (never the private key)."""
    methods = verification_method_ids(key)
    return {
        "id": key.id,
        "type": key.key_type,
        "state": key.state,
        "publicKeyMultibase": key.public_key_multibase,
        "controller": client_did(key.client_id),
        "verificationMethod": methods["did:web"],
        "didKey": did_key_of(key),
        "didKeyVerificationMethod": methods["did:key"],
        "cryptosuites": sorted(name for name, types in proofs.SUITE_KEY_TYPES.items() if key.key_type in types),
        "replacedBy": key.replaced_by,
        "created_at": isoformat(key.created_at),
        "retired_at": isoformat(key.retired_at),
    }


def _new_key(client_id: int, key_type: str) -> ClientIssuerKey:
    private = proofs.generate_private_key(key_type)
    key = ClientIssuerKey(
        id=str(uuid.uuid4()),
        client_id=client_id,
        key_type=key_type,
        state=KEY_ACTIVE,
        public_key_multibase=encode_multikey(key_type, proofs.public_key_of(key_type, private)),
        private_key_encrypted=encrypt(private, KEY_PURPOSE),
        created_at=utcnow(),
    )
    db.session.add(key)
    db.session.flush()
    return key


def create_key(caller: Caller, key_type: str) -> ClientIssuerKey:
    """A new active key of `key_type` (one of `proofs.KEY_TYPES`) for the acting client."""
    return _new_key(caller.acting_client_id, key_type)


def list_keys(caller: Caller) -> list[ClientIssuerKey]:
    """The acting client's keys, active first, newest first."""
    statement = (
        select(ClientIssuerKey)
        .where(ClientIssuerKey.client_id == caller.acting_client_id)
        .order_by(ClientIssuerKey.state != KEY_ACTIVE, ClientIssuerKey.created_at.desc(), ClientIssuerKey.id)
    )
    return list(db.session.execute(statement).scalars())


def get_key(client_id: int, key_id: str) -> ClientIssuerKey | None:
    """The key `key_id` of `client_id`, or None."""
    key = db.session.get(ClientIssuerKey, key_id) if _KEY_ID.match(key_id) else None
    return key if key is not None and key.client_id == client_id else None


def require_key(caller: Caller, key_id: str) -> ClientIssuerKey:
    """The acting client's key `key_id`; `IssuerKeyNotFound` (404) otherwise."""
    key = get_key(caller.acting_client_id, key_id)
    if key is None:
        raise IssuerKeyNotFound("No such issuer key.")
    return key


def _locked_key(caller: Caller, key_id: str) -> ClientIssuerKey:
    require_key(caller, key_id)
    statement = select(ClientIssuerKey).where(ClientIssuerKey.id == key_id).with_for_update()
    return db.session.execute(statement).scalar_one()


def rotate_key(caller: Caller, key_id: str) -> ClientIssuerKey:
    """Retire an active key and make a new one of its type in its place; returns the new key.

    Raises `IssuerKeyNotFound` (404) or `IssuerKeyRetired` (409) for a key already retired.
    """
    key = _locked_key(caller, key_id)
    if key.state != KEY_ACTIVE:
        raise IssuerKeyRetired("A retired key cannot be rotated; create a new key instead.")
    replacement = _new_key(key.client_id, key.key_type)
    key.state = KEY_RETIRED
    key.retired_at = replacement.created_at
    key.replaced_by = replacement.id
    db.session.flush()
    return replacement


def retire_key(caller: Caller, key_id: str) -> ClientIssuerKey:
    """Stop signing with a key (it stays published); retiring a retired key changes nothing."""
    key = _locked_key(caller, key_id)
    if key.state == KEY_ACTIVE:
        key.state = KEY_RETIRED
        key.retired_at = utcnow()
        db.session.flush()
    return key


def private_key_of(key: ClientIssuerKey) -> bytes:
    """The raw private key (decrypted now, never cached)."""
    return decrypt(key.private_key_encrypted, KEY_PURPOSE)


def newest_active_key(client_id: int, key_types: tuple[str, ...]) -> ClientIssuerKey | None:
    """The client's newest active key of one of `key_types`, or None."""
    statement = (
        select(ClientIssuerKey)
        .where(
            ClientIssuerKey.client_id == client_id,
            ClientIssuerKey.state == KEY_ACTIVE,
            ClientIssuerKey.key_type.in_(key_types),
        )
        .order_by(ClientIssuerKey.created_at.desc(), ClientIssuerKey.id)
        .limit(1)
    )
    return db.session.execute(statement).scalar_one_or_none()


def active_key_with_method(client_id: int, verification_method: str) -> ClientIssuerKey | None:
    """The client's active key whose did:web or did:key verification method is `verification_method`."""
    statement = select(ClientIssuerKey).where(
        ClientIssuerKey.client_id == client_id, ClientIssuerKey.state == KEY_ACTIVE
    )
    for key in db.session.execute(statement).scalars():
        if verification_method in verification_method_ids(key).values():
            return key
    return None


def did_document(client_id: int) -> dict[str, Any]:
    """The did:web document of an active client; `IssuerDidNotFound` (404) otherwise.

    A client without keys has a document with no verification methods.
    """
    if not 0 < client_id <= _MAX_CLIENT_ID or get_active_client(client_id) is None:
        raise IssuerDidNotFound("No such DID.")
    did = client_did(client_id)
    keys = db.session.execute(
        select(ClientIssuerKey)
        .where(ClientIssuerKey.client_id == client_id)
        .order_by(ClientIssuerKey.created_at, ClientIssuerKey.id)
    ).scalars()
    methods = [
        {
            "id": f"{did}#{key_fragment(key)}",
            "type": "Multikey",
            "controller": did,
            "publicKeyMultibase": key.public_key_multibase,
        }
        for key in keys
    ]
    document: dict[str, Any] = {"@context": list(DID_CONTEXTS), "id": did, "verificationMethod": methods}
    for relationship in _RELATIONSHIPS:
        document[relationship] = [method["id"] for method in methods]
    return document


def local_did_document(did: str) -> dict | None:
    """The document of a did:web this service hosts (read from the database), else None.

    Used by the verifier instead of fetching our own documents over HTTPS. Raises
    `DidResolutionFailed("did_resolution_failed")` for one of our DIDs that names no active client.
    """
    prefix = f"{_did_web_base()}:clients:"
    if not did.startswith(prefix):
        return None
    rest = did[len(prefix) :]
    try:
        if not (rest.isascii() and rest.isdigit() and len(rest) <= 10):
            raise IssuerDidNotFound("No such DID.")
        return did_document(int(rest))
    except IssuerDidNotFound:
        raise DidResolutionFailed("did_resolution_failed", f"{did[:200]} is not a DID of this service") from None
