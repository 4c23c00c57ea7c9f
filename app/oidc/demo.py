"""The newcomer's demo sign-in: one demo organisation per instance, made by the first `clients demo`
and found again by the next, with a user to sign in as."""

from __future__ import annotations

from dataclasses import dataclass

from app.tenancy import service as tenancy
from app.tenancy.models import Client
from app.users.service import create_user_in, find_user_by_email

DEMO_NAME = "Demo organisation"
# A loopback address nothing listens on: after the sign-in the browser shows the code in its address bar.
DEMO_REDIRECT_URI = "http://127.0.0.1:8400/callback"


@dataclass(frozen=True)
class DemoSignIn:
    """The demo organisation and its user; `api_token` only when this call made the organisation."""

    client_id: int
    client_secret: str
    api_token: str | None
    user_id: int
    email_address: str
    did: str

    @property
    def created(self) -> bool:
        return self.api_token is not None


def ensure_demo_sign_in(email: str) -> DemoSignIn:
    """The demo organisation (made when none exists) with a user of address `email` (made when missing).

    An existing organisation answers with the same client secret; its API token was shown once,
    when it was made. Flushes, never commits.
    """
    client = _find_demo_organisation()
    api_token = None
    if client is None:
        client, secret = tenancy.create_master_client(DEMO_NAME, redirect_uris=[DEMO_REDIRECT_URI])
        api_token = tenancy.issue_api_token(client.id, name="demo").plaintext
    else:
        secret = tenancy.sealed_client_secret(client) or tenancy.issue_client_secret(client).client_secret
    user = find_user_by_email(client.id, email) or create_user_in(
        client.id, client.id, {"email_address": email, "first_name": "Ada", "last_name": "Lovelace"}
    )
    return DemoSignIn(client.id, secret, api_token, user.id, user.email_address, user.did)


def _find_demo_organisation() -> Client | None:
    for client in tenancy.list_enabled_masters_named(DEMO_NAME):
        if list(client.redirect_uris or []) == [DEMO_REDIRECT_URI]:
            return client
    return None
