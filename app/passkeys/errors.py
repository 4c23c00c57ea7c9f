"""Refusals of passkey ceremonies and of passkey management."""

from __future__ import annotations

from app.errors import DomainError


class PasskeyRefused(DomainError):
    status, code, title = 400, "passkey_refused", "Passkey refused"


class PasskeyNotFound(DomainError):
    status, code, title = 404, "passkey_not_found", "No such passkey"


class LastPasskeyRequired(DomainError):
    status, code, title = 409, "last_passkey_required", "The last passkey is required"
