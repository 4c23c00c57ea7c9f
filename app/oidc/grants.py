"""What a token may read: the one gate between a relying party and a user's data.

A client receives what its registration offers and the user consented to, never what a scope
alone asks for. The interface's clients send only `scope=openid`; with it a client receives
`user_id`, its own mapped claims (`id_token_claims`, released as `app_claims`) and the credential
list (`credentials`, while its registration `reads_credentials`), once the user has allowed them
on the consent page. Standard scopes (`profile`, `email`, ...) add their claims when asked for.
A request that names `app_claims` or `credentials` narrows the release to the ones it names.
A pairwise client (`subjects.is_pairwise`) is never offered the credential list: the stored
credentials name the user's DID in their signed subject, which it must not learn.

Consent is bound to what the page showed: the mapped claims by the digest of the mapping, so a
changed mapping releases nothing until the user allows it again. Userinfo, the id_token, the
credential list and the credentials issued to a user's token all ask this module.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from sqlalchemy import select

from app.db import utcnow
from app.extensions import db
from app.oidc import subjects
from app.oidc.claims import (
    APP_CLAIMS_SCOPE,
    CREDENTIALS_SCOPE,
    SCOPE_CLAIMS,
    RequestedClaims,
    application_claims,
    claim_items,
    claims_for_scopes,
    mapping_fingerprint,
    selected_claims,
    standard_claims,
)
from app.oidc.errors import InsufficientScope, PairwiseSubjectRefused
from app.oidc.models import Consent

RELEASE_ITEMS = (APP_CLAIMS_SCOPE, CREDENTIALS_SCOPE)
NO_CLAIMS = RequestedClaims()


class Registration(Protocol):
    """What the gate reads of a client: its id, claim mapping, whether it reads credentials, and
    its subjects (`subjects.Subjected`)."""

    id: int
    id_token_claims: dict | None
    reads_credentials: bool | None
    subject_type: str | None
    sector_identifier: str | None


class RememberedConsent(Protocol):
    """What the gate reads of a remembered consent (`Consent`, or its columns read with a code)."""

    scope: str
    claims_fingerprint: str | None


class Holder(Protocol):
    """What the gate reads of a user."""

    id: int
    profile: dict | None
    email_address: str | None


def requested_items(
    client: Registration, scopes: Iterable[str], claims: RequestedClaims = NO_CLAIMS
) -> tuple[str, ...]:
    """What a request with `scopes` (and the `claims` parameter's `claims`) asks the user to release
    to `client`, in order.

    The scopes themselves, then `app_claims` when the client maps claims and `credentials` when
    its registration reads credentials (a request naming either of these narrows to those named),
    then `claim:<name>` for each claim asked for one by one that no requested scope releases.
    """
    scopes = list(dict.fromkeys(scopes))
    named = [scope for scope in scopes if scope in RELEASE_ITEMS]
    items = [scope for scope in scopes if scope not in RELEASE_ITEMS]
    offered = {
        APP_CLAIMS_SCOPE: bool(client.id_token_claims),
        CREDENTIALS_SCOPE: client.reads_credentials is not False and not subjects.is_pairwise(client),
    }
    items.extend(item for item in RELEASE_ITEMS if offered[item] and (not named or item in named))
    items.extend(claim_items(claims, scopes))
    return tuple(items)


def mapping_digest(client: Registration) -> str:
    """The digest of the client's current claim mapping, which consent to `app_claims` is bound to."""
    return mapping_fingerprint(client.id_token_claims or {})


def shown_digest(client: Registration, items: Iterable[str]) -> str:
    """The digest of what the consent page shows: the items and, with `app_claims`, the mapping."""
    items = sorted(items)
    mapping = client.id_token_claims if APP_CLAIMS_SCOPE in items else {}
    return mapping_fingerprint({"items": " ".join(items), "mapping": mapping or {}})


def _consent(user_id: int, client_id: int) -> Consent | None:
    return db.session.execute(
        select(Consent).where(Consent.user_id == user_id, Consent.client_id == client_id)
    ).scalar_one_or_none()


def _still_consented(consent: RememberedConsent | None, client: Registration, items: Iterable[str]) -> set[str]:
    """The items among `items` that the remembered consent covers today."""
    if consent is None:
        return set()
    allowed = set(consent.scope.split()) & set(items)
    if APP_CLAIMS_SCOPE in allowed and not (
        consent.claims_fingerprint and hmac.compare_digest(consent.claims_fingerprint, mapping_digest(client))
    ):
        allowed.discard(APP_CLAIMS_SCOPE)
    return allowed


def consent_covers(
    user_id: int, client: Registration, scopes: Iterable[str], claims: RequestedClaims = NO_CLAIMS
) -> bool:
    """Whether the remembered consent covers everything a request with `scopes` and `claims` would release."""
    items = requested_items(client, scopes, claims)
    return set(items) <= _still_consented(_consent(user_id, client.id), client, items)


def record_consent(
    user_id: int, client: Registration, scopes: Iterable[str], claims: RequestedClaims = NO_CLAIMS
) -> None:
    """Remember that the user allowed what a request with `scopes` and `claims` releases (flushes, never commits)."""
    items = requested_items(client, scopes, claims)
    consent = _consent(user_id, client.id)
    if consent is None:
        consent = Consent(user_id=user_id, client_id=client.id, scope="", granted_at=utcnow())
        db.session.add(consent)
    kept = set(consent.scope.split()) - ({APP_CLAIMS_SCOPE} if APP_CLAIMS_SCOPE in items else set())
    consent.scope = " ".join(sorted(kept | set(items)))
    consent.granted_at = utcnow()
    if APP_CLAIMS_SCOPE in items:
        consent.claims_fingerprint = mapping_digest(client)
    db.session.flush()


@dataclass(frozen=True)
class Grant:
    """What one token of `client` may read of `user`: the scopes it carries, the consented items,
    and the standard claims its request asked for one by one for this read (`claims`), which
    the user allowed before its code was issued."""

    client: Registration
    user: Holder
    scopes: tuple[str, ...]
    items: frozenset[str]
    claims: tuple[str, ...] = ()

    def allows(self, item: str) -> bool:
        """Whether the token may read `item`: a standard scope, `app_claims` or `credentials`."""
        return item in self.items

    def require(self, item: str) -> None:
        """InsufficientScope (403) unless the token may read `item`; PairwiseSubjectRefused (403) for
        the credential list of a pairwise client, which is never offered it."""
        if self.allows(item):
            return
        if item == CREDENTIALS_SCOPE and subjects.is_pairwise(self.client):
            raise PairwiseSubjectRefused(
                "A pairwise client does not read the user's stored credentials: each names the user's DID."
            )
        raise InsufficientScope(item)

    def application_claims(self) -> dict:
        """The client's mapped claims the user allowed, else `{}`."""
        if not self.allows(APP_CLAIMS_SCOPE):
            return {}
        return application_claims(self.client.id_token_claims or {}, self.user.profile or {}, self.user.email_address)

    def requested_claims(self, names: Iterable[str]) -> dict:
        """The standard claims `names` the request asked for one by one, that the profile holds."""
        return selected_claims(standard_claims(self.user.profile or {}, self.user.email_address), names)

    def userinfo(self) -> dict:
        """The OpenID userinfo document: mapped claims, the standard claims of the scopes and of the
        `claims` parameter, the subject."""
        document = self.application_claims()
        standard = standard_claims(self.user.profile or {}, self.user.email_address)
        document.update(claims_for_scopes(self.scopes, standard))
        document.update(selected_claims(standard, self.claims))
        return document


def grant_for(client: Registration, user: Holder, scopes: Iterable[str], claims: Iterable[str] = ()) -> Grant:
    """What a token of `client` for `user` with `scopes` (and the standard `claims` its request asked
    for at this read) may read today.

    Standard scopes were consented to before the token's code was issued; the client's mapped
    claims and the credential list are checked against the remembered consent at every read, so a
    changed mapping or a registration that stopped reading credentials releases nothing more.
    """
    grant = grant_of_consent(client, user, scopes, _consent(user.id, client.id))
    return replace(grant, claims=tuple(claims))


def grant_of_consent(
    client: Registration, user: Holder, scopes: Iterable[str], consent: RememberedConsent | None
) -> Grant:
    """`grant_for` with the remembered consent (None: none) already read, as a code's redemption
    reads it in its one statement (`Consent`'s columns)."""
    scopes = tuple(scopes)
    items = requested_items(client, scopes)
    standard = {scope for scope in items if scope in SCOPE_CLAIMS or scope == "openid"}
    consented = _still_consented(consent, client, [i for i in items if i in RELEASE_ITEMS])
    return Grant(client=client, user=user, scopes=scopes, items=frozenset(standard | consented))
