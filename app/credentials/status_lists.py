"""Bitstring Status Lists hosted by the service: entries, revocation and suspension, signed lists.

Indexes are allocated at random in lists of `STATUS_LIST_SIZE` bits (at least 131072), filled to
at most half so a fresh random index is found in a few tries and an index says little about
when it was issued. A list's bits are its entries whose status is not `active`; every change
re-signs the list credential (eddsa-jcs-2022, with the service's Ed25519 key) in the same
transaction, under a lock on the list row, so the served credential always matches the entries.
Functions flush, never commit.
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from flask import current_app
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.credentials.cryptosuites import eddsa_jcs_2022
from app.credentials.cryptosuites.base import ProofCheckFailed
from app.credentials.engine import (
    MIN_STATUS_LIST_BITS,
    STATUS_LIST_CREDENTIAL_TYPE,
    STATUS_LIST_TYPE,
    encode_bitstring,
)
from app.credentials.errors import StatusEntryNotFound, StatusListNotFound, StatusTransitionRefused
from app.credentials.models import (
    ACTIVE,
    REVOCATION,
    REVOKED,
    SUSPENDED,
    SUSPENSION,
    CredentialStatusLink,
    IssuerKey,
    StatusEntry,
    StatusList,
)
from app.credentials.settings import CredentialSettings
from app.db import isoformat, utcnow
from app.errors import ServiceUnavailable
from app.extensions import db
from app.multiformats import encode_multikey
from app.security import decrypt, encrypt
from app.settings import current

CREDENTIALS_V2 = "https://www.w3.org/ns/credentials/v2"
KEY_PURPOSE = "credentials.issuer_key"
LIST_PATH = "/status/lists/"
_ALLOCATION_ATTEMPTS = 16
_ALLOWED_STATUSES = {REVOCATION: {ACTIVE, REVOKED}, SUSPENSION: {ACTIVE, SUSPENDED}}


def list_size() -> int:
    """Bits per list (`STATUS_LIST_SIZE`, never below 131072, a multiple of 8)."""
    size = max(current(CredentialSettings).status_list_size, MIN_STATUS_LIST_BITS)
    return size + (-size % 8)


def list_ttl_seconds() -> int:
    """How long verifiers may cache a list (`STATUS_LIST_TTL_SECONDS`, default 300)."""
    return max(current(CredentialSettings).status_list_ttl_seconds, 0)


def status_list_url(list_id: str) -> str:
    """The public URL of a list credential."""
    return f"{current_app.config['BASE_URL']}{LIST_PATH}{list_id}"


def _issuer_signing_key() -> tuple[str, ed25519.Ed25519PrivateKey]:
    """(did:key, private key) of the service's issuer key, created on first use."""
    key = db.session.execute(select(IssuerKey).order_by(IssuerKey.id).limit(1)).scalar_one_or_none()
    if key is not None:
        private = ed25519.Ed25519PrivateKey.from_private_bytes(decrypt(key.private_key_encrypted, KEY_PURPOSE))
        return key.did, private
    private = ed25519.Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    did = "did:key:" + encode_multikey("Ed25519", public)
    seed = private.private_bytes_raw()
    db.session.add(IssuerKey(did=did, private_key_encrypted=encrypt(seed, KEY_PURPOSE), created_at=utcnow()))
    db.session.flush()
    return did, private


def service_signing_key() -> tuple[str, ed25519.Ed25519PrivateKey]:
    """(did:key, private key) of the service's own issuer key (status lists, vouched credentials)."""
    return _issuer_signing_key()


def issuer_did() -> str:
    """The DID the service signs its status lists with (a did:key of an Ed25519 key)."""
    return _issuer_signing_key()[0]


