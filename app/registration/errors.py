"""Errors of dynamic client registration: RFC 7591 §3.2.2 bodies (`{error, error_description}`),
the shape registration clients parse; a bad bearer token answers RFC 6750 `invalid_token`."""

from __future__ import annotations

from app.oidc.errors import OAuthError


class InvalidClientMetadata(OAuthError):
    error = "invalid_client_metadata"


class InvalidRedirectUri(OAuthError):
    error = "invalid_redirect_uri"


class InvalidRegistrationToken(OAuthError):
    """The initial or registration access token is missing, unknown, expired or revoked (RFC 6750 §3.1).

    The same answer whether or not the client it would manage exists (RFC 7592 §2).
    """

    status, error = 401, "invalid_token"

    def __init__(self, description: str = "The access token is missing, invalid or expired.") -> None:
        challenge = f'Bearer realm="tessera", error="invalid_token", error_description="{description}"'
        super().__init__(description, headers={"WWW-Authenticate": challenge})
