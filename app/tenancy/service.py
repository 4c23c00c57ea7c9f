"""Clients and API tokens: the rules of the tenant tree.

Every function that reads or writes tenant data takes the caller (or a subtree path) and filters
by it; a client outside the caller's reach is reported as not found, never as forbidden. Functions
flush but never commit: the request, task or CLI command that called them owns the transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from flask import current_app
from sqlalchemy import JSON, Text, and_, bindparam, cast, exists, func, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased

from app.cache import Cache
from app.db import as_utc, utcnow
from app.dialect import DriverStatement, row_version
from app.errors import BadRequest, NotFound
from app.extensions import db
from app.pagination import Page, page_of, paginate
from app.security import decrypt, encrypt, hash_secret, random_token, secret_hash_candidates, texts_equal, verify_secret
from app.settings import current
from app.tenancy.caller import Caller
from app.tenancy.errors import ClientTreeTooDeep, MasterClientRequired, SubdomainTaken, TooManyApiTokens
from app.tenancy.models import BASE_GRANT_TYPES, GRANT_TYPES, SIGN_IN_POLICIES, ApiToken, Client
from app.tenancy.settings import TenancySettings

TOKEN_PREFIX = "tsk_"
MAX_TREE_DEPTH = 32
MAX_ACTIVE_TOKENS_PER_CLIENT = 100
_SUB_CLIENT_MEMBERS = (
    "name", "address_1", "address_2", "country", "province", "city", "timezone", "domain", "subdomain",
    "redirect_uris", "id_token_claims", "signing_alg", "access_token_signed_response_alg", "logo_url", "accent_color",
    "token_endpoint_auth_method", "jwks", "jwks_uri", "client_credentials_scopes", "grant_types", "require_pkce",
    "reads_credentials", "issue_refresh_tokens", "refresh_token_ttl", "refresh_token_idle_ttl",
    "require_pushed_authorization_requests", "backchannel_logout_uri", "require_signed_request_object",
)  # fmt: skip
# Members only the operator sets (`configure_client`): the sub-client resource does not carry them.
_OPERATOR_MEMBERS = ("dpop_bound_access_tokens", "userinfo_signed_response_alg", "authorization_signed_response_alg")
# Client secrets are also kept sealed under this purpose: client_secret_jwt checks an HMAC with them.
CLIENT_SECRET_PURPOSE = "client-secret"
SIGNING_ALGORITHMS = ("RS256", "ES256", "EdDSA")
_FALSE_WHEN_NULL = (
    "issue_refresh_tokens", "require_pushed_authorization_requests", "require_pkce", "require_signed_request_object",
)  # fmt: skip
DEFAULT_SIGNING_ALG = "RS256"


@dataclass(frozen=True)
class IssuedToken:
    """A new API token: the plaintext is only ever available here, once."""

    token: ApiToken
    plaintext: str


@dataclass(frozen=True)
class IssuedClientSecret:
    """A new client secret: the plaintext is only ever available here, once."""

    client_id: int
    client_secret: str
    previous_secret_expires_at: datetime | None


# --- clients -------------------------------------------------------------------------------------


def create_master_client(
    name: str,
    *,
    redirect_uris: list[str] | None = None,
    id_token_claims: dict[str, str] | None = None,
    signing_alg: str = DEFAULT_SIGNING_ALG,
    logo_url: str | None = None,
    accent_color: str | None = None,
    reads_credentials: bool = True,
) -> tuple[Client, str]:
    """Create a master client (a tree root) and its client secret. Flushes; returns (client, secret).

    `logo_url` and `accent_color` must already be valid (see `validation`).
    """
    secret = random_token(32)
    client = Client(
        name=name,
        logo_url=logo_url,
        accent_color=accent_color,
        parent_id=None,
        esp_token=new_esp_token(),
        redirect_uris=list(redirect_uris or []),
        id_token_claims=dict(id_token_claims or {}),
        reads_credentials=reads_credentials,
        signing_alg=signing_alg,
        secret_hash=hash_secret(secret),
        secret_encrypted=encrypt(secret.encode(), CLIENT_SECRET_PURPOSE),
        created_at=utcnow(),
    )
    db.session.add(client)
    db.session.flush()
    client.root_id = client.id
    client.path = f"/{client.id}/"
    db.session.flush()
    return client, secret


def new_esp_token() -> str:
    """Public identifier of a client's e-mail sender profile (not a secret)."""
    return "esp_" + uuid.uuid4().hex