def _sign_list(status_list: StatusList) -> None:
    """Rebuild the list's bitstring from its entries and store the freshly signed credential."""
    bits = bytearray(status_list.size // 8)
    flagged = db.session.execute(
        select(StatusEntry.list_index).where(StatusEntry.list_id == status_list.id, StatusEntry.status != ACTIVE)
    ).scalars()
    for index in flagged:
        bits[index // 8] |= 0x80 >> (index % 8)
    did, private = _issuer_signing_key()
    now = utcnow()
    url = status_list_url(status_list.id)
    credential = {
        "@context": [CREDENTIALS_V2],
        "id": url,
        "type": ["VerifiableCredential", STATUS_LIST_CREDENTIAL_TYPE],
        "issuer": did,
        "validFrom": isoformat(now.replace(microsecond=0)),
        "credentialSubject": {
            "id": f"{url}#list",
            "type": STATUS_LIST_TYPE,
            "statusPurpose": status_list.purpose,
            "encodedList": encode_bitstring(bytes(bits)),
            "ttl": list_ttl_seconds() * 1000,
        },
    }
    multikey = did.removeprefix("did:key:")
    signed = eddsa_jcs_2022.sign(credential, private_key=private, verification_method=f"{did}#{multikey}", created=now)
    status_list.credential_json = json.dumps(signed, separators=(",", ":"), ensure_ascii=False)
    status_list.signed_at = now


def _open_list(purpose: str) -> StatusList:
    """The newest list for `purpose` that is less than half full, or a new one."""
    size = list_size()
    filled = (
        select(StatusList.id, func.count(StatusEntry.id).label("used"))
        .outerjoin(StatusEntry, StatusEntry.list_id == StatusList.id)
        .where(StatusList.purpose == purpose, StatusList.size == size)
        .group_by(StatusList.id, StatusList.created_at)
        .order_by(StatusList.created_at.desc())
        .limit(1)
    )
    row = db.session.execute(filled).first()
    if row is not None and row.used < size // 2:
        return db.session.get(StatusList, row.id)
    status_list = StatusList(id=str(uuid.uuid4()), purpose=purpose, size=size, created_at=utcnow())
    db.session.add(status_list)
    db.session.flush()
    _sign_list(status_list)
    return status_list


def allocate_status_entry(client_id: int, purpose: str) -> StatusEntry:
    """A new active entry at a random free index of a hosted list for `purpose`, owned by `client_id`."""
    status_list = _open_list(purpose)
    for _ in range(_ALLOCATION_ATTEMPTS):
        index = secrets.randbelow(status_list.size)
        taken = db.session.execute(
            select(StatusEntry.id).where(StatusEntry.list_id == status_list.id, StatusEntry.list_index == index)
        ).first()
        if taken is not None:
            continue
        now = utcnow()
        entry = StatusEntry(
            id=str(uuid.uuid4()),
            list_id=status_list.id,
            list_index=index,
            purpose=purpose,
            client_id=client_id,
            status=ACTIVE,
            created_at=now,
            updated_at=now,
        )
        try:
            with db.session.begin_nested():
                db.session.add(entry)
        except IntegrityError:  # a concurrent allocation took the same index
            continue
        return entry
    raise ServiceUnavailable("No free status list index was found; try again.")


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MAX_LIST_INDEX = 2**31 - 1


def is_hosted_id(value: str) -> bool:
    """Whether `value` has the shape of a list or entry id the service issues (a lower-case UUID).

    Anything else names nothing, so it is refused before a query (PostgreSQL cannot even
    compare a text holding NUL).
    """
    return bool(_UUID.match(value))


def require_status_entry(entry_id: str, client_ids: set[int]) -> StatusEntry:
    """The entry if one of `client_ids` owns it; `StatusEntryNotFound` otherwise."""
    entry = db.session.get(StatusEntry, entry_id) if is_hosted_id(entry_id) else None
    if entry is None or entry.client_id not in client_ids:
        raise StatusEntryNotFound("No such status entry.")
    return entry


def set_entry_status(entry_id: str, client_ids: set[int], status: str) -> tuple[StatusEntry, list[int]]:
    """Revoke, suspend or reinstate an entry; re-signs its list.

    Returns the entry and the ids of stored credentials linked to it whose verification must be
    re-run when the status changed. Raises `StatusEntryNotFound`, `StatusTransitionRefused`
    (revocation is final; each purpose allows only its own status).
    """
    entry = require_status_entry(entry_id, client_ids)
    if status not in _ALLOWED_STATUSES[entry.purpose]:
        allowed = " or ".join(sorted(_ALLOWED_STATUSES[entry.purpose]))
        raise StatusTransitionRefused(f"A {entry.purpose} entry can only be {allowed}.")
    if entry.status == REVOKED and status != REVOKED:
        raise StatusTransitionRefused("A revoked entry stays revoked.")
    if entry.status == status:
        return entry, []
    status_list = db.session.execute(
        select(StatusList).where(StatusList.id == entry.list_id).with_for_update()
    ).scalar_one()
    entry.status = status
    entry.updated_at = utcnow()
    db.session.flush()
    _sign_list(status_list)
    linked = db.session.execute(
        select(CredentialStatusLink.credential_id).where(CredentialStatusLink.entry_id == entry.id)
    ).scalars()
    return entry, list(linked)


def credential_status_of(entry: StatusEntry) -> dict[str, str]:
    """The `BitstringStatusListEntry` an issuer puts into `credentialStatus` before signing."""
    url = status_list_url(entry.list_id)
    return {
        "id": f"{url}#{entry.list_index}",
        "type": "BitstringStatusListEntry",
        "statusPurpose": entry.purpose,
        "statusListIndex": str(entry.list_index),
        "statusListCredential": url,
    }


def entry_view(entry: StatusEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "status": entry.status,
        "credentialStatus": credential_status_of(entry),
        "created_at": isoformat(entry.created_at),
        "updated_at": isoformat(entry.updated_at),
    }


def require_list_credential(list_id: str) -> str:
    """The signed list credential as JSON text; `StatusListNotFound` otherwise."""
    status_list = db.session.get(StatusList, list_id) if is_hosted_id(list_id) else None
    if status_list is None or status_list.credential_json is None:
        raise StatusListNotFound("No such status list.")
    return status_list.credential_json


def hosted_list_id(url: str) -> str | None:
    """The list id when `url` is one of the service's list URLs, else None."""
    prefix = status_list_url("")
    if not isinstance(url, str) or not url.startswith(prefix):
        return None
    list_id = url[len(prefix) :]
    return list_id if list_id and "/" not in list_id and "#" not in list_id else None


def local_status_bit(url: str, index: int, purpose: str) -> bool | None:
    """Whether bit `index` of a hosted list is set (read from the database); None when not hosted.

    Raises `ProofCheckFailed("status_check_failed")` for an unknown list, a purpose that does
    not match, or an index outside the list.
    """
    list_id = hosted_list_id(url)
    if list_id is None:
        return None
    if index > MAX_LIST_INDEX:
        raise ProofCheckFailed("status_check_failed", f"statusListIndex {index} is outside the status list")
    row = None
    if is_hosted_id(list_id):
        row = db.session.execute(
            select(StatusList.purpose, StatusList.size, StatusEntry.status)
            .outerjoin(StatusEntry, (StatusEntry.list_id == StatusList.id) & (StatusEntry.list_index == index))
            .where(StatusList.id == list_id)
        ).first()
    if row is None:
        raise ProofCheckFailed("status_check_failed", f"status list {url} does not exist")
    if row.purpose != purpose:
        raise ProofCheckFailed("status_check_failed", f"the status list at {url} is not for {purpose}")
    if index >= row.size:
        raise ProofCheckFailed("status_check_failed", f"statusListIndex {index} is outside the status list")
    return row.status is not None and row.status != ACTIVE


def hosted_entries_of(vc: dict) -> list[StatusEntry]:
    """The service's own entries named in a vc's `credentialStatus`."""
    statuses = vc.get("credentialStatus")
    found: list[StatusEntry] = []
    for status in statuses if isinstance(statuses, list) else [statuses]:
        if not isinstance(status, dict):
            continue
        list_id = hosted_list_id(status.get("statusListCredential"))
        index = status.get("statusListIndex")
        if list_id is None or not is_hosted_id(list_id) or not _is_list_index(index):
            continue
        entry = db.session.execute(
            select(StatusEntry).where(StatusEntry.list_id == list_id, StatusEntry.list_index == int(index))
        ).scalar_one_or_none()
        if entry is not None and entry not in found:
            found.append(entry)
    return found


def _is_list_index(value: Any) -> bool:
    return isinstance(value, str) and value.isascii() and value.isdigit() and int(value) <= MAX_LIST_INDEX
