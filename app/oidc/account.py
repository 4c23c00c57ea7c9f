"""Use cases of the hosted account page: the signed-in user lists, adds and removes passkeys.

The page is reached with the browser's single sign-on session, and only with one whose sign-in is
finished under its tree's sign-in policy: a sign-in still waiting for its passkey step sees no
account, registers no passkey and removes none. A passkey registration's challenge is kept on that
session and serves one answer. Functions flush but never commit.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import update
from sqlalchemy.orm.attributes import set_committed_value

from app.errors import DomainError
from app.extensions import db
from app.oidc import acr
from app.oidc.authorize import find_live_session, session_amr, sign_in_policy
from app.oidc.errors import AuthorizationPageError
from app.oidc.models import LoginSession
from app.passkeys import service as passkey_service
from app.passkeys.models import Passkey
from app.tenancy.models import Client
from app.users.models import User
from app.users.service import get_enabled_user_in_tree

# The pages of a signed-in person, as (endpoint, title): linked from the home page and from each
# other. A page of another feature (the connected agents page) is added here, and only here.
ACCOUNT_PAGES: tuple[tuple[str, str], ...] = (("oidc_pages.account_page", "Your account and passkeys"),)


@dataclass(frozen=True)
class Account:
    """The signed-in user of this browser, their session and their client tree's master client."""

    session: LoginSession
    user: User
    client: Client


def find_account(session_token: str | None) -> Account | None:
    """The account of this browser's session; None when not signed in, or when the session's sign-in
    does not meet its tree's sign-in policy (a policy that now asks more than the session passed, or
    a session from before sign-ins were checked against it)."""
    session = find_live_session(session_token)
    user = get_enabled_user_in_tree(session.user_id, session.root_client_id) if session is not None else None
    client = db.session.get(Client, session.root_client_id) if session is not None else None
    if (
        session is None
        or user is None
        or client is None
        or client.disabled_at is not None
        or not acr.sign_in_complete(sign_in_policy(client), session_amr(session))
    ):
        return None
    return Account(session, user, client)


def require_account(session_token: str | None) -> Account:
    """`find_account`, or AuthorizationPageError (401) when there is none."""
    found = find_account(session_token)
    if found is None:
        raise AuthorizationPageError(
            "Sign in first; then this page shows your account and passkeys.",
            status=401,
            code="login_required",
            detail="The account page needs a signed-in browser.",
        )
    return found


def passkeys_of(account: Account) -> list[Passkey]:
    return passkey_service.list_passkeys(account.user.id)


def start_registration(account: Account) -> str:
    """Options of a new passkey registration; its challenge replaces the session's previous one."""
    options, account.session.passkey_challenge = passkey_service.registration_options(account.user)
    db.session.flush()
    return options


def finish_registration(account: Account, credential: str, name: str | None) -> str | None:
    """Verify and store the passkey answering `start_registration`; None, or why it was refused."""
    challenge = account.session.passkey_challenge
    taken = (
        challenge is not None
        and db.session.execute(
            update(LoginSession)
            .where(LoginSession.id == account.session.id, LoginSession.passkey_challenge == challenge)
            .values(passkey_challenge=None)
            .execution_options(synchronize_session=False)
        ).rowcount
    )
    set_committed_value(account.session, "passkey_challenge", None)
    if not taken:
        return "This passkey request has expired. Try again."
    try:
        passkey_service.add_passkey(account.user, credential, challenge, name)
    except DomainError as refused:
        return refused.detail
    return None


def remove_passkey(account: Account, passkey_id: str) -> str | None:
    """Remove one of the user's passkeys; None, or why it was refused."""
    if not passkey_id.isdecimal():
        return "You have no such passkey."
    try:
        passkey_service.remove_passkey(account.user.id, int(passkey_id))
    except DomainError as refused:
        return refused.detail
    return None