# Built once: aliasing the 40-column clients table on every call costs more than the query.
_ANCESTOR = aliased(Client, name="ancestor")
_NO_DISABLED_ANCESTOR = ~exists().where(_ANCESTOR.disabled_at.is_not(None), Client.path.startswith(_ANCESTOR.path))


def _no_disabled_ancestor() -> Any:
    """A condition true when neither the outer `Client` nor any ancestor of it is disabled (one EXISTS).

    Paths are "/1/5/9/": an ancestor's path (the client's own included) is a prefix of the client's.
    """
    return _NO_DISABLED_ANCESTOR


# Built once: every authenticated request runs these two, and building them cost more than the queries.
_CLIENT_IN_SUBTREE = select(Client).where(
    Client.id == bindparam("client_id"),
    Client.path.like(bindparam("subtree_pattern"), escape="/"),
    _NO_DISABLED_ANCESTOR,
)
# What a sub-client answer shows (its members, identity and public settings), never its secrets.
_SUB_CLIENT_READ = (
    *_SUB_CLIENT_MEMBERS, "id", "parent_id", "esp_token", "recaptcha_key", "recaptcha_threshold", "recaptcha_enabled",
    "created_at", "privacy_link",
)  # fmt: skip
_ROW_VERSION = row_version(Client.__table__).label("row_version")
_IN_SUBTREE = (Client.id == bindparam("client_id"), Client.path.like(bindparam("subtree_pattern"), escape="/"))
# The same as `_CLIENT_IN_SUBTREE`, as a row of those columns: fewer columns cost less to read on PostgreSQL.
_CLIENT_ROW_IN_SUBTREE = DriverStatement(
    select(*(Client.__table__.c[name] for name in _SUB_CLIENT_READ), _ROW_VERSION).where(
        *_IN_SUBTREE, _NO_DISABLED_ANCESTOR
    )
)
# What `sub_client_version` reads of the same row.
_CLIENT_VERSION_IN_SUBTREE = DriverStatement(select(Client.id, _ROW_VERSION).where(*_IN_SUBTREE, _NO_DISABLED_ANCESTOR))

_CHILDREN = (Client.parent_id == bindparam("parent_id"), Client.disabled_at.is_(None))
_CHILDREN_COUNT = DriverStatement(select(func.count().label("total")).select_from(Client).where(*_CHILDREN))
# The JSON members of a sub-client, read by a page as their text: decoded only for an answer not cached.
_JSON_READ = frozenset(name for name in _SUB_CLIENT_READ if isinstance(Client.__table__.c[name].type, JSON))


def _page_column(name: str) -> Any:
    column = Client.__table__.c[name]
    return cast(column, Text).label(name) if name in _JSON_READ else column


_CHILDREN_TOTAL = select(func.count()).select_from(Client).where(*_CHILDREN).scalar_subquery().label("total")


def _children_page(*columns: Any) -> DriverStatement:
    """A page of the acting node's children: `columns`, each row carrying the count of every child
    (one statement, one round trip)."""
    page = select(*columns, _CHILDREN_TOTAL).where(*_CHILDREN).order_by(Client.id)
    return DriverStatement(page.limit(bindparam("limit")).offset(bindparam("offset")))


