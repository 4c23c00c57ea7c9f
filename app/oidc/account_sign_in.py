"""Use cases of the account page's own sign-in, begun without an application (the home page's "Sign in").

Nothing names the client tree up front, so the first step finds the account: a passkey (whose user
is known), or the e-mail code, one code mailed for every account of the address (the person then
picks one, when there are several). From there the sign-in goes on as an authorization request of
that tree's master client, through the same steps as any other (`authorize.complete_sign_in`: the
tree's policy, the passkey step, the session) and ends on the account page. The answers never tell
whether an address has an account. Functions flush but never commit.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import timedelta
from email.utils import formataddr

from sqlalchemy import select

from app.db import as_utc, utcnow
from app.extensions import db
from app.oidc import acr, authorize
from app.oidc.authorize import Outcome
from app.oidc.errors import AuthorizationPageError
from app.oidc.mail import send_mail
from app.oidc.models import AccountSignIn
from app.oidc.service import get_relying_party
from app.oidc.settings import OidcSettings
from app.passkeys import service as passkey_service
from app.passkeys.errors import PasskeyRefused
from app.security import hash_secret, random_token
from app.settings import current
from app.tenancy.models import Client
from app.tenancy.settings import TenancySettings
from app.users.models import User
from app.users.service import find_enabled_users_by_email

_RESTART = "Too many sign-in attempts. Start the sign-in again."


@dataclass(frozen=True)
class Account:
    """An account the sign-in may go on with: its user and the master client of its tree."""

    user: User
    root: Client


@dataclass(frozen=True)
class Step:
    """What the page shows next: a message (an error or not), its status, and, once the code proved
    the address, the accounts to pick from."""

    sign_in: AccountSignIn
    message: str | None = None
    error: bool = False
    status: int = 200
    accounts: list[Account] = field(default_factory=list)


@dataclass(frozen=True)
class Continued:
    """The sign-in goes on as an authorization request (its handle), at the step `outcome` names."""

    handle: str
    outcome: Outcome


def start(browser_hash: str) -> tuple[AccountSignIn, str]:
    """A new sign-in of this browser, and its handle."""
    handle = random_token(32)
    now = utcnow()
    sign_in = AccountSignIn(
        handle_hash=_handle_hash(handle),
        browser_hash=browser_hash,
        login_code_attempts=0,
        login_code_sends=0,
        created_at=now,
        expires_at=now + timedelta(seconds=current(OidcSettings).auth_request_ttl),
    )
    db.session.add(sign_in)
    db.session.flush()
    return sign_in, handle


def require(handle: str | None, browser_hash: str) -> AccountSignIn:
    """The sign-in behind `handle` in this browser; AuthorizationPageError when gone or foreign."""
    sign_in = (
        db.session.execute(select(AccountSignIn).where(AccountSignIn.handle_hash == _handle_hash(handle))).scalar()
        if handle
        else None
    )
    if (
        sign_in is None
        or as_utc(sign_in.expires_at) <= utcnow()
        or not secrets.compare_digest(sign_in.browser_hash, browser_hash)
    ):
        raise AuthorizationPageError(
            "This sign-in page has expired. Start the sign-in again.",
            code="request_expired",
            detail="The sign-in handle is unknown, expired, or was started in another browser.",
        )
    return sign_in


def passkey_options(sign_in: AccountSignIn) -> str:
    """Options of "Sign in with a passkey" (any of the browser's passkeys for this service); the
    ceremony's challenge replaces the previous one."""
    options, sign_in.passkey_challenge = passkey_service.authentication_options()
    db.session.flush()
    return options


def send_code(sign_in: AccountSignIn, email: str) -> Step:
    """Mail one code to `email` for every account it has (the same answer whether it has any)."""
    address = authorize.login_address(email)
    if address is None:
        return Step(sign_in, "Enter a valid e-mail address.", error=True, status=400)
    if sign_in.login_code_attempts >= current(OidcSettings).login_code_attempts:
        return Step(sign_in, _RESTART, error=True, status=429)
    refused = authorize.count_code_send(sign_in, address)
    if refused is not None:
        return Step(sign_in, refused, error=True, status=429)
    code = authorize.new_login_code()
    sign_in.email = address
    sign_in.login_code_hash = _code_hash(sign_in, code)
    sign_in.login_code_expires_at = utcnow() + timedelta(seconds=current(OidcSettings).login_code_ttl)
    sign_in.code_passed_at = None
    accounts = accounts_of(address)
    if accounts:
        names = ", ".join(account.root.name for account in accounts)
        minutes = current(OidcSettings).login_code_ttl // 60
        send_mail(
            to=address,
            sender=formataddr(("Tessera", current(TenancySettings).mail_default_from)),
            subject=f"Your sign-in code: {code}",
            text=(
                f"Your code to sign in to your account ({names}) is {code}.\n\n"
                f"It is valid for {minutes} minutes. If you did not try to sign in, ignore this message.\n"
            ),
        )
    db.session.flush()
    return Step(sign_in, f"If an account exists for {address}, we sent a code to it.")


def check_code(sign_in: AccountSignIn, code: str) -> Step | Continued:
    """Check the code: a Step to show again (a refusal, or the accounts to pick from), or the sign-in
    going on with the address's one account. Every attempt counts, before the code is compared."""
    if sign_in.login_code_hash is None or sign_in.login_code_expires_at is None:
        return Step(sign_in, "Request a new code to sign in.", error=True, status=400)
    if as_utc(sign_in.login_code_expires_at) <= utcnow():
        return Step(sign_in, "This code has expired. Request a new code.", error=True, status=400)
    if not authorize.count_sign_in_attempt(sign_in):
        return Step(sign_in, _RESTART, error=True, status=429)
    submitted = "".join((code or "").split())
    accounts = accounts_of(sign_in.email or "")
    if not secrets.compare_digest(_code_hash(sign_in, submitted), sign_in.login_code_hash) or not accounts:
        left = current(OidcSettings).login_code_attempts - sign_in.login_code_attempts
        message = f"That code is not right. {left} attempt{'s' if left != 1 else ''} left." if left else _RESTART
        return Step(sign_in, message, error=True, status=400)
    sign_in.login_code_hash = None
    if len(accounts) == 1:
        return _go_on(sign_in, accounts[0], (acr.OTP,))
    sign_in.code_passed_at = utcnow()
    db.session.flush()
    return Step(sign_in, accounts=accounts)


def choose(sign_in: AccountSignIn, user_id: str) -> Step | Continued:
    """Go on with the account the person picked, once the code proved its address."""
    accounts = accounts_of(sign_in.email or "") if sign_in.code_passed_at is not None else []
    chosen = next((account for account in accounts if str(account.user.id) == user_id), None)
    if chosen is None:
        return Step(sign_in, "Choose one of your accounts.", error=True, status=400, accounts=accounts)
    return _go_on(sign_in, chosen, (acr.OTP,))


def check_passkey(sign_in: AccountSignIn, credential: str) -> Step | Continued:
    """Check a passkey answer: the sign-in goes on with its account when that account's tree lets a
    passkey sign in on its own. Every answer counts against the sign-in's attempts."""
    if not authorize.count_sign_in_attempt(sign_in):
        return Step(sign_in, _RESTART, error=True, status=429)
    challenge = authorize.take_passkey_challenge(sign_in)
    if challenge is None:
        return Step(sign_in, "This passkey request has expired. Try again.", error=True)
    try:
        verified = passkey_service.verify_passkey(credential, challenge, root_client_id=None)
    except PasskeyRefused:
        return Step(sign_in, "That passkey was not accepted. Try again.", error=True)
    account = _account(db.session.get(User, verified.user_id))
    if account is None:
        return Step(sign_in, "That passkey was not accepted. Try again.", error=True)
    policy = authorize.sign_in_policy(account.root)
    if not acr.passkey_alone_allowed(policy):
        first = "with your e-mail address first" if acr.passkeys_allowed(policy) else "with your e-mail address"
        return Step(sign_in, f"{account.root.name} asks you to sign in {first}.", error=True)
    return _go_on(sign_in, account, verified.amr)


def accounts_of(address: str) -> list[Account]:
    """The accounts of `address` that may sign in: enabled users of trees whose master client is enabled."""
    found = (_account(user) for user in find_enabled_users_by_email(address)) if address else ()
    return [account for account in found if account is not None]


def _account(user: User | None) -> Account | None:
    root = get_relying_party(str(user.root_client_id)) if user is not None and user.disabled_at is None else None
    return Account(user, root) if root is not None else None


def _go_on(sign_in: AccountSignIn, account: Account, methods: tuple[str, ...]) -> Continued:
    """Hand the sign-in over to an authorization request of the account's tree, which takes the
    step just passed (and, where the tree's policy asks for it, the passkey step after it)."""
    request, handle = authorize.account_request(account.root, sign_in.browser_hash, sign_in.email)
    request.candidate_user_id = account.user.id
    db.session.delete(sign_in)
    db.session.flush()
    return Continued(handle, authorize.complete_sign_in(request, account.root, account.user.id, methods))


def _handle_hash(handle: str | None) -> str:
    return hash_secret("account-sign-in:" + (handle or ""))


def _code_hash(sign_in: AccountSignIn, code: str) -> str:
    return hash_secret(f"account-login:{sign_in.id}:{code}")
