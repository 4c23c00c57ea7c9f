"""reCAPTCHA v3 check of the login form, for clients that enable it.

The client's secret is stored encrypted (`app.security.encrypt(secret, RECAPTCHA_SECRET_PURPOSE)`)
in `Client.recaptcha_secret_encrypted`. The verify URL is `RECAPTCHA_VERIFY_URL`, so tests and
air-gapped deployments can point it at a local service speaking the same protocol.
"""

from __future__ import annotations

import logging

from app.db import end_reads
from app.oidc import outbound
from app.oidc.settings import OidcSettings
from app.security import decrypt
from app.settings import current
from app.tenancy.models import Client

log = logging.getLogger(__name__)

RECAPTCHA_SECRET_PURPOSE = "recaptcha-secret"
LOGIN_ACTION = "login"


def recaptcha_passes(client: Client, response_token: str | None, remote_ip: str | None) -> bool:
    """True when the token verifies, is for the login action and scores at least the client's threshold.

    Fails closed: a missing token, an unreadable secret or an unreachable verifier refuse the login.
    Ends the caller's read transaction before calling the verifier (it must hold no changes); the
    call takes at most `OUTBOUND_DEADLINE` seconds.
    """
    if not response_token or not client.recaptcha_secret_encrypted:
        return False
    try:
        secret = decrypt(client.recaptcha_secret_encrypted, RECAPTCHA_SECRET_PURPOSE).decode()
    except ValueError:
        log.error("reCAPTCHA secret of client %s cannot be decrypted", client.id)
        return False
    form = {"secret": secret, "response": response_token}
    if remote_ip:
        form["remoteip"] = remote_ip
    threshold = client.recaptcha_threshold if client.recaptcha_threshold is not None else 0.5
    end_reads("reCAPTCHA is verified with no transaction open")
    try:
        result = outbound.request("POST", current(OidcSettings).recaptcha_verify_url, data=form, configured=True).json()
    except (outbound.OutboundRefused, ValueError) as exc:
        log.warning("reCAPTCHA verification unavailable: %s", exc)
        return False
    if not isinstance(result, dict) or result.get("success") is not True:
        return False
    if result.get("action", LOGIN_ACTION) != LOGIN_ACTION:
        return False
    try:
        score = float(result.get("score", 0.0))
    except (TypeError, ValueError):
        return False
    return score >= threshold