# A page of `list_sub_clients`, and what `sub_client_page_versions` reads of the same page.
_CHILDREN_PAGE = _children_page(*(_page_column(name) for name in _SUB_CLIENT_READ), _ROW_VERSION)
_CHILDREN_PAGE_VERSIONS = _children_page(Client.id, _ROW_VERSION)


# Columns, not entities: loading two ORM objects (the clients table has 40 columns) cost more than the query.
# One statement per number of hash keys (one bind each): an expanding IN is re-rendered on every execution.
@cache
def _active_token_statement(hash_count: int) -> DriverStatement:
    return DriverStatement(
        select(
            ApiToken.id.label("token_id"),
            ApiToken.expires_at,
            ApiToken.last_used_at,
            Client.id.label("client_id"),
            Client.parent_id,
            Client.root_id,
            Client.path,
        )
        .join(Client, Client.id == ApiToken.client_id)
        .where(
            ApiToken.token_hash.in_([bindparam(f"hash_{index}") for index in range(hash_count)]),
            ApiToken.revoked_at.is_(None),
            _NO_DISABLED_ANCESTOR,
        )
    )


def _prefix_pattern(prefix: str) -> str:
    """A LIKE pattern (escape character `/`) matching text that starts with `prefix`."""
    return prefix.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"


def get_client_in_subtree(client_id: int, subtree_path: str) -> Client | None:
    """The client with this id if it lies within the subtree rooted at `subtree_path` (itself included).

    None too when it (or an ancestor) is disabled: a disabled client is absent to the API.
    """
    return db.session.scalar(
        _CLIENT_IN_SUBTREE, {"client_id": client_id, "subtree_pattern": _prefix_pattern(subtree_path)}
    )


def require_client_in_subtree(client_id: int, subtree_path: str) -> Client:
    """Like `get_client_in_subtree`, but raises `NotFound` (404) instead of returning None."""
    client = get_client_in_subtree(client_id, subtree_path)
    if client is None:
        raise NotFound("No such client.")
    return client


def subtree_client_ids(subtree_path: str) -> set[int]:
    """Ids of every client within the subtree rooted at `subtree_path`."""
    statement = select(Client.id).where(Client.path.startswith(subtree_path, autoescape=True))
    return set(db.session.execute(statement).scalars())


def get_active_client(client_id: int) -> Client | None:
    """The client with this id unless it is unknown or disabled, itself or by an ancestor (OpenID lookups)."""
    return db.session.scalar(select(Client).where(Client.id == client_id, _no_disabled_ancestor()))


def enabled_client_clause() -> Any:
    """The condition of `get_active_client` on the outer `Client`, for other features' statements."""
    return _NO_DISABLED_ANCESTOR


def create_sub_client(caller: Caller, fields: dict[str, Any]) -> Client:
    """Create a child of the caller's acting node from validated `SubClientCreateIn` members.

    Raises `SubdomainTaken` (409) when another client has the same (subdomain, domain) and
    `ClientTreeTooDeep` (409) beyond `MAX_TREE_DEPTH` levels.
    """
    return add_child_client(require_client_in_subtree(caller.acting_client_id, caller.path), fields)


def add_child_client(parent: Client, fields: dict[str, Any]) -> Client:
    """Create a child of `parent` (already authorised) from validated `SubClientCreateIn` members.

    Raises `SubdomainTaken` and `ClientTreeTooDeep` (409) as `create_sub_client` says. Flushes.
    """
    if parent.path.count("/") - 1 >= MAX_TREE_DEPTH:
        raise ClientTreeTooDeep(f"A client tree has at most {MAX_TREE_DEPTH} levels.")
    client = Client(
        parent_id=parent.id,
        root_id=parent.root_id or parent.id,
        path=parent.path,
        esp_token=new_esp_token(),
        timezone="UTC",
        redirect_uris=[],
        id_token_claims={},
        signing_alg=DEFAULT_SIGNING_ALG,
        created_at=utcnow(),
    )
    _apply_members(client, fields)
    _ensure_sender_unique(client)
    _flush_guarding_sender(client)
    client.path = f"{parent.path}{client.id}/"
    db.session.flush()
    return client


