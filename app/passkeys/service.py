"""Use cases of passkeys: the WebAuthn ceremonies (py_webauthn) and a user's list of passkeys.

Every ceremony requires user verification; registration asks for a discoverable credential and no
attestation. The caller keeps each ceremony's challenge (bound to its browser) and hands it back
once: these functions never store one. Functions flush but never commit.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from sqlalchemy import delete, func, or_, select, update
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, WebAuthnException
from webauthn.helpers.parse_authentication_credential_json import parse_authentication_credential_json
from webauthn.helpers.parse_registration_credential_json import parse_registration_credential_json
from webauthn.helpers.structs import (
    AttestationConveyancePreference,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from app.db import utcnow
from app.extensions import db
from app.passkeys.errors import LastPasskeyRequired, PasskeyNotFound, PasskeyRefused
from app.passkeys.models import Passkey
from app.passkeys.settings import PasskeySettings
from app.settings import current
from app.tenancy.models import POLICY_PASSKEY_SECOND_FACTOR, Client
from app.users.models import User

log = logging.getLogger(__name__)

_TIMEOUT_MS = 120_000
_MAX_CREDENTIAL_JSON = 64 * 1024
_NAME_LENGTH = 64


@dataclass(frozen=True)
class PasskeySignIn:
    """A verified assertion: whose passkey it was, and its RFC 8176 methods (`hwk` or `swk`, and `user`)."""

    user_id: int
    passkey_id: int
    amr: tuple[str, ...]


def _settings() -> PasskeySettings:
    return current(PasskeySettings)


def _origins() -> list[str]:
    return _settings().origins.split()


def _user_handle(user_id: int) -> bytes:
    """An opaque, stable WebAuthn user handle: no e-mail address or id in clear on the authenticator."""
    return hashlib.sha256(f"tessera-user:{current(PasskeySettings).rp_id}:{user_id}".encode()).digest()[:32]


def _descriptors(passkeys: list[Passkey]) -> list[PublicKeyCredentialDescriptor]:
    known = {transport.value for transport in AuthenticatorTransport}
    return [
        PublicKeyCredentialDescriptor(
            id=base64url_to_bytes(passkey.credential_id),
            transports=[AuthenticatorTransport(t) for t in passkey.transports or [] if t in known] or None,
        )
        for passkey in passkeys
    ]


def list_passkeys(user_id: int) -> list[Passkey]:
    """The user's passkeys, oldest first."""
    statement = select(Passkey).where(Passkey.user_id == user_id).order_by(Passkey.created_at, Passkey.id)
    return list(db.session.execute(statement).scalars())


def count_passkeys(user_id: int) -> int:
    return db.session.execute(select(func.count(Passkey.id)).where(Passkey.user_id == user_id)).scalar_one()


def registration_options(user: User) -> tuple[str, str]:
    """Options for `navigator.credentials.create()` (JSON) and their challenge (base64url)."""
    settings = _settings()
    options = generate_registration_options(
        rp_id=settings.rp_id,
        rp_name=settings.rp_name,
        user_id=_user_handle(user.id),
        user_name=user.email_address,
        user_display_name=user.email_address,
        timeout=_TIMEOUT_MS,
        attestation=AttestationConveyancePreference.NONE,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=_descriptors(list_passkeys(user.id)),
    )
    return options_to_json(options), bytes_to_base64url(options.challenge)


def add_passkey(user: User, credential: str, challenge: str, name: str | None = None) -> Passkey:
    """Verify the answer to `registration_options` and store the new passkey of `user`.

    Raises `PasskeyRefused` when the answer does not verify (wrong challenge, origin or RP id, no
    user verification) or names a credential already registered.
    """
    if not credential or len(credential) > _MAX_CREDENTIAL_JSON:
        raise PasskeyRefused("No passkey was sent.")
    try:
        parsed = parse_registration_credential_json(credential)
        verified = verify_registration_response(
            credential=parsed,
            expected_challenge=base64url_to_bytes(challenge),
            expected_rp_id=_settings().rp_id,
            expected_origin=_origins(),
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, KeyError, TypeError) as refused:
        raise PasskeyRefused(f"The passkey could not be verified: {refused}") from None
    credential_id = bytes_to_base64url(verified.credential_id)
    if db.session.execute(select(Passkey.id).where(Passkey.credential_id == credential_id)).first() is not None:
        raise PasskeyRefused("This passkey is already registered.")
    known = {transport.value for transport in AuthenticatorTransport}
    passkey = Passkey(
        user_id=user.id,
        credential_id=credential_id,
        public_key=verified.credential_public_key,
        sign_count=verified.sign_count,
        aaguid=verified.aaguid,
        backup_eligible=verified.credential_device_type.value == "multi_device",
        transports=[t.value for t in parsed.response.transports or [] if t.value in known],
        name=(name or "").strip()[:_NAME_LENGTH] or f"Passkey {count_passkeys(user.id) + 1}",
        created_at=utcnow(),
    )
    db.session.add(passkey)
    db.session.flush()
    return passkey


