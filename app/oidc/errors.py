"""Errors of the OpenID provider.

The token, revocation and introspection endpoints answer RFC 6749 §5.2 bodies
(`{error, error_description}`) because OAuth clients parse them; `OAuthError` and its subclasses
carry that shape. Bearer-protected resources raise domain errors (problem+json) with the RFC 6750
`WWW-Authenticate` challenge. Authorization pages render `AuthorizationPageError` as HTML.
"""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request

from app.db import commit_before_the_edge
from app.errors import DomainError


class OAuthError(Exception):
    """An RFC 6749 error response.

    An error rolls the request back, unless `keep_changes` is set: then what was recorded before it
    (a revoked token family) is committed with `commit_before_the_edge` before answering.
    """

    status = 400
    error = "invalid_request"

    def __init__(self, description: str, *, keep_changes: bool = False, headers: dict | None = None) -> None:
        super().__init__(description)
        self.description = description
        self.keep_changes = keep_changes
        self.headers = headers or {}

    def body(self) -> dict[str, str]:
        return {"error": self.error, "error_description": self.description}


class InvalidRequest(OAuthError):
    error = "invalid_request"


class UnsupportedBodyType(InvalidRequest):
    """A token-side request whose body is neither JSON nor a form: RFC 6749 shape, HTTP 415."""

    status = 415


class BodyTooLarge(InvalidRequest):
    """A token-side request whose body exceeds the size limit: RFC 6749 shape, HTTP 413."""

    status = 413


class InvalidClient(OAuthError):
    """Client authentication failed: 401, with a `Basic` challenge only when the request used Basic
    (RFC 6749 §5.2; the token-side edge adds it). The description never says whether the client
    exists or how it authenticates."""

    status, error = 401, "invalid_client"

    def __init__(self, description: str = "Client authentication failed.", **kwargs: Any) -> None:
        super().__init__(description, **kwargs)


class UnauthorizedClient(OAuthError):
    """The client is authenticated but its registration does not allow this grant (RFC 6749 §5.2)."""

    error = "unauthorized_client"


class InvalidGrant(OAuthError):
    error = "invalid_grant"


class InvalidScope(OAuthError):
    error = "invalid_scope"


class UnsupportedGrantType(OAuthError):
    error = "unsupported_grant_type"


class UnsupportedTokenType(OAuthError):
    error = "unsupported_token_type"


class AuthorizationPending(OAuthError):
    """RFC 8628 §3.5: the user has not decided yet; the device keeps polling."""

    error = "authorization_pending"


class SlowDown(OAuthError):
    """RFC 8628 §3.5: the device polled before its interval was over, which is now five seconds longer."""

    error = "slow_down"


class AccessDenied(OAuthError):
    """RFC 8628 §3.5: the user denied the device authorization."""

    error = "access_denied"


class ExpiredToken(OAuthError):
    """RFC 8628 §3.5: the device code expired before the user decided; the device starts again."""

    error = "expired_token"


class InvalidDpopProof(OAuthError):
    """A DPoP proof at the token endpoint is missing where required, malformed, stale or replayed (RFC 9449 §5)."""

    error = "invalid_dpop_proof"


class UseDpopNonce(OAuthError):
    """The DPoP proof lacks the server's current nonce, given in the `DPoP-Nonce` header (RFC 9449 §8)."""

    error = "use_dpop_nonce"

    def __init__(self, description: str, *, nonce: str) -> None:
        super().__init__(description, headers={"DPoP-Nonce": nonce})


def dpop_challenge(error: str, description: str, algorithms: tuple[str, ...]) -> str:
    """An RFC 9449 §7.1 `WWW-Authenticate: DPoP` challenge."""
    reason = description.replace('"', "'")
    return f'DPoP realm="tessera", error="{error}", error_description="{reason}", algs="{" ".join(algorithms)}"'