def update_sub_client(caller: Caller, client_id: int, changes: dict[str, Any]) -> Client:
    """Apply a partial update to a client in the caller's acting subtree. Master clients only.

    Raises `MasterClientRequired` (403) for a sub-client's token, `NotFound` (404) outside the
    subtree, `SubdomainTaken` (409) on a (subdomain, domain) clash.
    """
    if not caller.is_master:
        raise MasterClientRequired("Sub-clients can only be updated with a master client's API token.")
    client = require_sub_client(caller, client_id)
    _apply_members(client, changes)
    _ensure_sender_unique(client)
    _flush_guarding_sender(client)
    return client


def require_sub_client(caller: Caller, client_id: int) -> Client:
    """The client with this id within the caller's acting subtree; `NotFound` (404) otherwise."""
    client = get_client_in_subtree(client_id, caller.acting_path)
    if client is None:
        raise NotFound("No such sub-client.")
    return client


def read_sub_client(caller: Caller, client_id: int) -> Any:
    """Like `require_sub_client`, as a row of the members a `SubClientOut` shows (by attribute name).

    Cheaper than loading the ORM object; the row is read only and holds no secret. Raises `NotFound` (404).
    """
    row = find_sub_client_row(caller, client_id)
    if row is None:
        raise NotFound("No such sub-client.")
    return row


def find_sub_client_row(caller: Caller, client_id: int, connection: Connection | None = None) -> Any:
    """The row of `read_sub_client`, or None; read through `connection` when given, else the session's.
    Its `sub_client_row_version` says which version of the row it is."""
    if connection is None:
        connection = db.session.connection()
    return _CLIENT_ROW_IN_SUBTREE.first(connection, _in_subtree_params(caller, client_id))


def sub_client_version(caller: Caller, client_id: int, connection: Connection) -> Hashable | None:
    """What `find_sub_client_row` would read, at the cost of its id: the row's version
    (`sub_client_row_version`), or None when it would find none. For an answer kept while the row
    is unchanged: on PostgreSQL no column of the row is read."""
    row = _CLIENT_VERSION_IN_SUBTREE.first(connection, _in_subtree_params(caller, client_id))
    return None if row is None else sub_client_row_version(row)


def _in_subtree_params(caller: Caller, client_id: int) -> dict[str, Any]:
    """The parameters of `_IN_SUBTREE`: the client `client_id` within the caller's acting subtree."""
    return {"client_id": client_id, "subtree_pattern": _prefix_pattern(caller.acting_path)}


def sub_client_row_version(row: Any) -> Hashable:
    """The version of a sub-client's row as read (`app.dialect.row_version`): equal versions, equal members."""
    return row.id, row.row_version


def list_sub_clients(caller: Caller, page: int, per_page: int, connection: Connection | None = None) -> Page:
    """The direct children of the caller's acting node that are not disabled, oldest first: a page of
    `SubClientRow`s (the members a `SubClientOut` shows, as `read_sub_client`'s row), read through
    `connection` when given, else the session's. One statement counts and reads the page; an empty
    page counts again."""
    rows, total = _children_page_rows(_CHILDREN_PAGE, caller, page, per_page, connection)
    return page_of([SubClientRow(row, caller.root_id) for row in rows], total, page, per_page)


def sub_client_page_versions(caller: Caller, page: int, per_page: int, connection: Connection) -> Page:
    """The page `list_sub_clients` would read, at the cost of its ids: holding the `version` of each
    `SubClientRow` instead. For an answer kept while its rows are unchanged: on PostgreSQL no column
    of the rows is read."""
    rows, total = _children_page_rows(_CHILDREN_PAGE_VERSIONS, caller, page, per_page, connection)
    return page_of([sub_client_row_version(row) for row in rows], total, page, per_page)