def authentication_options(user_id: int | None = None) -> tuple[str, str]:
    """Options for `navigator.credentials.get()` (JSON) and their challenge (base64url).

    Without a user the options name no credential, so the authenticator offers its discoverable
    ones (the login page's "Sign in with a passkey"); with one, only that user's passkeys.
    """
    allowed = _descriptors(list_passkeys(user_id)) if user_id is not None else None
    options = generate_authentication_options(
        rp_id=_settings().rp_id,
        timeout=_TIMEOUT_MS,
        allow_credentials=allowed,
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return options_to_json(options), bytes_to_base64url(options.challenge)


def verify_passkey(
    credential: str, challenge: str, *, root_client_id: int | None, user_id: int | None = None
) -> PasskeySignIn:
    """Verify an assertion answering `authentication_options` and record the passkey's use.

    The passkey must belong to an enabled user (of the tree rooted at `root_client_id` when given,
    the account page's sign-in taking any tree's), and be `user_id`'s when given; the user must
    have been verified. A signature counter that does not move forward (a cloned authenticator, or
    a replay) is refused and logged. Raises `PasskeyRefused`.
    """
    if not credential or len(credential) > _MAX_CREDENTIAL_JSON:
        raise PasskeyRefused("No passkey was sent.")
    try:
        parsed = parse_authentication_credential_json(credential)
    except (WebAuthnException, ValueError, KeyError, TypeError):
        raise PasskeyRefused("The passkey answer is malformed.") from None
    statement = (
        select(Passkey)
        .join(User, User.id == Passkey.user_id)
        .where(Passkey.credential_id == bytes_to_base64url(parsed.raw_id), User.disabled_at.is_(None))
    )
    if root_client_id is not None:
        statement = statement.where(User.root_client_id == root_client_id)
    if user_id is not None:
        statement = statement.where(Passkey.user_id == user_id)
    passkey = db.session.execute(statement).scalar_one_or_none()
    if passkey is None:
        raise PasskeyRefused("This passkey is not registered for this application.")
    try:
        verified = verify_authentication_response(
            credential=parsed,
            expected_challenge=base64url_to_bytes(challenge),
            expected_rp_id=_settings().rp_id,
            expected_origin=_origins(),
            credential_public_key=passkey.public_key,
            credential_current_sign_count=passkey.sign_count,
            require_user_verification=True,
        )
    except InvalidAuthenticationResponse as refused:
        if "sign count" in str(refused):
            log.warning(
                "passkey %s of user %s: signature counter did not advance (stored %s); possibly a cloned "
                "authenticator, sign-in refused",
                passkey.id,
                passkey.user_id,
                passkey.sign_count,
            )
        raise PasskeyRefused(f"The passkey could not be verified: {refused}") from None
    except (WebAuthnException, ValueError, KeyError, TypeError) as refused:
        raise PasskeyRefused(f"The passkey could not be verified: {refused}") from None
    _record_use(passkey, verified.new_sign_count)
    return PasskeySignIn(passkey.user_id, passkey.id, ("swk" if passkey.backup_eligible else "hwk", "user"))


def _record_use(passkey: Passkey, new_count: int) -> None:
    """Store the new counter only if it still advances (or both stay 0, as synced passkeys report):
    of two concurrent uses of one assertion, the second finds the counter moved and is refused."""
    moved = db.session.execute(
        update(Passkey)
        .where(
            Passkey.id == passkey.id,
            or_(Passkey.sign_count < new_count, (Passkey.sign_count == 0) & (new_count == 0)),
        )
        .values(sign_count=new_count, last_used_at=utcnow())
        .execution_options(synchronize_session=False)
    ).rowcount
    if not moved:
        log.warning("passkey %s of user %s: signature counter raced; sign-in refused", passkey.id, passkey.user_id)
        raise PasskeyRefused("The passkey could not be verified: its signature counter did not advance.")


def remove_passkey(user_id: int, passkey_id: int) -> None:
    """Remove one of the user's passkeys.

    Raises `PasskeyNotFound` when the user has no such passkey, and `LastPasskeyRequired` when it is
    the user's last and their client tree requires a passkey at every sign-in.
    """
    passkey = db.session.execute(
        select(Passkey).where(Passkey.id == passkey_id, Passkey.user_id == user_id)
    ).scalar_one_or_none()
    if passkey is None:
        raise PasskeyNotFound("You have no such passkey.")
    if count_passkeys(user_id) <= 1 and _tree_requires_passkey(user_id):
        raise LastPasskeyRequired("This is your last passkey, and signing in here requires one: add another first.")
    db.session.execute(delete(Passkey).where(Passkey.id == passkey.id))
    db.session.flush()


def _tree_requires_passkey(user_id: int) -> bool:
    policy = db.session.execute(
        select(Client.sign_in_policy).join(User, User.root_client_id == Client.id).where(User.id == user_id)
    ).scalar_one_or_none()
    return policy == POLICY_PASSKEY_SECOND_FACTOR
