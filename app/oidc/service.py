"""Use cases of the token side: client authentication, code exchange, access-token checks, userinfo,
revocation and introspection. Functions flush but never commit; the edge commits.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from sqlalchemy import Update, and_, bindparam, func, not_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from app.db import as_utc, utcnow
from app.dialect import DriverStatement
from app.errors import NotFound
from app.extensions import db
from app.oidc import client_auth, device, dpop, grants, keys, refresh, subjects, tokens
from app.oidc.claims import RequestedClaims, parse_scope
from app.oidc.client_auth import (
    SECRET_METHODS,
    ClientAuthenticator,
    PresentedCredentials,
    authenticate,
    get_client_by_id,
    parse_client_id,
)
from app.oidc.errors import (
    InvalidBearerToken,
    InvalidDpopProof,
    InvalidGrant,
    InvalidRequest,
    InvalidScope,
    OAuthError,
    UnauthorizedClient,
    UnsupportedGrantType,
    UseDpopNonce,
)
from app.oidc.models import AuthorizationCode, Consent, LoginSession, RefreshToken, RevokedToken
from app.oidc.settings import OidcSettings
from app.oidc.tokens import AccessTokenClaims, TokenInvalid
from app.security import hash_secret, secret_hash_candidates
from app.settings import current
from app.tenancy.models import DEVICE_CODE_GRANT, GRANT_TYPES, Client
from app.tenancy.service import enabled_client_clause
from app.users.models import User
from app.users.service import get_enabled_user_in_tree

TOKEN_TYPE = "Bearer"
DPOP_TOKEN_TYPE = "DPoP"


def client_alg(client: Client | _TokenClient) -> str:
    """The JWS algorithm of this client's id_tokens and logout tokens (`OIDC_DEFAULT_ALG` unless it chose one)."""
    alg = client.signing_alg or current(OidcSettings).default_alg
    return alg if alg in keys.ALGORITHMS else "RS256"


def access_token_alg(client: Client | _TokenClient) -> str:
    """The JWS algorithm of this client's access tokens: its `access_token_signed_response_alg`,
    else that of its id_tokens."""
    alg = client.access_token_signed_response_alg
    return alg if alg in keys.ALGORITHMS else client_alg(client)


def get_relying_party(client_id: str | None) -> Client | None:
    """The enabled client whose OpenID `client_id` (decimal id) is given, else None."""
    return get_client_by_id(client_id)


