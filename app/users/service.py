"""Users: creation within a client tree, lookups, and the DID document of a user."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask, current_app
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.db import utcnow
from app.dids.documents import user_document
from app.dids.method import new_network_did
from app.errors import NotFound
from app.extensions import db
from app.tenancy.caller import Caller
from app.tenancy.models import Client
from app.users.errors import EmailAddressTaken, UserReferenceAmbiguous
from app.users.models import User

# Ends a disabled user's sign-in sessions and revokes what they granted; how many sessions ended.
AccessEnder = Callable[[int], int]
_ACCESS_ENDER = "tessera.users.access_ender"


def normalise_email(email: str) -> str:
    return email.strip().lower()


def create_user(caller: Caller, profile: dict) -> User:
    """Create a user in the caller's acting node from a validated profile (see `ProfileSchema`).

    Flushes, never commits. Raises `EmailAddressTaken` (409) when the e-mail address is already
    registered anywhere in the caller's client tree.
    """
    return create_user_in(caller.acting_client_id, caller.root_id, profile)


def create_user_in(client_id: int, root_client_id: int, profile: dict) -> User:
    """Create a user belonging to `client_id` of the tree rooted at `root_client_id` (see `create_user`).

    Flushes, never commits; raises `EmailAddressTaken` (409).
    """
    profile = {**profile, "email_address": normalise_email(profile["email_address"])}
    email = profile["email_address"]
    if find_user_by_email(root_client_id, email) is not None:
        raise EmailAddressTaken("A user with this e-mail address already exists in this client tree.")
    user = User(
        client_id=client_id,
        root_client_id=root_client_id,
        email_address=email,
        did=new_network_did(),
        profile=profile,
        created_at=utcnow(),
    )
    try:
        with db.session.begin_nested():
            db.session.add(user)
    except IntegrityError as exc:  # a concurrent request registered the same address first
        raise EmailAddressTaken("A user with this e-mail address already exists in this client tree.") from exc
    return user


def get_user_in_tree(user_id: int, root_client_id: int) -> User | None:
    """The user with this id if it was created anywhere in the tree rooted at `root_client_id`."""
    user = db.session.get(User, user_id)
    if user is None or user.root_client_id != root_client_id:
        return None
    return user


def get_enabled_user_in_tree(user_id: int, root_client_id: int) -> User | None:
    """Like `get_user_in_tree`, but None for a user an operator disabled."""
    user = get_user_in_tree(user_id, root_client_id)
    return user if user is not None and user.disabled_at is None else None


def require_user_by_reference(reference: str) -> User:
    """The user named by an operator: a decimal user id, or an e-mail address unique across trees.

    Raises `NotFound` (404) when none matches and `UserReferenceAmbiguous` (409) when the address
    belongs to users of several client trees (name the user by id then).
    """
    if reference.isdecimal():
        user = db.session.get(User, int(reference)) if len(reference) <= 18 else None
        if user is None:
            raise NotFound(f"No user {reference}.")
        return user
    users = (
        db.session.execute(select(User).where(User.email_address == normalise_email(reference)).order_by(User.id))
        .scalars()
        .all()
    )
    if not users:
        raise NotFound(f"No user with the e-mail address {normalise_email(reference)}.")
    if len(users) > 1:
        ids = ", ".join(str(user.id) for user in users)
        raise UserReferenceAmbiguous(f"Several users have this e-mail address (ids {ids}); name one by its id.")
    return users[0]


def register_access_ender(app: Flask, ender: AccessEnder) -> None:
    """Have `disable_user` call `ender(user_id)`: the sign-in feature ends what the user signed in to."""
    app.extensions[_ACCESS_ENDER] = ender


def disable_user(user: User) -> tuple[bool, int]:
    """Disable the user everywhere: sign-in refused, sign-in sessions ended (with their back-channel
    logouts) and refresh-token families revoked by the registered `AccessEnder`, and access tokens
    issued until now refused for good, even after `enable_user`.

    Returns (whether the user was enabled until now, how many sessions ended). An already disabled
    user keeps the original time; what they may still hold is ended again. Flushes, never commits.
    """
    changed = user.disabled_at is None
    if changed:
        user.disabled_at = user.tokens_valid_after = utcnow()
        db.session.flush()
    ended = current_app.extensions[_ACCESS_ENDER](user.id)
    return changed, ended


def enable_user(user: User) -> bool:
    """Let a disabled user sign in again (tokens and sessions ended by the disable stay ended).
    False if the user was not disabled. Flushes, never commits."""
    if user.disabled_at is None:
        return False
    user.disabled_at = None
    db.session.flush()
    return True


def require_user_visible(user_id: int, subtree_path: str) -> User:
    """The user with this id if it belongs to a client within `subtree_path`; else `NotFound` (404)."""
    statement = (
        select(User)
        .join(Client, Client.id == User.client_id)
        .where(User.id == user_id, Client.path.startswith(subtree_path, autoescape=True))
    )
    user = db.session.execute(statement).scalar_one_or_none()
    if user is None:
        raise NotFound("No such user.")
    return user


def find_user_by_email(root_client_id: int, email: str) -> User | None:
    """The user of the tree rooted at `root_client_id` with this e-mail address (case-insensitive)."""
    statement = select(User).where(User.root_client_id == root_client_id, User.email_address == normalise_email(email))
    return db.session.execute(statement).scalar_one_or_none()


def find_enabled_users_by_email(email: str) -> list[User]:
    """The enabled users with this e-mail address (case-insensitive) in every tree, oldest first."""
    statement = (
        select(User).where(User.email_address == normalise_email(email), User.disabled_at.is_(None)).order_by(User.id)
    )
    return list(db.session.execute(statement).scalars())


def find_user_by_did(did: str) -> User | None:
    """The user whose DID is `did`, in any tree."""
    return db.session.execute(select(User).where(User.did == did)).scalar_one_or_none()


def user_did_document(did: str) -> dict | None:
    """A minimal DID document for a user DID (no verification methods), or None if unknown."""
    if find_user_by_did(did) is None:
        return None
    return user_document(did)
