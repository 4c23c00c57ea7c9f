"""Request authentication by OpenID access token: the HTTP edge of `service.verify_access_token`.

Routes of any feature that serve a user through a relying party call `require_grant` with what
they release (the gate of `app.oidc.grants`), or `require_bearer_token` when they release nothing;
a route that names the user by id in its path (`/v1/user/{id}/...`) calls `require_user_by_id`,
which refuses a pairwise client whatever the id.
A DPoP-bound token (RFC 9449) is accepted only as `Authorization: DPoP` with a proof of its key,
and a Bearer token never under that scheme: this module is the one place that decides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from flask import g, request

from app.errors import NotFound
from app.oidc import dpop, subjects
from app.oidc.errors import (
    DpopNonceRequired,
    DpopProofRefused,
    DpopTokenRefused,
    InvalidBearerToken,
    MissingBearerToken,
    PairwiseSubjectRefused,
)
from app.oidc.grants import Grant
from app.oidc.service import token_grant, verify_access_token
from app.oidc.settings import OidcSettings
from app.oidc.tokens import AccessTokenClaims
from app.settings import current

FORM = "application/x-www-form-urlencoded"
_SCHEMES = ("bearer", "dpop")


@dataclass(frozen=True, slots=True)
class PresentedToken:
    """An access token as the request presented it: `scheme` is `bearer` or `dpop`."""

    scheme: str
    token: str


def presents_access_token() -> bool:
    """Whether the request's `Authorization` presents an access token (`Bearer <token>` or `DPoP <token>`)."""
    return request.headers.get("Authorization", "").lower().startswith(tuple(f"{scheme} " for scheme in _SCHEMES))


def presented_token() -> PresentedToken:
    """The access token of this request: `Authorization: Bearer` or `DPoP`, or a form `access_token`
    (RFC 6750 §2.2, a Bearer token).

    Raises MissingBearerToken (401 with `WWW-Authenticate: Bearer`) when there is none.
    """
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in _SCHEMES and value.strip():
        return PresentedToken(scheme.lower(), value.strip())
    if request.method == "POST" and request.mimetype == FORM:
        form_token = request.form.get("access_token", "")
        if form_token:
            return PresentedToken("bearer", form_token)
    raise MissingBearerToken("Send the access token as `Authorization: Bearer <token>`.")


def request_urls() -> tuple[str]:
    """The URL this request's endpoint is known by (without query), which a DPoP proof's `htu` and
    a client assertion's `aud` may name: under the issuer's origin (the configured `BASE_URL` unless
    `OIDC_ISSUER` says otherwise), as discovery publishes it.

    Never one built from the request's `Host`: the caller chooses that header, so a proof made for
    `http://evil.example/...` and sent with `Host: evil.example` would pass as made for this server.
    """
    issuer = urlsplit(current(OidcSettings).issuer)
    return (f"{issuer.scheme}://{issuer.netloc}{request.path}",)


def require_bearer_token() -> AccessTokenClaims:
    """Authenticate this request by its access token of a user.

    Checks signature (published keys only, algorithm allow-list), `typ`, `iss`, `aud`, `exp`, the
    `jti` deny-list, that the client still exists, that the token is a user's, and how it is
    presented (`require_sender`). Raises MissingBearerToken / InvalidBearerToken / DpopTokenRefused
    (401 with a `WWW-Authenticate` challenge). The claims are also left in `flask.g.access_token`.
    """
    presented = presented_token()
    claims = verify_access_token(presented.token)
    require_sender(claims, presented)
    if claims.user_id is None:
        raise InvalidBearerToken("This endpoint serves a user: a client_credentials token has none.")
    g.access_token = claims
    return claims


def require_sender(claims: AccessTokenClaims, presented: PresentedToken) -> None:
    """A DPoP-bound token comes as `DPoP` with a proof of its key (RFC 9449 §7), signed for this
    request and the token (`ath`), used once; any other token as `Bearer`.

    Raises DpopTokenRefused, DpopProofRefused or DpopNonceRequired (with the current `DPoP-Nonce`).
    Records the proof's jti in the request's unit of work (which must be one that writes).
    """
    algorithms = dpop.PROOF_ALGORITHMS
    if presented.scheme != "dpop":
        if claims.jkt is not None:
            raise DpopTokenRefused(
                "This access token is DPoP-bound: present it as `Authorization: DPoP` with a proof.",
                algorithms=algorithms,
            )
        return
    if claims.jkt is None:
        raise DpopTokenRefused(
            "This access token is not DPoP-bound: present it as `Authorization: Bearer`.", algorithms=algorithms
        )
    try:
        proof = dpop.check_proof(
            request.headers.getlist("DPoP"), method=request.method, urls=request_urls(), access_token=presented.token
        )
        if proof.jkt != claims.jkt:
            raise dpop.ProofInvalid("The DPoP proof is signed by another key than the one the token is bound to.")
        dpop.remember(proof)
    except dpop.ProofInvalid as refused:
        if refused.use_nonce:
            raise DpopNonceRequired(str(refused), algorithms=algorithms, nonce=dpop.current_nonce()) from None
        raise DpopProofRefused(str(refused), algorithms=algorithms) from None


def require_grant(item: str) -> tuple[AccessTokenClaims, Grant]:
    """`require_bearer_token`, then the gate: what the token may read must include `item` (a
    standard scope, `app_claims` or `credentials`), else InsufficientScope (403)."""
    claims = require_bearer_token()
    grant = token_grant(claims)
    grant.require(item)
    return claims, grant


def require_user_by_id(path_user_id: int, item: str | None = None) -> AccessTokenClaims:
    """Authenticate a request for the user its path names by id (`/v1/user/{id}/...`): the token
    must be that user's (another id answers NotFound, whether or not it exists), and may read `item`
    when given (the gate).

    A pairwise client knows its users only by its own `sub`: whatever the id, even its user's, it
    gets PairwiseSubjectRefused (403) before the id is looked at, so neither the answer nor what is
    released (a credential naming the DID) tells it a user id.
    """
    claims = require_bearer_token()
    grant = token_grant(claims)
    if subjects.is_pairwise(grant.client):
        raise PairwiseSubjectRefused(
            "A pairwise client is not told user ids: it cannot ask for a user by id, nor be given what names "
            "the user by id or DID."
        )
    if item is not None:
        grant.require(item)
    if path_user_id != claims.user_id:
        raise NotFound("No such user.")
    return claims