class DpopTokenRefused(DomainError):
    """A resource refuses how a token was presented: a DPoP-bound token as Bearer, a bearer token
    as DPoP, or a proof that does not hold (401 with a `DPoP` challenge, RFC 9449 §7.1)."""

    status, code, title = 401, "invalid_token", "Invalid access token"

    def __init__(
        self, detail: str, *, algorithms: tuple[str, ...], error: str = "invalid_token", **kwargs: Any
    ) -> None:
        challenge = dpop_challenge(error, detail, algorithms)
        super().__init__(detail, headers={"WWW-Authenticate": challenge, **kwargs.pop("headers", {})}, **kwargs)


class DpopProofRefused(DpopTokenRefused):
    code = "invalid_dpop_proof"

    def __init__(self, detail: str, *, algorithms: tuple[str, ...]) -> None:
        super().__init__(detail, algorithms=algorithms, error=self.code)


class DpopNonceRequired(DpopTokenRefused):
    """The proof lacks the current nonce; the answer's `DPoP-Nonce` gives it (RFC 9449 §9)."""

    code = "use_dpop_nonce"

    def __init__(self, detail: str, *, algorithms: tuple[str, ...], nonce: str) -> None:
        super().__init__(detail, algorithms=algorithms, error=self.code, headers={"DPoP-Nonce": nonce})


class InvalidBearerToken(DomainError):
    status, code, title = 401, "invalid_token", "Invalid access token"

    def __init__(self, detail: str | None = None, **kwargs: Any) -> None:
        reason = (detail or self.title).replace('"', "'")
        challenge = f'Bearer realm="tessera", error="invalid_token", error_description="{reason}"'
        super().__init__(detail, headers={"WWW-Authenticate": challenge}, **kwargs)


class MissingBearerToken(DomainError):
    status, code, title = 401, "unauthorized", "Access token required"

    def __init__(self, detail: str | None = None, **kwargs: Any) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": 'Bearer realm="tessera"'}, **kwargs)


class InsufficientScope(DomainError):
    status, code, title = 403, "insufficient_scope", "Insufficient scope"

    def __init__(self, scope: str, **kwargs: Any) -> None:
        challenge = f'Bearer realm="tessera", error="insufficient_scope", scope="{scope}"'
        super().__init__(
            f"The access token lacks the {scope!r} scope.", headers={"WWW-Authenticate": challenge}, **kwargs
        )


class PairwiseSubjectRefused(DomainError):
    """A pairwise client is told neither the user id nor the DID: it cannot name a user by id, nor
    read what names the user by them (stored credentials whose subject is the DID)."""

    status, code, title = 403, "pairwise_subject", "Not available to a pairwise client"


class AuthorizationPageError(Exception):
    """The authorization request cannot go on and must not redirect: shown as an HTML error page.

    `message` speaks to the person; `code` (an RFC 6749 style error code) and `detail` (which
    parameter was wrong, and how) help the developer of the application.
    """

    def __init__(
        self,
        message: str,
        status: int = 400,
        *,
        code: str = "invalid_request",
        detail: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.detail = detail
        self.retry_after = retry_after


class AuthorizationRedirectError(Exception):
    """An error to send back to the client's (already validated) redirect_uri, per RFC 6749 §4.1.2.1.

    `location` is that redirect, filled in by the validation that knows the redirect_uri.
    """

    def __init__(self, error: str, description: str, *, location: str | None = None) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.location = location


def oauth_error_headers(error: OAuthError, basic: bool) -> dict[str, str]:
    """The headers of an RFC 6749 error answer (both doors): never cached, and a `Basic` challenge
    to a client that failed to authenticate with Basic."""
    headers = dict(error.headers)
    if isinstance(error, InvalidClient) and basic:
        headers["WWW-Authenticate"] = 'Basic realm="tessera"'
    return {**headers, "Cache-Control": "no-store", "Pragma": "no-cache"}


def oauth_error_response(error: OAuthError) -> Response:
    """The RFC 6749 §5.2 answer to `error` in a Flask view, for every OAuth endpoint (the token,
    revocation, introspection and registration endpoints)."""
    if error.keep_changes:
        commit_before_the_edge("an OAuth error whose recorded changes (a revoked token family) must stand")
    response = jsonify(error.body())
    response.status_code = error.status
    auth = request.authorization
    response.headers.update(oauth_error_headers(error, auth is not None and auth.type == "basic"))
    return response