def deny_token(jti: str, expires_at: datetime, reason: str) -> None:
    """Put a token on the deny-list (idempotent: a second revocation of one jti is a no-op)."""
    values = {"jti": jti, "expires_at": expires_at, "revoked_at": utcnow(), "reason": reason}
    dialect = db.session.get_bind().dialect.name
    if dialect == "postgresql":
        statement = postgresql.insert(RevokedToken).values(**values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        statement = sqlite.insert(RevokedToken).values(**values).on_conflict_do_nothing()
    else:
        if db.session.get(RevokedToken, jti) is None:
            db.session.add(RevokedToken(**values))
            db.session.flush()
        return
    db.session.execute(statement)


def is_revoked(jti: str) -> bool:
    return db.session.execute(select(RevokedToken.jti).where(RevokedToken.jti == jti)).first() is not None


@dataclass(frozen=True)
class TokenResponse:
    scope: str
    access_token: str
    expires_in: int
    id_token: str | None = None
    refresh_token: str | None = None
    token_type: str = TOKEN_TYPE

    def as_dict(self) -> dict:
        body = {
            "scope": self.scope,
            "token_type": self.token_type,
            "access_token": self.access_token,
            "expire_in": self.expires_in,
            "expires_in": self.expires_in,
        }
        if self.id_token is not None:
            body["id_token"] = self.id_token
        if self.refresh_token is not None:
            body["refresh_token"] = self.refresh_token
        return body


Authenticator = ClientAuthenticator


def supported_grant_types() -> tuple[str, ...]:
    """The grants the token endpoint offers: every one, but the device grant only while `OIDC_DEVICE_FLOW` is on."""
    if current(OidcSettings).device_flow:
        return GRANT_TYPES
    return tuple(grant for grant in GRANT_TYPES if grant != DEVICE_CODE_GRANT)


def require_grant_type(client: Client, grant_type: str) -> None:
    """UnauthorizedClient (RFC 6749 §5.2) unless the client's registration enables `grant_type`."""
    if grant_type not in client.allowed_grant_types:
        raise UnauthorizedClient(f"This client may not use the {grant_type} grant.")


def grant_token(values: dict[str, str], authenticate: Authenticator, proof: dpop.Proof | None = None) -> TokenResponse:
    """The token endpoint: dispatch on `grant_type`; `authenticate` proves the client when called;
    `proof` (`token_request_proof`) binds the access token to its key.

    Raises InvalidRequest / UnsupportedGrantType before anything is read; a proven client whose
    registration does not enable the grant gets UnauthorizedClient; see each grant. A proof used
    before raises InvalidDpopProof, which rolls the grant back.
    """
    grant_type = values.get("grant_type")
    if grant_type == "authorization_code":
        issued = exchange_code(
            authenticate,
            code=values.get("code"),
            redirect_uri=values.get("redirect_uri"),
            code_verifier=values.get("code_verifier"),
            proof=proof,
        )
    elif grant_type == "refresh_token":
        issued = refresh_grant(
            authenticate, refresh_token=values.get("refresh_token"), scope=values.get("scope"), proof=proof
        )
    elif grant_type == "client_credentials":
        client = authenticate()
        require_grant_type(client, grant_type)
        issued = client_credentials_grant(client, scope=values.get("scope"), jkt=dpop_binding(client, proof))
    elif grant_type == DEVICE_CODE_GRANT and grant_type in supported_grant_types():
        issued = device_code_grant(authenticate, device_code=values.get("device_code"), proof=proof)
    elif not grant_type:
        raise InvalidRequest("grant_type is required.")
    else:
        raise UnsupportedGrantType(f"grant_type must be one of {', '.join(supported_grant_types())}.")
    if proof is not None:
        remember_proof(proof)
    return issued


def start_device_authorization(authenticate: Authenticator, scope: str | None) -> dict:
    """RFC 8628 §3.1-3.2: a device code and a user code for the client `authenticate` proves, which
    must have the device grant.

    NotFound (404) while `OIDC_DEVICE_FLOW` is off, before the client is read; a pairwise client whose
    sector came from its redirect URIs gets UnauthorizedClient (`subjects`). `scope` defaults to
    `openid` and must include it (InvalidScope); unknown scopes are dropped as at the authorization
    endpoint. Flushes; the edge commits.
    """
    if DEVICE_CODE_GRANT not in supported_grant_types():
        raise NotFound("The device authorization grant is turned off.")
    client = authenticate()
    require_grant_type(client, DEVICE_CODE_GRANT)
    subjects.require_sector_for_redirectless_grant(client)
    scopes = parse_scope(scope or "openid")
    if "openid" not in scopes:
        raise InvalidScope("The scope must include openid.")
    return device.issue(client, scopes).as_dict()


@dataclass(frozen=True)
class _AccessStamp:
    """When a new access token is issued, its id and when it expires: the refresh token issued with
    it records the same `jti` and expiry, so revoking the family denies the access token too."""

    issued_at: int
    jti: str
    expires_at: datetime

    @classmethod
    def new(cls) -> _AccessStamp:
        issued_at = int(time.time())
        expires_at = datetime.fromtimestamp(issued_at + current(OidcSettings).access_token_ttl, UTC)
        return cls(issued_at, uuid.uuid4().hex, expires_at)


def device_code_grant(
    authenticate: Authenticator, *, device_code: str | None, proof: dpop.Proof | None = None
) -> TokenResponse:
    """RFC 8628 §3.4: redeem an approved device code once, for the tokens the code flow would issue
    (id_token with `openid`; a refresh token by the same rules as a code exchange), the access
    token bound to the DPoP `proof`'s key when one was sent (RFC 9449 §5).

    A missing `device_code` raises InvalidRequest before anything is read; a client without the
    grant UnauthorizedClient; see `device.redeem` for the polling answers. A user disabled or gone
    since approving answers InvalidGrant (the consumption is rolled back with it).
    """
    raw = require_token_parameter(device_code, "device_code")
    client = authenticate()
    require_grant_type(client, DEVICE_CODE_GRANT)
    jkt = dpop_binding(client, proof)
    redeemed = device.redeem(client.id, raw)
    user = get_enabled_user_in_tree(redeemed.user_id, client.root_id or client.id)
    if user is None:
        raise InvalidGrant("The user of this device code no longer exists or was disabled.")
    stamp = _AccessStamp.new()
    refresh_token = None
    if refresh.wanted(client, redeemed.scope):
        refresh_token, _ = refresh.add_member(
            client,
            user_id=user.id,
            scope=redeemed.scope,
            auth_time=redeemed.auth_time,
            sid=redeemed.sid,
            amr=redeemed.amr,
            acr=redeemed.acr,
            family=None,
            family_expires_at=None,
            access_token_jti=stamp.jti,
            access_token_expires_at=stamp.expires_at,
        )
    return _user_tokens(
        client,
        user,
        scope=redeemed.scope,
        auth_time=redeemed.auth_time,
        nonce=None,
        sid=_live_sid(redeemed.sid),
        amr=redeemed.amr,
        acr=redeemed.acr,
        jti=stamp.jti,
        issued_at=stamp.issued_at,
        refresh_token=refresh_token,
        claims=None,  # a device authorization asks for scopes only
        jkt=jkt,
    )


def remember_proof(proof: dpop.Proof) -> None:
    """Record the jti of a token-side request's proof (`dpop.remember`); InvalidDpopProof when it was
    used before. Flushes in the request's unit of work."""
    try:
        dpop.remember(proof)
    except dpop.ProofInvalid as refused:
        raise InvalidDpopProof(str(refused)) from None


def token_request_proof(presented: list[str], *, urls: Sequence[str]) -> dpop.Proof | None:
    """The checked DPoP proof of a token-side request (the token endpoint, RFC 9449 §5; a pushed
    authorization request, §10.1) whose `DPoP` headers are `presented`, sent to one of `urls`; None
    without one, or with DPoP turned off (`OIDC_DPOP_ENABLED`). Raises InvalidDpopProof, or
    UseDpopNonce with the current nonce. Records nothing: `remember_proof` does."""
    if not presented or not dpop.enabled():
        return None
    try:
        return dpop.check_proof(presented, method="POST", urls=urls)
    except dpop.ProofInvalid as refused:
        if refused.use_nonce:
            raise UseDpopNonce(str(refused), nonce=dpop.current_nonce()) from None
        raise InvalidDpopProof(str(refused)) from None


def dpop_binding(client: Client, proof: dpop.Proof | None) -> str | None:
    """The key thumbprint the client's new access token is bound to (None: a Bearer token).

    A client registered with `dpop_bound_access_tokens` (RFC 9449 §5.2) must send a proof while
    DPoP is on: InvalidDpopProof without one."""
    if proof is not None:
        return proof.jkt
    if client.dpop_bound_access_tokens and dpop.enabled():
        raise InvalidDpopProof("This client must send a DPoP proof: its access tokens are DPoP-bound.")
    return None


def bearer_allowed_clause(dpop_on: bool) -> Any:
    """`_binding_holds` and `dpop_binding` without a proof as a condition on the code and the outer
    `Client`: the code names no DPoP key and, while DPoP is on (`dpop_on`), the client does not
    require DPoP."""
    code_unbound = AuthorizationCode.dpop_jkt.is_(None)
    return and_(code_unbound, Client.dpop_bound_access_tokens.is_not(True)) if dpop_on else code_unbound


_DPOP_JKT_MISMATCH = "The authorization code is bound to a DPoP key (dpop_jkt): exchange it with a proof of that key."


def _binding_holds(code_jkt: str | None, jkt: str | None) -> bool:
    """Whether a code bound to the DPoP key `code_jkt` (RFC 9449 §10; None: unbound) may be redeemed
    for an access token bound to `jkt`."""
    return code_jkt is None or code_jkt == jkt


def exchange_code(
    authenticate: Authenticator,
    *,
    code: str | None,
    redirect_uri: str | None,
    code_verifier: str | None,
    proof: dpop.Proof | None = None,
) -> TokenResponse:
    """The view's code exchange: authenticate the client, redeem the code (`redeem_code`) and add a
    refresh token (with `offline_access` or when the client always gets one).

    A missing parameter raises InvalidRequest before anything is read. When nothing was redeemed
    the code is read again to say why; a code already used answers `invalid_grant` and revokes the
    tokens issued from it (access token and refresh family); that error has `keep_changes` set so
    the edge commits it.
    """
    redemption = _Redemption.of(
        require_token_parameter(code, "code"), require_token_parameter(redirect_uri, "redirect_uri"), code_verifier
    )
    client = authenticate()
    jkt = dpop_binding(client, proof)
    redeemed = redeem_code(db.session.connection(), redemption, client.id, refresh_tokens=True)
    if redeemed is None:
        _refuse_code(redemption.code_hash, client, redirect_uri=redemption.redirect_uri,
                     code_verifier=code_verifier, now=redemption.now, jkt=jkt)  # fmt: skip
    if not _binding_holds(redeemed.dpop_jkt, jkt):
        raise InvalidGrant(_DPOP_JKT_MISMATCH)  # rolls the redemption back: the key's holder may still redeem it
    refresh_token = None
    if refresh.wanted(client, redeemed.scope):
        refresh_token, family = refresh.add_member(
            client,
            user_id=redeemed.user.id,
            scope=redeemed.scope,
            auth_time=redeemed.auth_time,
            sid=redeemed.sid,
            amr=redeemed.amr,
            acr=redeemed.acr,
            claims=redeemed.claims,
            family=None,
            family_expires_at=None,
            access_token_jti=redemption.jti,
            access_token_expires_at=redemption.access_token_expires_at,
        )
        db.session.execute(
            update(AuthorizationCode)
            .where(AuthorizationCode.code_hash == redemption.code_hash)
            .values(refresh_family=family)
            .execution_options(synchronize_session=False)
        )
    return _redeemed_tokens(client, redeemed, redemption, refresh_token, jkt)


@dataclass(frozen=True)
class _Redemption:
    """One attempt at redeeming a code: what its statement matches and writes, and the tokens' times and id."""

    code_hash: str
    redirect_uri: str
    challenge: str  # "" without PKCE
    now: datetime
    issued_at: int
    jti: str
    access_token_expires_at: datetime

    @classmethod
    def of(cls, code: str, redirect_uri: str, code_verifier: str | None) -> _Redemption:
        stamp = _AccessStamp.new()
        return cls(
            code_hash=hash_secret(code), redirect_uri=redirect_uri,
            challenge=_pkce_challenge(code_verifier) if code_verifier else "", now=utcnow(),
            issued_at=stamp.issued_at, jti=stamp.jti, access_token_expires_at=stamp.expires_at,
        )  # fmt: skip

    def parameters(self, client_id: int) -> dict[str, Any]:
        """The consume statement's parameters (named apart from the columns: an UPDATE would take a
        column's name as a value to SET)."""
        return {"given_code_hash": self.code_hash, "given_client_id": client_id,
                "given_redirect_uri": self.redirect_uri, "given_now": self.now, "given_challenge": self.challenge,
                "given_jti": self.jti, "given_access_token_expires_at": self.access_token_expires_at}  # fmt: skip


def _pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def redeem_code_by_secret(
    credentials: PresentedCredentials,
    connection: Connection,
    *,
    code: str,
    redirect_uri: str,
    code_verifier: str | None,
) -> TokenResponse | None:
    """The hot door's code exchange (app/oidc/routes.py), once this process knows its signing keys
    (`keys.signing_keys_loaded`): `redeem_code` with the client authenticated by the statement
    itself, for grants without a refresh token. None when it redeemed nothing, and then nothing was
    changed: `explain_refused_code` says why, or the view answers."""
    client_id = parse_client_id(credentials.client_id)
    if credentials.method not in SECRET_METHODS or not credentials.secret or client_id is None:
        return None
    redemption = _Redemption.of(code, redirect_uri, code_verifier)
    secret = (credentials.method, secret_hash_candidates(credentials.secret))
    redeemed = redeem_code(connection, redemption, client_id, secret=secret, refresh_tokens=False, bearer=True)
    return None if redeemed is None else _redeemed_tokens(redeemed.client, redeemed, redemption, None)


def redeem_code(
    connection: Connection,
    redemption: _Redemption,
    client_id: int,
    *,
    secret: tuple[str, Sequence[str]] | None = None,
    refresh_tokens: bool,
    bearer: bool = False,
) -> _RedeemedCode | None:
    """The one redemption of an authorization code, for both doors and every database: one
    statement consumes the code when it is unused, unexpired, of this enabled client, redirect URI
    and PKCE challenge, its user enabled and in the client's tree, and the conditions of the rules'
    owners hold: with `secret` (method, hash candidates) the client authenticates with it
    (`client_auth.secret_authentication_clause`); without `refresh_tokens` the grant issues no
    refresh token (`refresh.wanted_clause`); with `bearer` (no DPoP proof came) the client does not
    require DPoP (`bearer_allowed_clause`). Of concurrent redemptions exactly one wins (PostgreSQL
    row lock; SQLite's write lock). It returns the code's fields with what the tokens need of the
    user and client (read in the same round trip on PostgreSQL), or None: nothing was changed.
    """
    hashes = secret[1] if secret else ()
    consume, read = _redeem_statements(
        connection.dialect.name, len(hashes), secret is not None, refresh_tokens, bearer, bearer and dpop.enabled()
    )
    parameters = redemption.parameters(client_id)
    if secret is not None:
        parameters["given_method"] = secret[0]
        parameters.update({f"given_secret_hash_{index}": value for index, value in enumerate(hashes)})
    row = consume.first(connection, parameters)
    if row is None:
        return None
    if read is not None:  # no data-modifying CTE: the user and client are read after the update
        user_id, scope, nonce, auth_time, sid, amr, acr, claims, dpop_jkt = row
        row = (scope, nonce, auth_time, sid, amr, acr, claims, dpop_jkt,
               *read.first(connection, {"user_id": user_id, **parameters}))  # fmt: skip
    scope, nonce, auth_time, sid, amr, acr, claims, dpop_jkt, *user_and_client, consented_scope, claims_fingerprint = (
        row
    )
    consent = None if consented_scope is None else _RememberedConsent(consented_scope, claims_fingerprint)
    return _RedeemedCode(scope, nonce, as_utc(auth_time), sid, amr, acr, _TokenUser(*user_and_client[:4]),
                         _TokenClient(*user_and_client[4:]), consent, claims, dpop_jkt)  # fmt: skip


def explain_refused_code(
    credentials: PresentedCredentials, *, code: str, redirect_uri: str, code_verifier: str | None
) -> OAuthError | None:
    """Why `redeem_code_by_secret` consumed nothing, read without a write (in the caller's session,
    which it leaves with nothing to commit): the error `exchange_code` would raise, or None when
    only `exchange_code` may answer: a used code (its replay revokes tokens) or a grant it would
    redeem (a refresh token to issue, or a refusal that found nothing wrong).
    """
    try:
        client = authenticate(credentials, frozenset())
        dpop_binding(client, None)
    except OAuthError as refusal:
        return refusal
    row = db.session.execute(
        select(AuthorizationCode).where(AuthorizationCode.code_hash == hash_secret(code))
    ).scalar_one_or_none()
    if row is not None and row.used_at is not None and row.client_id == client.id:
        return None
    refusal = _code_refusal(row, client, redirect_uri=redirect_uri, code_verifier=code_verifier, now=utcnow(), jkt=None)
    if refusal is None and refresh.wanted(client, row.scope):
        return None
    return refusal or InvalidGrant(_USER_GONE)


@dataclass(frozen=True, slots=True)
class _TokenUser:
    """What the tokens of a code exchange say of its user (`User`'s fields of the same names)."""

    id: int
    did: str | None
    profile: dict | None
    email_address: str


@dataclass(frozen=True, slots=True)
class _TokenClient:
    """What the tokens of a code exchange need of its client (`Client`'s fields of the same names)."""

    id: int
    signing_alg: str | None
    access_token_signed_response_alg: str | None
    id_token_claims: dict | None
    reads_credentials: bool | None
    subject_type: str | None
    sector_identifier: str | None


@dataclass(frozen=True, slots=True)
class _RedeemedCode:
    """A redeemed code: its grant's fields, and what its tokens need of its user and client."""

    scope: str
    nonce: str | None
    auth_time: datetime
    sid: str | None
    amr: str | None
    acr: str | None
    user: _TokenUser
    client: _TokenClient
    consent: _RememberedConsent | None
    claims: str | None  # the standard claims the `claims` parameter asked for (`RequestedClaims.to_json`)
    dpop_jkt: str | None = None


@dataclass(frozen=True, slots=True)
class _RememberedConsent:
    """The user's remembered consent to the client (`Consent`'s fields of the same names)."""

    scope: str
    claims_fingerprint: str | None


def _consume_update(*conditions: Any) -> Update:
    """Consume the code if it is unused, unexpired, of this enabled client, redirect URI and PKCE
    challenge, its user enabled and in the client's tree, and `conditions` hold."""
    return (
        update(AuthorizationCode)
        .where(
            AuthorizationCode.code_hash == bindparam("given_code_hash"),
            AuthorizationCode.used_at.is_(None),
            AuthorizationCode.client_id == bindparam("given_client_id"),
            AuthorizationCode.redirect_uri == bindparam("given_redirect_uri"),
            AuthorizationCode.expires_at > bindparam("given_now", type_=AuthorizationCode.expires_at.type),
            func.coalesce(AuthorizationCode.code_challenge, "") == bindparam("given_challenge"),
            Client.id == bindparam("given_client_id"),
            enabled_client_clause(),
            User.id == AuthorizationCode.user_id,
            User.disabled_at.is_(None),
            User.root_client_id == func.coalesce(Client.root_id, Client.id),
            *conditions,
        )
        .values(
            used_at=bindparam("given_now"),
            access_token_jti=bindparam("given_jti"),
            access_token_expires_at=bindparam("given_access_token_expires_at"),
        )
        .returning(
            AuthorizationCode.user_id,
            AuthorizationCode.scope,
            AuthorizationCode.nonce,
            AuthorizationCode.auth_time,
            AuthorizationCode.sid,
            AuthorizationCode.amr,
            AuthorizationCode.acr,
            AuthorizationCode.claims,
            AuthorizationCode.dpop_jkt,
        )
    )


_TOKEN_FIELDS = (
    User.id,
    User.did,
    User.profile,
    User.email_address,
    Client.id,
    Client.signing_alg,
    Client.access_token_signed_response_alg,
    Client.id_token_claims,
    Client.reads_credentials,
    Client.subject_type,
    Client.sector_identifier,
)


@functools.cache
def _redeem_statements(
    dialect: str, hash_keys: int, by_secret: bool, refresh_tokens: bool, bearer: bool, dpop_on: bool
) -> tuple[DriverStatement, DriverStatement | None]:
    """The statements of `redeem_code`, built once per shape: `_consume_update`'s with the
    conditions of the rules' owners, returning the code's fields, `_TokenUser`'s, `_TokenClient`'s
    and the remembered consent (for `grants.grant_of_consent`). PostgreSQL reads them in the same
    statement; SQLite, which has no data-modifying CTE, in a second one (then the first returns
    the user's id first)."""
    conditions = []
    if by_secret:
        conditions.append(
            client_auth.secret_authentication_clause(
                bindparam("given_method"),
                [bindparam(f"given_secret_hash_{index}") for index in range(hash_keys)],
                bindparam("given_now", type_=Client.previous_secret_expires_at.type),
            )
        )
    if not refresh_tokens:
        conditions.append(not_(refresh.wanted_clause(AuthorizationCode.scope)))
    if bearer:
        conditions.append(bearer_allowed_clause(dpop_on))
    consume = _consume_update(*conditions)
    consent = and_(Consent.user_id == User.id, Consent.client_id == Client.id)
    if dialect != "postgresql":
        read = (
            select(*_TOKEN_FIELDS, Consent.scope, Consent.claims_fingerprint)
            .select_from(User)
            .join(Client, Client.id == bindparam("given_client_id"))
            .outerjoin(Consent, consent)
            .where(User.id == bindparam("user_id"))
        )
        return DriverStatement(consume), DriverStatement(read)
    code = consume.cte("consumed")
    return DriverStatement(
        select(code.c.scope, code.c.nonce, code.c.auth_time, code.c.sid, code.c.amr, code.c.acr, code.c.claims,
               code.c.dpop_jkt,
               *_TOKEN_FIELDS, Consent.scope, Consent.claims_fingerprint)
        .join(User, User.id == code.c.user_id)
        .join(Client, Client.id == bindparam("given_client_id"))
        .outerjoin(Consent, consent)
    ), None  # fmt: skip


_USER_GONE = "The user of this authorization code no longer exists or was disabled."


def _refuse_code(
    code_hash: str, client: Client, *, redirect_uri: str, code_verifier: str | None, now: datetime, jkt: str | None
) -> NoReturn:
    """Nothing was consumed: say why. A used code of this client revokes the tokens issued from it."""
    row = db.session.execute(
        select(AuthorizationCode)
        .where(AuthorizationCode.code_hash == code_hash)
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()
    if row is not None and row.client_id == client.id and row.used_at is not None:
        _revoke_code_tokens(row)
    refusal = _code_refusal(row, client, redirect_uri=redirect_uri, code_verifier=code_verifier, now=now, jkt=jkt)
    raise refusal or InvalidGrant(_USER_GONE)


def _code_refusal(
    row: AuthorizationCode | None,
    client: Client,
    *,
    redirect_uri: str,
    code_verifier: str | None,
    now: datetime,
    jkt: str | None,
) -> InvalidGrant | None:
    """What is wrong with presenting the code `row` (None: unknown) for `client` with a proof of the
    DPoP key `jkt` (None: none), other than its use and its user; None when nothing of that is."""
    if row is None or row.client_id != client.id:
        return InvalidGrant("The authorization code is unknown or was issued to another client.")
    if as_utc(row.expires_at) <= now:
        return InvalidGrant("The authorization code has expired.")
    if row.redirect_uri != redirect_uri:
        return InvalidGrant("redirect_uri does not match the one of the authorization request.")
    if row.code_challenge:
        if not code_verifier:
            return InvalidGrant("code_verifier is required: the authorization request used PKCE.")
        if not hmac.compare_digest(_pkce_challenge(code_verifier), row.code_challenge):
            return InvalidGrant("code_verifier does not match the code_challenge.")
    elif code_verifier:
        return InvalidGrant("code_verifier was sent but the authorization request had no code_challenge.")
    if not _binding_holds(row.dpop_jkt, jkt):
        return InvalidGrant(_DPOP_JKT_MISMATCH)
    return None


def _user_tokens(
    client: Client | _TokenClient,
    user: User | _TokenUser,
    *,
    scope: str,
    auth_time: datetime,
    nonce: str | None,
    sid: str | None,
    amr: str | None,
    acr: str | None,
    jti: str,
    issued_at: int,
    refresh_token: str | None,
    claims: str | None,
    grant: grants.Grant | None = None,
    jkt: str | None = None,
) -> TokenResponse:
    """The token response; `grant` (what the tokens may release) is read when not given. `claims`
    (`RequestedClaims.to_json`) are the standard claims the request asked for one by one, which
    the user allowed: those for the id_token are added to it, those for userinfo named in the
    access token (`userinfo_claims`). `jkt` binds the access token to a DPoP key."""
    requested = RequestedClaims.from_json(claims)
    access_token, _ = tokens.issue_access_token(
        client_id=client.id, user_id=user.id, scope=scope, alg=access_token_alg(client), now=issued_at, jti=jti,
        userinfo_claims=requested.userinfo, subject=subjects.subject_for(client, user.id), jkt=jkt,
    )  # fmt: skip
    id_token = None
    if "openid" in scope.split():
        grant = grant or grants.grant_for(client, user, scope.split())
        id_token = tokens.issue_id_token(
            client_id=client.id,
            user_id=user.id,
            did=user.did,
            identity=subjects.identity_claims(client, user.id, user.did),
            auth_time=int(auth_time.timestamp()),
            nonce=nonce,
            access_token=access_token,
            extra_claims={**grant.requested_claims(requested.id_token), **grant.application_claims()},
            alg=client_alg(client),
            now=issued_at,
            sid=sid,
            amr=amr.split() if amr else None,
            acr=acr,
        )
    return TokenResponse(
        scope=scope,
        access_token=access_token,
        id_token=id_token,
        refresh_token=refresh_token,
        expires_in=current(OidcSettings).access_token_ttl,
        token_type=TOKEN_TYPE if jkt is None else DPOP_TOKEN_TYPE,
    )


def _redeemed_tokens(
    client: Client | _TokenClient,
    redeemed: _RedeemedCode,
    redemption: _Redemption,
    refresh_token: str | None,
    jkt: str | None = None,
) -> TokenResponse:
    return _user_tokens(client, redeemed.user, scope=redeemed.scope, auth_time=redeemed.auth_time,
                        nonce=redeemed.nonce, sid=redeemed.sid, amr=redeemed.amr, acr=redeemed.acr,
                        jti=redemption.jti, issued_at=redemption.issued_at,
                        refresh_token=refresh_token, claims=redeemed.claims, jkt=jkt,
                        grant=grants.grant_of_consent(client, redeemed.user, redeemed.scope.split(),
                                                      redeemed.consent))  # fmt: skip


def refresh_grant(
    authenticate: Authenticator, *, refresh_token: str | None, scope: str | None, proof: dpop.Proof | None = None
) -> TokenResponse:
    """Rotate a refresh token: new access token, id_token and refresh token of the same family.

    The token is consumed first (see `refresh.consume`); a token already consumed is a reuse that
    revokes its family and its access tokens (committed: `keep_changes`), and any other refusal
    rolls the consumption back. `scope` may narrow the grant, never widen it (`invalid_scope`).
    """
    raw = require_token_parameter(refresh_token, "refresh_token")
    consumed = refresh.consume(raw)
    client = authenticate()
    if consumed is None:
        _refuse_refresh_reuse(raw, client)
    if consumed.client_id != client.id:
        raise InvalidGrant("The refresh token is unknown or was issued to another client.")
    now = utcnow()
    if consumed.expires_at <= now or consumed.family_expires_at <= now:
        raise InvalidGrant("The refresh token has expired.")
    user = get_enabled_user_in_tree(consumed.user_id, client.root_id or client.id)
    if user is None:
        raise InvalidGrant("The user of this refresh token no longer exists or was disabled.")
    granted = consumed.scope.split()
    requested = list(dict.fromkeys(scope.split())) if scope else granted
    if not set(requested) <= set(granted):
        raise InvalidScope("The requested scope exceeds the one originally granted.")
    jkt = dpop_binding(client, proof)
    stamp = _AccessStamp.new()
    rotated, _ = refresh.add_member(
        client,
        user_id=user.id,
        scope=consumed.scope,
        auth_time=consumed.auth_time,
        sid=consumed.sid,
        amr=consumed.amr,
        acr=consumed.acr,
        claims=consumed.claims,
        family=consumed.family,
        family_expires_at=consumed.family_expires_at,
        access_token_jti=stamp.jti,
        access_token_expires_at=stamp.expires_at,
    )
    return _user_tokens(
        client,
        user,
        scope=" ".join(requested),
        auth_time=consumed.auth_time,
        nonce=None,
        sid=_live_sid(consumed.sid),
        amr=consumed.amr,
        acr=consumed.acr,
        jti=stamp.jti,
        issued_at=stamp.issued_at,
        refresh_token=rotated,
        claims=consumed.claims,
        jkt=jkt,
    )


def _refuse_refresh_reuse(raw: str, client: Client) -> NoReturn:
    row = refresh.find(raw, client.id)
    if row is None:
        raise InvalidGrant("The refresh token is unknown or was issued to another client.")
    if row.revoked_at is not None:
        raise InvalidGrant("The refresh token has been revoked.")
    if refresh.within_reuse_grace(row):
        raise InvalidGrant("The refresh token was just rotated; use the new one.")
    for jti, expires_at in refresh.revoke_family(row.family):
        deny_token(jti, expires_at, "refresh_reuse")
    raise InvalidGrant("The refresh token was already used; its whole family is revoked.", keep_changes=True)


def client_credentials_grant(client: Client, *, scope: str | None, jkt: str | None = None) -> TokenResponse:
    """An access token of the client itself (`sub` = client) for scopes it may be granted, bound to
    the DPoP key `jkt` when given.

    Without `scope`, every scope the client may be granted; a scope outside them raises InvalidScope.
    """
    allowed = list(client.client_credentials_scopes or [])
    requested = list(dict.fromkeys(scope.split())) if scope else allowed
    if not set(requested) <= set(allowed):
        raise InvalidScope("The client may not be granted the requested scope.")
    issued_at = int(time.time())
    granted = " ".join(requested)
    access_token = tokens.issue_client_access_token(
        client_id=client.id, scope=granted, alg=access_token_alg(client), jti=uuid.uuid4().hex, now=issued_at, jkt=jkt
    )
    return TokenResponse(
        scope=granted,
        access_token=access_token,
        expires_in=current(OidcSettings).access_token_ttl,
        token_type=TOKEN_TYPE if jkt is None else DPOP_TOKEN_TYPE,
    )


def _revoke_code_tokens(row: AuthorizationCode) -> NoReturn:
    """A used code presented again: revoke the tokens issued from it, committed with the refusal."""
    if row.access_token_jti:
        deny_token(row.access_token_jti, as_utc(row.access_token_expires_at) or utcnow(), "code_replay")
    if row.refresh_family:
        for jti, expires_at in refresh.revoke_family(row.refresh_family):
            deny_token(jti, expires_at, "code_replay")
    raise InvalidGrant("The authorization code was already used; tokens issued from it are revoked.", keep_changes=True)


def verify_access_token(raw: str) -> AccessTokenClaims:
    """A valid, unrevoked access token of an existing, enabled client; raises InvalidBearerToken."""
    try:
        claims = tokens.decode_access_token(raw)
    except TokenInvalid as exc:
        raise InvalidBearerToken(str(exc)) from None
    if is_revoked(claims.jti):
        raise InvalidBearerToken("The token has been revoked.")
    if get_relying_party(claims.client_id) is None:
        raise InvalidBearerToken("The token's client no longer exists.")
    if claims.user_id is not None and not _user_accepts(claims.user_id, claims.iat):
        raise InvalidBearerToken("The token's user no longer exists or was disabled.")
    return claims


def _user_accepts(user_id: int, issued_at: int) -> bool:
    """Whether the user exists, is not disabled, and was not disabled after the token was issued."""
    row = db.session.execute(select(User.disabled_at, User.tokens_valid_after).where(User.id == user_id)).first()
    if row is None or row.disabled_at is not None:
        return False
    return row.tokens_valid_after is None or issued_at > as_utc(row.tokens_valid_after).timestamp()


def token_grant(claims: AccessTokenClaims) -> grants.Grant:
    """What a verified user access token may read today (see `app.oidc.grants`)."""
    user = db.session.get(User, claims.user_id) if claims.user_id is not None else None
    client = get_relying_party(claims.client_id)
    if user is None or client is None:
        raise InvalidBearerToken("The token's user no longer exists.")
    return grants.grant_for(client, user, claims.scopes, claims.userinfo_claims)


def userinfo(grant: grants.Grant) -> dict:
    """The OpenID userinfo document of what a token may read (see `app.oidc.grants`)."""
    document = grant.userinfo()
    document.update(subjects.identity_claims(grant.client, grant.user.id, grant.user.did))
    return document


def signed_userinfo(grant: grants.Grant) -> str | None:
    """The userinfo document as a JWT signed with the client's `userinfo_signed_response_alg`, with
    `iss` and `aud` (OpenID Core §5.3.2); None when the client takes JSON or signed userinfo is off
    (`OIDC_SIGNED_USERINFO_ENABLED`)."""
    client = db.session.get(Client, grant.client.id)
    alg = client.userinfo_signed_response_alg if client is not None else None
    if alg not in keys.ALGORITHMS or not current(OidcSettings).signed_userinfo_enabled:
        return None
    return tokens.sign({**userinfo(grant), "iss": tokens.issuer(), "aud": str(grant.client.id)}, alg, "JWT")


def _token_of_client(raw: str, client: Client) -> AccessTokenClaims | None:
    try:
        claims = tokens.decode_access_token(raw)
    except TokenInvalid:
        return None
    return claims if claims.client_id == str(client.id) else None


def revoke_token(client: Client, token: str | None) -> None:
    """RFC 7009: revoke an access or refresh token issued to `client`; anything else is silently ignored.

    Revoking a refresh token revokes its whole family and the access tokens issued from it.
    A missing token raises InvalidRequest.
    """
    raw = require_token_parameter(token, "token")
    claims = _token_of_client(raw, client)
    if claims is not None:
        deny_token(claims.jti, datetime.fromtimestamp(claims.exp, UTC), "revoked_by_client")
        return
    row = refresh.find(raw, client.id)
    if row is not None:
        for jti, expires_at in refresh.revoke_family(row.family):
            deny_token(jti, expires_at, "revoked_by_client")


def revoke_user_refresh_tokens(user_id: int) -> int:
    """Revoke every refresh-token family of the user and the access tokens issued from them (for a
    user an operator disabled); returns how many families had a live token. Flushes, never commits."""
    families = (
        db.session.execute(
            select(RefreshToken.family)
            .where(RefreshToken.user_id == user_id, RefreshToken.revoked_at.is_(None))
            .distinct()
        )
        .scalars()
        .all()
    )
    for family in sorted(families):
        for jti, expires_at in refresh.revoke_family(family):
            deny_token(jti, expires_at, "user_disabled")
    return len(families)


def revoke_session_refresh_tokens(sid: str) -> int:
    """Revoke the refresh-token families of an ended sign-in session that lack `offline_access`, and
    the access tokens issued from them; returns how many. Flushes, never commits."""
    families = refresh.families_of_session(sid)
    for family in families:
        for jti, expires_at in refresh.revoke_family(family):
            deny_token(jti, expires_at, "session_ended")
    return len(families)


def _live_sid(sid: str | None) -> str | None:
    """`sid` while its sign-in session lives, else None: an id_token never names an ended session."""
    if sid is None:
        return None
    row = db.session.execute(
        select(LoginSession.ended_at, LoginSession.expires_at).where(LoginSession.sid == sid)
    ).first()
    if row is None or row.ended_at is not None or as_utc(row.expires_at) <= utcnow():
        return None
    return sid


def introspect_token(client: Client, token: str | None) -> dict:
    """RFC 7662: whether the access or refresh token is active, with its claims, for its own client.

    A missing token raises InvalidRequest.
    """
    raw = require_token_parameter(token, "token")
    claims = _token_of_client(raw, client)
    if claims is None:
        return _introspect_refresh_token(client, raw)
    if is_revoked(claims.jti) or (claims.user_id is not None and not _user_accepts(claims.user_id, claims.iat)):
        return {"active": False}
    document = {
        "active": True,
        "scope": " ".join(claims.scopes),
        "client_id": claims.client_id,
        "token_type": TOKEN_TYPE if claims.jkt is None else DPOP_TOKEN_TYPE,
        "exp": claims.exp,
        "iat": claims.iat,
        "sub": claims.sub,
        "aud": claims.claims.get("aud"),
        "iss": claims.claims.get("iss"),
        "jti": claims.jti,
    }
    if claims.user_id is not None:
        # The client's own subject of the user (pairwise or public); the local id for a public client only.
        document["sub"] = subjects.subject_for(client, claims.user_id)
        if not subjects.is_pairwise(client):
            document["user_id"] = claims.user_id
    if claims.jkt is not None:
        document["cnf"] = {"jkt": claims.jkt}
    # Says whose token it is, so a resource server never takes a client's token for a user's.
    document["subject_type"] = "user" if claims.user_id is not None else "client"
    return document


def _introspect_refresh_token(client: Client, raw: str) -> dict:
    row = refresh.find(raw, client.id)
    if (
        row is None
        or not refresh.is_active(row)
        or get_enabled_user_in_tree(row.user_id, client.root_id or client.id) is None
    ):
        return {"active": False}
    document = {
        "active": True,
        "scope": row.scope,
        "client_id": str(client.id),
        "token_type": "refresh_token",
        "exp": int(min(as_utc(row.expires_at), as_utc(row.family_expires_at)).timestamp()),
        "iat": int(as_utc(row.created_at).timestamp()),
        "sub": subjects.subject_for(client, row.user_id),
        "iss": tokens.issuer(),
        "subject_type": "user",
    }
    if not subjects.is_pairwise(client):
        document["user_id"] = row.user_id
    return document


def require_token_parameter(value: str | None, name: str) -> str:
    """`value` itself; InvalidRequest naming the parameter when it is missing or empty."""
    if not value:
        raise InvalidRequest(f"{name} is required.")
    return value
