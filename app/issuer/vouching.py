"""Credentials the service itself vouches for: a user's verified e-mail address, linked accounts.

They are signed (eddsa-rdfc-2022) with the service's own Ed25519 key, the did:key that also
signs the hosted status lists, so any verifier can check them without trusting a tenant.
An e-mail address counts as verified by a login: every access token comes from a login that
proved control of the address with a mailed code. A social account counts as verified by the
platform's sign-in that linked it. Functions flush, never commit.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from app.credentials import status_lists
from app.credentials.cryptosuites import eddsa_rdfc_2022
from app.db import isoformat, utcnow
from app.errors import NotFound
from app.extensions import db
from app.issuer.service import CREDENTIALS_V2, suite_context
from app.social.errors import SocialLinkNotFound
from app.social.models import LINKED, SocialLink
from app.social.service import require_platform
from app.tenancy.caller import Caller
from app.users.models import User
from app.users.service import require_user_visible

# The terms of these credentials (their types, email, platform, accountId, ...) live in this vocabulary.
VOCABULARY = {"@vocab": "https://tessera.dev/ns/credentials#"}
EMAIL_TYPE = "VerifiedEmailAddressCredential"
SOCIAL_TYPE = "LinkedSocialAccountCredential"


def _sign(user: User, kind: str, subject: dict[str, Any]) -> str:
    did, private = status_lists.service_signing_key()
    now = utcnow().replace(microsecond=0)
    credential = {
        "@context": [CREDENTIALS_V2, VOCABULARY],
        "id": f"urn:uuid:{uuid.uuid4()}",
        "type": ["VerifiableCredential", kind],
        "issuer": did,
        "validFrom": isoformat(now),
        "credentialSubject": {"id": user.did, **subject},
    }
    multikey = did.removeprefix("did:key:")
    signed = eddsa_rdfc_2022.sign(
        credential, private_key=private, verification_method=f"{did}#{multikey}", created=now, ctx=suite_context()
    )
    return json.dumps(signed, separators=(",", ":"), ensure_ascii=False)


def email_credential(user_id: int, authenticated_at: int) -> str:
    """A credential that the user controls their e-mail address, as JSON text.

    `authenticated_at` (Unix time) is when the login behind the caller's access token proved it.
    """
    user = db.session.get(User, user_id)
    verified_at = datetime.fromtimestamp(authenticated_at, UTC)
    return _sign(user, EMAIL_TYPE, {"email": user.email_address, "verifiedAt": isoformat(verified_at)})


def social_account_credential(user: User, platform: str) -> str:
    """A credential about the user's linked account on `platform`, as JSON text.

    Raises `SocialLinkNotFound` (404) unless the link exists and is not broken.
    """
    require_platform(platform)
    link = db.session.execute(
        select(SocialLink).where(SocialLink.user_id == user.id, SocialLink.platform == platform)
    ).scalar_one_or_none()
    if link is None or link.status != LINKED:
        raise SocialLinkNotFound(f"The user has no working {platform} link.")
    subject: dict[str, Any] = {
        "platform": link.platform,
        "accountId": link.account_id,
        "verifiedAt": isoformat(link.linked_at),
    }
    if link.account_name:
        subject["accountName"] = link.account_name
    return _sign(user, SOCIAL_TYPE, subject)


def user_of_token(user_id: int) -> User:
    """The user of a verified access token (`auth.require_user_by_id`); NotFound when gone since."""
    user = db.session.get(User, user_id)
    if user is None:
        raise NotFound("No such user.")
    return user


def user_for_client(caller: Caller, user_id: int) -> User:
    """A user of the caller's acting subtree; `NotFound` (404) otherwise."""
    return require_user_visible(user_id, caller.acting_path)