def _children_page_rows(
    statement: DriverStatement, caller: Caller, page: int, per_page: int, connection: Connection | None
) -> tuple[list[Any], int]:
    """The rows of `statement` (a `_children_page`) for this page, and the count of every child;
    an empty page counts again."""
    if connection is None:
        connection = db.session.connection()
    parent = {"parent_id": caller.acting_client_id}
    rows = statement.all(connection, {**parent, "limit": per_page, "offset": (page - 1) * per_page})
    total = rows[0].total if rows else _CHILDREN_COUNT.first(connection, parent).total
    return rows, total


class SubClientRow:
    """A sub-client as a page reads it: its members by attribute (as `read_sub_client`'s row), the
    JSON ones decoded at their first use, so an answer built before from the same columns costs
    no decoding.

    `key` names the sub-client within its tenant (the tree's root id, the client id) and `version`
    its row's version (`sub_client_row_version`).
    """

    __slots__ = ("_row", "_decoded", "key", "version")

    def __init__(self, row: Any, tenant: int) -> None:
        self._row = row
        self._decoded: dict[str, Any] | None = None
        self.key = (tenant, row.id)
        self.version = sub_client_row_version(row)

    def __getattr__(self, name: str) -> Any:
        if name in _JSON_READ:
            if self._decoded is None:
                self._decoded = {member: _json_of_text(getattr(self._row, member)) for member in _JSON_READ}
            return self._decoded[name]
        return getattr(self._row, name)


def _json_of_text(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _apply_members(client: Client, members: dict[str, Any]) -> None:
    for name in _SUB_CLIENT_MEMBERS:
        if name not in members:
            continue
        value = members[name]
        if name == "timezone" and value is None:
            value = "UTC"
        if name == "signing_alg" and value is None:
            value = DEFAULT_SIGNING_ALG
        if name in ("client_credentials_scopes", "grant_types") and value is None:
            value = []
        if name == "grant_types":
            value = [grant for grant in GRANT_TYPES if grant in set(value) - set(BASE_GRANT_TYPES)]
        if name in _FALSE_WHEN_NULL and value is None:
            value = False
        if name == "reads_credentials" and value is None:
            value = True
        setattr(client, name, value)


def _ensure_sender_unique(client: Client) -> None:
    if client.subdomain is None or client.domain is None:
        return
    statement = select(Client.id).where(Client.subdomain == client.subdomain, Client.domain == client.domain)
    if client.id is not None:
        statement = statement.where(Client.id != client.id)
    with db.session.no_autoflush:
        clash = db.session.execute(statement.limit(1)).first()
    if clash is not None:
        raise SubdomainTaken(f"{client.subdomain}.{client.domain} is already used by another client.")


def _flush_guarding_sender(client: Client) -> None:
    try:
        with db.session.begin_nested():
            db.session.add(client)
    except IntegrityError as exc:  # a concurrent request took the same (subdomain, domain)
        raise SubdomainTaken(f"{client.subdomain}.{client.domain} is already used by another client.") from exc


def from_email_address(client: Client) -> str:
    """The sender address of the client's e-mail: `no-reply@<subdomain>.<domain>` or the default."""
    if client.subdomain and client.domain:
        return f"no-reply@{client.subdomain}.{client.domain}"
    return current(TenancySettings).mail_default_from


_PRIVACY_TAG_LENGTH = 32
# Every sub-client answer shows its privacy link: an HMAC per client and key, built again only when the keys change.
_PRIVACY_TAGS: Cache[tuple[str, ...]] = Cache("privacy_tags", maxsize=10_000)


def _privacy_tags(client_id: int) -> tuple[str, ...]:
    return _PRIVACY_TAGS.get_or_build(
        client_id,
        version=current_app.config["SECRET_HASH_KEY"],  # what `secret_hash_candidates` hashes with
        build=lambda: tuple(
            candidate[:_PRIVACY_TAG_LENGTH] for candidate in secret_hash_candidates(f"privacy-page:{client_id}")
        ),
    )


def privacy_reference(client: Client) -> str:
    """`<client_id>-<keyed tag>`: names the default privacy page without letting anyone walk every id."""
    return f"{client.id}-{_privacy_tags(client.id)[0]}"


def client_id_of_privacy_reference(reference: str) -> int | None:
    """The client id a privacy reference was made for, or None when it is malformed or forged."""
    number, _, tag = (reference or "").partition("-")
    if not (number.isascii() and number.isdigit()) or len(number) > 18 or not tag:
        return None
    if not any(texts_equal(tag, expected) for expected in _privacy_tags(int(number))):
        return None
    return int(number)


def privacy_link(client: Client) -> str:
    """The URL of the client's privacy notice (default `<BASE_URL>/privacy/<client_id>-<tag>`)."""
    return client.privacy_link or f"{current_app.config['BASE_URL']}/privacy/{privacy_reference(client)}"


def answer_settings() -> tuple[str, str, str]:
    """What an answer about a sub-client reads besides its columns: the settings of
    `from_email_address` and `privacy_link` (kept beside them: a setting added there is added here)."""
    config = current_app.config
    return config["BASE_URL"], config["SECRET_HASH_KEY"], current(TenancySettings).mail_default_from


def list_clients(*, include_disabled: bool = True) -> list[Client]:
    """Every client, in tree order (for operators)."""
    statement = select(Client).order_by(Client.root_id, Client.path)
    if not include_disabled:
        statement = statement.where(Client.disabled_at.is_(None))
    return list(db.session.execute(statement).scalars())


def list_enabled_masters_named(name: str) -> list[Client]:
    """The enabled master clients called `name`, oldest first (for operators)."""
    statement = (
        select(Client)
        .where(Client.parent_id.is_(None), Client.name == name, Client.disabled_at.is_(None))
        .order_by(Client.id)
    )
    return list(db.session.execute(statement).scalars())


def disable_client(client_id: int) -> int:
    """Disable a client and its whole subtree: their API tokens stop working. Returns how many changed.

    Raises `NotFound` for an unknown client. Already disabled clients keep their original time.
    """
    client = db.session.get(Client, client_id)
    if client is None:
        raise NotFound(f"No client {client_id}.")
    result = db.session.execute(
        update(Client)
        .where(Client.path.startswith(client.path, autoescape=True), Client.disabled_at.is_(None))
        .values(disabled_at=utcnow())
        .execution_options(synchronize_session="fetch")
    )
    return result.rowcount or 0


def configure_client(client_id: int, changes: dict[str, Any]) -> Client:
    """The operator's update of any client's members (`SubClientFields` names and the operator's
    own, `dpop_bound_access_tokens` and the `*_signed_response_alg`s of userinfo and JARM; already valid).

    Raises `NotFound` (an unknown id) and `SubdomainTaken` (409). Flushes, never commits.
    """
    client = db.session.get(Client, client_id)
    if client is None:
        raise NotFound(f"No client {client_id}.")
    _apply_members(client, changes)
    for name in _OPERATOR_MEMBERS:
        if name in changes:
            setattr(client, name, changes[name])
    _ensure_sender_unique(client)
    _flush_guarding_sender(client)
    return client


def configure_recaptcha(
    client_id: int, *, site_key: str, secret: str | None, threshold: float, enabled: bool
) -> Client:
    """Set a client's reCAPTCHA v3 settings (the secret is stored encrypted). Raises `NotFound`."""
    from app.security import encrypt

    client = db.session.get(Client, client_id)
    if client is None:
        raise NotFound(f"No client {client_id}.")
    client.recaptcha_key = site_key
    if secret is not None:
        client.recaptcha_secret_encrypted = encrypt(secret.encode(), "recaptcha-secret")
    client.recaptcha_threshold = threshold
    client.recaptcha_enabled = enabled
    db.session.flush()
    return client


def set_sign_in_policy(client_id: int, policy: str) -> Client:
    """Set how users of a master client's tree sign in (one of `SIGN_IN_POLICIES`; sub-clients
    inherit it). Raises `NotFound` (an unknown id) and `BadRequest` (a sub-client or an unknown
    policy). Flushes, never commits."""
    client = db.session.get(Client, client_id)
    if client is None:
        raise NotFound(f"No client {client_id}.")
    if not client.is_master:
        raise BadRequest("A sign-in policy is set on the master client; its sub-clients inherit it.")
    if policy not in SIGN_IN_POLICIES:
        raise BadRequest(f"The sign-in policy must be one of {', '.join(SIGN_IN_POLICIES)}.")
    client.sign_in_policy = policy
    db.session.flush()
    return client


# --- client secrets ------------------------------------------------------------------------------


def rotate_client_secret(caller: Caller, client_id: int) -> IssuedClientSecret:
    """Create or replace the client secret of a client in the caller's acting subtree.

    Only the hash of the new secret is stored. The previous secret stays
    valid for `CLIENT_SECRET_GRACE_SECONDS` (default one day). Raises `NotFound` outside the subtree.
    """
    return issue_client_secret(require_sub_client(caller, client_id))


def issue_client_secret(client: Client) -> IssuedClientSecret:
    """Create or replace `client`'s secret (already authorised), as `rotate_client_secret` says. Flushes."""
    secret = random_token(32)
    grace = current(TenancySettings).client_secret_grace_seconds
    if client.secret_hash and grace > 0:
        client.previous_secret_hash = client.secret_hash
        client.previous_secret_expires_at = utcnow() + timedelta(seconds=grace)
    else:
        client.previous_secret_hash = None
        client.previous_secret_expires_at = None
    client.secret_hash = hash_secret(secret)
    # Sealed, not hashed, as well: client_secret_jwt needs the secret itself to check an HMAC.
    client.secret_encrypted = encrypt(secret.encode(), CLIENT_SECRET_PURPOSE)
    db.session.flush()
    return IssuedClientSecret(client.id, secret, client.previous_secret_expires_at)


def sealed_client_secret(client: Client) -> str | None:
    """`client`'s current secret in clear, for an operator command; None for a secret sealed before
    secrets were (only its hash is kept)."""
    return decrypt(client.secret_encrypted, CLIENT_SECRET_PURPOSE).decode() if client.secret_encrypted else None


def client_secret_clause(hashes: Sequence[Any], now: Any) -> Any:
    """`verify_client_secret` as a condition on the outer `Client`, for statements of other features:
    `hashes` are bound parameters of the presented secret's `secret_hash_candidates` (one per hash
    key), `now` the time of the check. The caller's statement also holds `enabled_client_clause()`."""
    return or_(
        Client.secret_hash.in_(hashes),
        and_(Client.previous_secret_hash.in_(hashes), Client.previous_secret_expires_at > now),
    )


def verify_client_secret(client: Client, secret: str) -> bool:
    """Whether `secret` is the client's current secret, or its previous one within the grace period
    (`client_secret_clause` says the same in SQL).

    Constant time with respect to the secret; a disabled client never verifies.
    """
    if client.disabled_at is not None or not secret:
        return False
    current = verify_secret(secret, client.secret_hash)
    previous = verify_secret(secret, client.previous_secret_hash)
    if previous:
        expires_at = as_utc(client.previous_secret_expires_at)
        previous = expires_at is not None and utcnow() < expires_at
    return current or previous


# --- API tokens ----------------------------------------------------------------------------------


def issue_api_token(client_id: int, *, name: str = "", expires_at: datetime | None = None) -> IssuedToken:
    """Create an API token for a client; the plaintext is returned once and stored only hashed."""
    plaintext = TOKEN_PREFIX + random_token(32)
    token = ApiToken(
        client_id=client_id,
        name=name,
        token_hash=hash_secret(plaintext),
        prefix=plaintext[: len(TOKEN_PREFIX) + 6],
        expires_at=expires_at,
        created_at=utcnow(),
    )
    db.session.add(token)
    db.session.flush()
    return IssuedToken(token=token, plaintext=plaintext)


def create_api_token(caller: Caller, *, name: str = "", expires_at: datetime | None = None) -> IssuedToken:
    """Issue an API token for the caller's acting node. Raises `TooManyApiTokens` (409) over the cap."""
    if count_active_tokens(caller.acting_client_id) >= MAX_ACTIVE_TOKENS_PER_CLIENT:
        raise TooManyApiTokens(f"A client has at most {MAX_ACTIVE_TOKENS_PER_CLIENT} active API tokens.")
    return issue_api_token(caller.acting_client_id, name=name, expires_at=expires_at)


def _active_token_filter(now: datetime) -> Any:
    return (ApiToken.revoked_at.is_(None)) & ((ApiToken.expires_at.is_(None)) | (ApiToken.expires_at > now))


def count_active_tokens(client_id: int) -> int:
    statement = (
        select(func.count())
        .select_from(ApiToken)
        .where(ApiToken.client_id == client_id, _active_token_filter(utcnow()))
    )
    return db.session.scalar(statement) or 0


def list_api_tokens(client_id: int, page: int, per_page: int) -> Page:
    """The API tokens of one client (active, expired and revoked), newest first; never the secrets."""
    statement = select(ApiToken).where(ApiToken.client_id == client_id).order_by(ApiToken.id.desc())
    return paginate(statement, page, per_page)


def list_all_api_tokens(client_id: int) -> list[ApiToken]:
    """Every API token of one client, newest first (for operators)."""
    statement = select(ApiToken).where(ApiToken.client_id == client_id).order_by(ApiToken.id.desc())
    return list(db.session.execute(statement).scalars())


def get_api_token(token_id: int) -> ApiToken | None:
    return db.session.get(ApiToken, token_id)


def revoke_api_token(client_id: int, token_id: int) -> ApiToken:
    """Revoke one of `client_id`'s tokens (idempotent). Raises `NotFound` for any other token."""
    token = db.session.get(ApiToken, token_id)
    if token is None or token.client_id != client_id:
        raise NotFound("No such API token.")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        db.session.flush()
    return token


@dataclass(frozen=True)
class ActiveToken:
    """A valid API token and what a request needs of its client."""

    token_id: int
    last_used_at: datetime | None
    client_id: int
    parent_id: int | None
    root_id: int | None
    path: str


def find_active_token(plaintext: str, connection: Connection | None = None) -> ActiveToken | None:
    """The token if it is valid now (not revoked, expired or disabled), with its client's place in the tree.

    A token is refused too when an ancestor of its client is disabled. Read through `connection`
    when given (a read answered before Flask dispatches), else the session's.
    """
    # One round trip: the token, its client and the disabled-ancestor check together.
    hashes = secret_hash_candidates(plaintext)
    params = {f"hash_{index}": value for index, value in enumerate(hashes)}
    if connection is None:
        connection = db.session.connection()
    row = _active_token_statement(len(hashes)).first(connection, params)
    if row is None or (row.expires_at is not None and as_utc(row.expires_at) <= utcnow()):
        return None
    return ActiveToken(row.token_id, as_utc(row.last_used_at), row.client_id, row.parent_id, row.root_id, row.path)


def stamp_token_use(token_id: int, now: datetime) -> None:
    """Record that the token was used at `now` (written with the request's unit of work)."""
    token = db.session.get(ApiToken, token_id)
    if token is not None:
        token.last_used_at = now
