"""Social links and data: link flows, fetch jobs, and the social data snapshot (design 7).

Services flush, never commit; the request or task around them owns the transaction. Fetching
happens only in `fetch_link_from_job` (run by the worker); web requests start at most one fetch
job per link at a time (`request_fetch`). `social_data_or_first_fetch` commits a first fetch job
before the edge (`commit_before_the_edge`), then ends read-only transactions while it waits for it.

The other commit before the edge in this module is `_commit_rotated_tokens`. A platform rotates
the refresh token on every refresh, so the old one is dead the moment a new one is issued; when the
fetch is then deferred (rate limit, transient fault) the task's unit of work rolls back, and the
new tokens would be lost with it, breaking the link. They are committed at once instead, ending
the task's transaction early: at that point it holds nothing else (a deferred fetch writes nothing
more). A second connection cannot do it: on SQLite the task's transaction holds the write lock.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from cryptography.exceptions import InvalidTag
from sqlalchemy import delete, or_, select, update
from sqlalchemy.exc import IntegrityError

from app.config import CoreSettings
from app.db import after_commit_publish, as_utc, commit_before_the_edge, isoformat, rollback, utcnow
from app.extensions import db
from app.jobs.models import FAILED, Job
from app.jobs.service import CallOutside, enqueue_job
from app.security import decrypt, encrypt, hash_secret, random_token
from app.settings import current
from app.social import openid2
from app.social.budget import CallBudget
from app.social.connectors import (
    BudgetExhausted,
    ChatConnector,
    ConnectorError,
    GameStoreConnector,
    LinkBroken,
    OAuthApp,
    PlatformMisconfigured,
    PlatformUnavailable,
    RateLimited,
    StreamingConnector,
    TokenSet,
    call_with_refresh,
    platform_b,
    platform_c,
    retry_delay,
)
from app.social.errors import (
    FetchDeferred,
    LinkBrowserRefused,
    LinkStateInvalid,
    PlatformNotConfigured,
    SocialLinkNotFound,
    UnknownPlatform,
)
from app.social.locks import ShortClaims
from app.social.models import BROKEN, LINKED, PLATFORMS, OpenIdNonce, SocialLink, SocialLinkAttempt
from app.social.settings import SocialSettings
from app.tenancy.caller import Caller
from app.users.service import require_user_visible

FETCH_JOB = "social.fetch"
_TOKEN_PURPOSE = "social.platform-token"
_CLAIM_TTL_SECONDS = 10.0
_WAIT_POLL_SECONDS = 0.05

_shared: dict[tuple[str, str], Any] = {}
_shared_lock = threading.Lock()


def settings() -> SocialSettings:
    """The social settings of the current application."""
    return current(SocialSettings)


def _base_url() -> str:
    return current(CoreSettings).base_url


def _callback_url(platform: str) -> str:
    """Where a platform sends the user back (register this URL at platforms B and C)."""
    return f"{_base_url()}/v1/social/{platform}/callback"


def _process_wide(key: tuple[str, str], build: Callable[[], Any]) -> Any:
    # One object per process and configuration, so the in-memory fallbacks are shared by threads.
    with _shared_lock:
        if key not in _shared:
            _shared[key] = build()
        return _shared[key]


def _call_budget(config: SocialSettings) -> CallBudget:
    core = current(CoreSettings)
    return _process_wide(
        ("budget", f"{core.redis_url}|{sorted(config.budgets.items())}"),
        lambda: CallBudget(config.budgets, redis_url=core.redis_url or None, socket_timeout=core.redis_socket_timeout),
    )


def _claims(config: SocialSettings) -> ShortClaims:
    core = current(CoreSettings)
    return _process_wide(
        ("claims", core.redis_url),
        lambda: ShortClaims(core.redis_url or None, socket_timeout=core.redis_socket_timeout),
    )


def require_platform(platform: str) -> str:
    """The platform name if supported; `UnknownPlatform` (404) otherwise."""
    if platform not in PLATFORMS:
        raise UnknownPlatform(f"Supported platforms: {', '.join(PLATFORMS)}.")
    return platform


# --- linking -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkStarted:
    authorization_url: str
    expires_at: datetime


def start_link(caller: Caller, user_id: int, platform: str, return_to: str) -> LinkStarted:
    """Begin linking `platform` for a user: the URL the user must open to prove the account.

    The user comes back through `complete_link`, then to `return_to`. Flushes; raises
    `NotFound`, `UnknownPlatform`, `PlatformNotConfigured`.
    """
    require_platform(platform)
    user = require_user_visible(user_id, caller.acting_path)
    config = settings()
    state = random_token(32)
    expires_at = utcnow() + timedelta(seconds=config.link_ttl)
    db.session.add(
        SocialLinkAttempt(
            state_hash=hash_secret(state),
            user_id=user.id,
            client_id=caller.acting_client_id,
            platform=platform,
            return_to=return_to,
            created_at=utcnow(),
            expires_at=expires_at,
        )
    )
    db.session.flush()
    if platform == "platform_a":
        url = openid2.build_checkid_setup_url(
            return_to=_openid_return_to(config, state), realm=f"{_base_url()}/", op_endpoint=config.a_openid_url
        )
    else:
        url = oauth_app_of(config, platform).authorization_url(redirect_uri=_callback_url(platform), state=state)
    return LinkStarted(authorization_url=url, expires_at=expires_at)


def complete_link(platform: str, params: Mapping[str, str], browser_user_id: int | None) -> str:
    """Finish a link flow from the platform's callback; returns where to send the user.

    `browser_user_id` is the user this browser is signed in as (hosted sign-in), None when it is
    not: the link is bound to the browser of its user (RFC 6749 §10.12), so a callback opened by any
    other browser (someone sent the authorization URL to another person, whose platform account
    would be linked to the sender) raises `LinkBrowserRefused` (403) and links nothing; the platform
    is not called. An unknown, used or expired `state` raises `LinkStateInvalid` (400). Either way,
    and whatever follows, the attempt is spent. Anything the platform refuses (cancelled sign-in,
    forged or replayed assertion, bad code) sends the user to `return_to` with
    `status=error&error=<code>`; success stores the link, starts its first fetch and sends the user
    to `return_to` with `status=linked`. Flushes.
    """
    require_platform(platform)
    config = settings()
    attempt = _consume_attempt(platform, params.get("state", ""))
    for_this_browser = browser_user_id is not None and browser_user_id == attempt.user_id
    # The platform is called with no transaction open; the attempt stays spent whatever it answers,
    # and whoever's browser brought it back.
    commit_before_the_edge("a link attempt is spent before its browser is checked and its platform called")
    if not for_this_browser:
        raise LinkBrowserRefused(
            "This link can only be finished in a browser signed in as the person whose account is being "
            "linked, and this browser is not: nothing was linked. If it is yours, sign in to the application "
            "in this browser, then start linking again from there."
        )
    refusal = params.get("error")
    if refusal:  # the user declined consent, or the platform refused the request
        code = refusal if re.fullmatch(r"[a-z_]{1,40}", refusal) else "authorization_failed"
        return _with_query(attempt.return_to, status="error", platform=platform, error=code)
    try:
        if platform == "platform_a":
            account_id, account_name, tokens = _verify_openid(config, params)
        else:
            account_id, account_name, tokens = _exchange_code(config, platform, params)
    except openid2.OpenIdVerificationFailed:
        return _with_query(attempt.return_to, status="error", platform=platform, error="assertion_refused")
    except ConnectorError as error:
        return _with_query(attempt.return_to, status="error", platform=platform, error=error.code)
    link = store_link(attempt.user_id, attempt.client_id, platform, account_id, account_name, tokens)
    request_fetch(link)
    return _with_query(attempt.return_to, status="linked", platform=platform)


def _openid_return_to(config: SocialSettings, state: str) -> str:
    return f"{_callback_url('platform_a')}?{urlencode({'state': state})}"


def _consume_attempt(platform: str, state: str) -> SocialLinkAttempt:
    if not state:
        raise LinkStateInvalid("The callback carries no state.")
    attempt = db.session.execute(
        select(SocialLinkAttempt).where(SocialLinkAttempt.state_hash == hash_secret(state)).with_for_update()
    ).scalar_one_or_none()
    if (
        attempt is None
        or attempt.platform != platform
        or attempt.used_at is not None
        or as_utc(attempt.expires_at) <= utcnow()
    ):
        raise LinkStateInvalid("This link request is unknown, already used or expired; start it again.")
    attempt.used_at = utcnow()
    db.session.flush()
    return attempt


def _verify_openid(config: SocialSettings, params: Mapping[str, str]) -> tuple[str, str | None, TokenSet | None]:
    assertion = openid2.verify_id_res(
        params,
        return_to=_openid_return_to(config, params["state"]),
        op_endpoint=config.a_openid_url,
        claimed_id_prefix=config.a_claimed_id_prefix,
        timeout=config.http_timeout,
    )
    record_openid_nonce(assertion.nonce)
    return assertion.account_id, None, None


def record_openid_nonce(nonce: str) -> None:
    """Remember an accepted OpenID `response_nonce`; `OpenIdVerificationFailed` when it was seen before
    (a replayed assertion). Flushes."""
    if db.session.get(OpenIdNonce, nonce) is not None:
        raise openid2.OpenIdVerificationFailed("response_nonce already used")
    try:
        with db.session.begin_nested():
            db.session.add(OpenIdNonce(nonce=nonce, seen_at=utcnow()))
    except IntegrityError as exc:  # the same assertion arrived twice at once
        raise openid2.OpenIdVerificationFailed("response_nonce already used") from exc


def _exchange_code(
    config: SocialSettings, platform: str, params: Mapping[str, str]
) -> tuple[str, str | None, TokenSet | None]:
    code = params.get("code")
    if not code:
        raise LinkBroken(f"{platform}: callback without an authorization code")
    account, tokens = exchange_code_for_account(config, platform, code, _callback_url(platform))
    return str(account["id"]), account.get("username" if platform == "platform_b" else "login"), tokens


def exchange_code_for_account(
    config: SocialSettings, platform: str, code: str, redirect_uri: str
) -> tuple[dict[str, Any], TokenSet]:
    """Exchange an OAuth code of platform B or C and read the account it was issued for (the raw
    `users/@me` or Helix user object). Calls the platform: no transaction may be open. Raises
    `ConnectorError` and `PlatformNotConfigured`."""
    tokens = oauth_app_of(config, platform).exchange_code(code=code, redirect_uri=redirect_uri)
    if platform == "platform_b":
        with ChatConnector(api_base=config.b_api_base, timeout=config.http_timeout) as chat:
            return chat.fetch_current_user(tokens.access_token), tokens
    with StreamingConnector(
        client_id=config.c_client_id, api_base=config.c_api_base, timeout=config.http_timeout
    ) as streaming:
        return streaming.fetch_current_user(tokens.access_token), tokens


def store_link(
    user_id: int,
    client_id: int,
    platform: str,
    account_id: str,
    account_name: str | None,
    tokens: TokenSet | None,
) -> SocialLink:
    """Store (or replace) the user's link to a proven platform account, with its tokens. Flushes."""
    link = _find_link(user_id, platform)
    now = utcnow()
    if link is None:
        link = SocialLink(user_id=user_id, client_id=client_id, platform=platform)
        db.session.add(link)
    if link.account_id != account_id:
        # Another account's data must never be shown as this one's.
        link.data = None
        link.last_fetched_at = None
    link.account_id = account_id
    link.account_name = account_name
    link.status = LINKED
    link.linked_at = now
    link.last_attempted_at = None
    link.last_error = None
    link.next_fetch_at = None
    store_tokens(link, tokens)
    db.session.flush()
    return link


def unlink(caller: Caller, user_id: int, platform: str) -> None:
    """Remove a link and its data. Flushes; raises `NotFound` / `SocialLinkNotFound`."""
    require_platform(platform)
    user = require_user_visible(user_id, caller.acting_path)
    link = _find_link(user.id, platform)
    if link is None:
        raise SocialLinkNotFound(f"The user has no {platform} link.")
    db.session.delete(link)
    db.session.flush()


def list_links(caller: Caller, user_id: int) -> list[SocialLink]:
    """The user's links, in platform order, with failed fetches settled (see `pending_fetch`).

    Flushes; raises `NotFound`.
    """
    user = require_user_visible(user_id, caller.acting_path)
    links = _links_of(user.id)
    for link in links:
        pending_fetch(link)
    return links


def _find_link(user_id: int, platform: str) -> SocialLink | None:
    return db.session.execute(
        select(SocialLink).where(SocialLink.user_id == user_id, SocialLink.platform == platform)
    ).scalar_one_or_none()


def _links_of(user_id: int) -> list[SocialLink]:
    links = db.session.execute(select(SocialLink).where(SocialLink.user_id == user_id)).scalars().all()
    return sorted(links, key=lambda link: PLATFORMS.index(link.platform))


# --- tokens ------------------------------------------------------------------------------------


def store_tokens(link: SocialLink, tokens: TokenSet | None) -> None:
    """Keep `tokens` on the link, encrypted at rest (None clears them). Flushes nothing."""
    for column, value in _token_columns(tokens).items():
        setattr(link, column, value)


def _token_columns(tokens: TokenSet | None) -> dict[str, Any]:
    if tokens is None:
        return {"access_token_encrypted": None, "refresh_token_encrypted": None, "token_expires_at": None, "scope": ""}
    return {
        "access_token_encrypted": encrypt(tokens.access_token.encode(), _TOKEN_PURPOSE),
        "refresh_token_encrypted": (
            encrypt(tokens.refresh_token.encode(), _TOKEN_PURPOSE) if tokens.refresh_token else None
        ),
        "token_expires_at": (datetime.fromtimestamp(tokens.expires_at, tz=UTC) if tokens.expires_at else None),
        "scope": tokens.scope[:255],
    }


def _tokens_of(link: _FetchTarget) -> TokenSet:
    if not link.access_token_encrypted:
        raise LinkBroken(f"{link.platform}: no token stored")
    expires_at = as_utc(link.token_expires_at)
    try:
        access_token = decrypt(link.access_token_encrypted, _TOKEN_PURPOSE).decode()
        refresh_token = (
            decrypt(link.refresh_token_encrypted, _TOKEN_PURPOSE).decode() if link.refresh_token_encrypted else None
        )
    except (ValueError, InvalidTag) as exc:  # its encryption key was retired from the configuration
        raise LinkBroken(f"{link.platform}: stored token cannot be decrypted") from exc
    return TokenSet(
        access_token=access_token,
        refresh_token=refresh_token,
        expires_at=expires_at.timestamp() if expires_at else None,
        scope=link.scope,
    )


def _commit_rotated_tokens(link: SocialLink, tokens: TokenSet) -> None:
    """Store rotated tokens and commit them now (see the module docstring).

    Only for a fetch about to be deferred, which has written nothing else: the rollback that
    follows the deferral must not take the only working refresh token with it.
    """
    store_tokens(link, tokens)
    commit_before_the_edge("rotated OAuth tokens must outlive the rollback of a deferred fetch")


def oauth_app_of(config: SocialSettings, platform: str) -> OAuthApp:
    """The service's OAuth client at platform B or C; `PlatformNotConfigured` without one."""
    if platform == "platform_b":
        if not config.b_client_id:
            raise PlatformNotConfigured("platform_b has no OAuth client configured.")
        return platform_b.oauth_app(
            client_id=config.b_client_id,
            client_secret=config.b_client_secret,
            oauth_base=config.b_oauth_base,
            timeout=config.http_timeout,
        )
    if not config.c_client_id:
        raise PlatformNotConfigured("platform_c has no OAuth client configured.")
    return platform_c.oauth_app(
        client_id=config.c_client_id,
        client_secret=config.c_client_secret,
        oauth_base=config.c_oauth_base,
        timeout=config.http_timeout,
    )


# --- fetch jobs --------------------------------------------------------------------------------


def pending_fetch(link: SocialLink) -> Job | None:
    """The link's fetch job while it is queued or running, else None.

    A fetch job that ended failed without the service recording it (the worker gave up after
    retrying a database fault, or rolled the handler back) still names the link: its error becomes
    the link's `last_error` here. Flushes.
    """
    if not link.fetch_job_id:
        return None
    job = db.session.get(Job, link.fetch_job_id)
    if job is not None and job.state == FAILED:
        _settle_failed_fetch(link, job)
    return job if job is not None and not job.is_final else None


def _settle_failed_fetch(link: SocialLink, job: Job) -> None:
    error = job.error if isinstance(job.error, dict) else {}
    ended = as_utc(job.finished_at) or utcnow()
    # Conditional on the job id: of concurrent readers one settles, and a newer fetch is never undone.
    settled = db.session.execute(
        update(SocialLink)
        .where(SocialLink.id == link.id, SocialLink.fetch_job_id == job.id)
        .values(
            fetch_job_id=None,
            last_attempted_at=ended,
            last_error={
                "code": str(error.get("code") or "fetch_failed"),
                "detail": str(error.get("detail") or "The fetch job failed."),
                "at": isoformat(ended),
            },
        ),
        execution_options={"synchronize_session": False},
    )
    if settled.rowcount:
        db.session.refresh(link)


def request_fetch(link: SocialLink) -> Job | None:
    """Start a fetch job for `link` unless one is pending; returns the job that will fetch.

    De-duplicated across concurrent requests and processes: a short shared claim keeps all but one
    caller from writing, and a compare-and-set on `fetch_job_id` makes the database the judge.
    Returns None when another caller is starting the job at this moment. Flushes.
    """
    pending = pending_fetch(link)
    if pending is not None:
        return pending
    config = settings()
    claim_key = f"fetch:{link.id}"
    claims = _claims(config)
    if not claims.claim(claim_key, _CLAIM_TTL_SECONDS):
        return None
    after_commit_publish(lambda: claims.release(claim_key))
    db.session.flush()
    observed = link.fetch_job_id
    marker = f"claim:{uuid.uuid4().hex}"
    unchanged = SocialLink.fetch_job_id.is_(None) if observed is None else SocialLink.fetch_job_id == observed
    claimed = db.session.execute(
        update(SocialLink).where(SocialLink.id == link.id, unchanged).values(fetch_job_id=marker),
        execution_options={"synchronize_session": False},
    )
    if claimed.rowcount != 1:
        return None
    job = enqueue_job(
        FETCH_JOB,
        {"link_id": link.id, "platform": link.platform, "user_id": link.user_id},
        client_id=link.client_id,
    )
    link.fetch_job_id = job.id
    db.session.flush()
    return job


def fetch_link_from_job(job: Job) -> dict | CallOutside:
    """Fetch one link's platform data (the worker's side of a `social.fetch` job).

    The platform is called with no transaction open (`CallOutside`): this reads the link, the
    call runs, and `_record_fetch` writes the outcome. Success replaces the link's data; a broken
    link is marked `broken` with its error; a rate limit or transient fault raises `FetchDeferred`
    (the task re-schedules itself; nothing is written except a rotated token) until
    `SOCIAL_MAX_ATTEMPTS`, then the error is recorded and the last good data kept. A spent call
    budget always defers, without counting against that cap. A fault of the service's own platform
    configuration (refused API key, missing credentials) is recorded on the link, which stays
    `linked` and is not fetched again for `SOCIAL_CONFIG_FAULT_DELAY`. A malformed platform answer
    is recorded at once and waits for the next regular refresh. Returns the job result.
    """
    link = db.session.get(SocialLink, job.payload["link_id"])
    if link is None:
        return {"platform": job.payload.get("platform"), "status": "unlinked"}
    if link.status == BROKEN:
        _release_fetch(link, job)
        return {"platform": link.platform, "status": BROKEN}
    config = settings()
    target = _FetchTarget.of(link)
    return CallOutside(call=partial(_call_platform, config, target), record=partial(_record_fetch, config, link.id))


@dataclass(frozen=True)
class _FetchTarget:
    """What the platform call needs from the link, read before the transaction ends."""

    platform: str
    account_id: str
    access_token_encrypted: str | None
    refresh_token_encrypted: str | None
    token_expires_at: datetime | None
    scope: str

    @classmethod
    def of(cls, link: SocialLink) -> _FetchTarget:
        return cls(
            link.platform,
            link.account_id,
            link.access_token_encrypted,
            link.refresh_token_encrypted,
            link.token_expires_at,
            link.scope,
        )


@dataclass(frozen=True)
class _Fetched:
    """The platform call's outcome: its data or its error, and every token set it was refreshed to."""

    data: dict[str, Any] | None
    error: ConnectorError | PlatformNotConfigured | None
    refreshed: list[TokenSet]


def _call_platform(config: SocialSettings, target: _FetchTarget) -> _Fetched:
    refreshed: list[TokenSet] = []
    try:
        return _Fetched(_fetch_platform(config, target, refreshed.append), None, refreshed)
    except (ConnectorError, PlatformNotConfigured) as error:
        return _Fetched(None, error, refreshed)


def _record_fetch(config: SocialSettings, link_id: int, job: Job, fetched: _Fetched) -> dict:
    """Write a platform call's outcome on the link (see `fetch_link_from_job`)."""
    link = db.session.get(SocialLink, link_id)
    if link is None:
        return {"platform": job.payload.get("platform"), "status": "unlinked"}
    error, refreshed = fetched.error, fetched.refreshed
    if isinstance(error, RateLimited | PlatformUnavailable):
        # Our own spent budget is no failure of the platform: wait for it without a cap.
        if isinstance(error, BudgetExhausted) or job.attempts < config.max_attempts:
            if refreshed:
                _commit_rotated_tokens(link, refreshed[-1])
            raise FetchDeferred(_deferral(error, job.attempts), error.detail) from error
        return _record_failure(link, job, error, refreshed)
    if isinstance(error, LinkBroken):
        link.status = BROKEN
        return _record_failure(link, job, error, refreshed)
    if isinstance(error, PlatformMisconfigured | PlatformNotConfigured):
        # Every link of the platform fails alike until an operator fixes the configuration: the
        # link keeps its status (no relinking afterwards) and waits instead of calling again soon.
        link.next_fetch_at = utcnow() + timedelta(seconds=config.config_fault_delay)
        return _record_failure(link, job, error, refreshed)
    if error is not None:  # a malformed answer: the next regular refresh tries again
        return _record_failure(link, job, error, refreshed)
    now = utcnow()
    if refreshed:
        store_tokens(link, refreshed[-1])
    link.data = fetched.data
    link.last_fetched_at = now
    link.last_attempted_at = now
    link.last_error = None
    link.next_fetch_at = None
    _release_fetch(link, job)
    return {"platform": link.platform, "status": "fetched", "fetched_at": isoformat(now)}


def _deferral(error: ConnectorError, attempt: int) -> float:
    delay = retry_delay(error, attempt)
    if isinstance(error, BudgetExhausted):
        # Jobs refused together would come back together: spread them over the next second.
        delay += random.random()
    return delay


def _fetch_platform(
    config: SocialSettings, target: _FetchTarget, on_refreshed: Callable[[TokenSet], None]
) -> dict[str, Any]:
    budget = _call_budget(config)
    if target.platform == "platform_a":
        if not config.a_api_key:
            raise PlatformNotConfigured("platform_a has no API key configured.")
        with GameStoreConnector(
            api_key=config.a_api_key, api_base=config.a_api_base, timeout=config.http_timeout, budget=budget
        ) as game_store:
            return game_store.fetch_social_data(target.account_id)
    oauth = oauth_app_of(config, target.platform)
    tokens = _tokens_of(target)
    if target.platform == "platform_b":
        with ChatConnector(api_base=config.b_api_base, timeout=config.http_timeout, budget=budget) as chat:
            return call_with_refresh(chat.fetch_social_data, tokens, oauth, on_refreshed)
    with StreamingConnector(
        client_id=config.c_client_id, api_base=config.c_api_base, timeout=config.http_timeout, budget=budget
    ) as streaming:
        return call_with_refresh(streaming.fetch_social_data, tokens, oauth, on_refreshed)


def _record_failure(
    link: SocialLink, job: Job, error: ConnectorError | PlatformNotConfigured, refreshed: list[TokenSet]
) -> dict:
    now = utcnow()
    if refreshed:
        store_tokens(link, refreshed[-1])
    link.last_error = {"code": error.code, "detail": error.detail, "at": isoformat(now)}
    link.last_attempted_at = now
    _release_fetch(link, job)
    return {"platform": link.platform, "status": "error", "error": {"code": error.code, "detail": error.detail}}


def _release_fetch(link: SocialLink, job: Job) -> None:
    if link.fetch_job_id == job.id:
        link.fetch_job_id = None


def schedule_stale_refreshes(limit: int | None = None) -> int:
    """Start fetch jobs for up to `limit` linked accounts whose data is older than the max age.

    Oldest first; links with a pending fetch are skipped. Flushes; returns how many were started.
    The platforms' budgets are enforced when the jobs call out (they re-schedule when spent).
    """
    config = settings()
    now = utcnow()
    cutoff = now - timedelta(seconds=config.data_max_age)
    candidates = (
        db.session.execute(
            select(SocialLink)
            .where(
                SocialLink.status == LINKED,
                or_(SocialLink.last_attempted_at.is_(None), SocialLink.last_attempted_at < cutoff),
                or_(SocialLink.next_fetch_at.is_(None), SocialLink.next_fetch_at <= now),
            )
            .order_by(SocialLink.last_attempted_at.asc().nulls_first(), SocialLink.id)
            .limit(limit or config.refresh_batch)
        )
        .scalars()
        .all()
    )
    started = sum(1 for link in candidates if pending_fetch(link) is None and request_fetch(link) is not None)
    return started


def purge_expired_link_records(older_than: timedelta = timedelta(days=1)) -> None:
    """Delete used or expired link attempts and OpenID nonces too old to be replayed. Flushes."""
    cutoff = utcnow() - older_than
    db.session.execute(delete(SocialLinkAttempt).where(SocialLinkAttempt.expires_at < cutoff))
    db.session.execute(delete(OpenIdNonce).where(OpenIdNonce.seen_at < cutoff))


# --- social data -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SocialData:
    """The user's spec 2.5 object and the age in seconds of its oldest member (None when empty)."""

    data: dict[str, Any]
    age_seconds: int | None


@dataclass(frozen=True)
class _SocialDataView:
    data: dict[str, Any] | None  # None while a first fetch runs and nothing was ever fetched
    age_seconds: int | None
    pending: tuple[Job, ...]


def social_data_or_first_fetch(caller: Caller, user_id: int) -> SocialData | Job:
    """The user's spec 2.5 data, or the fetch job of a first fetch still running after the wait.

    Data of a link last tried more than `SOCIAL_DATA_MAX_AGE` ago starts one de-duplicated refresh
    and is still returned at once. When the user has links but nothing fetched yet, commits before
    the edge (a fetch job reaches the worker only once committed, and it must before it can be
    waited for; the request's own commit comes after answering, too late), then polls for up to
    `SOCIAL_DATA_WAIT` seconds; each poll ends its read-only transaction with `rollback()` to see
    the worker's writes, on behalf of the edge. Returns the pending job when the wait ran out.
    Flushes; raises `NotFound`.
    """
    user = require_user_visible(user_id, caller.acting_path)
    view = _view_of(_links_of(user.id), start_refreshes=True)
    if view.data is None:
        commit_before_the_edge("a first fetch job reaches the worker before the request waits for it")
        view = _wait_for_first_fetch(caller, user_id, settings().data_wait)
    if view.data is None and view.pending:
        return view.pending[0]
    return SocialData(data=view.data or {}, age_seconds=view.age_seconds)


def _wait_for_first_fetch(caller: Caller, user_id: int, timeout: float) -> _SocialDataView:
    deadline = time.monotonic() + timeout
    while True:
        rollback()
        user = require_user_visible(user_id, caller.acting_path)
        view = _view_of(_links_of(user.id), start_refreshes=False)
        if view.data is not None or time.monotonic() >= deadline:
            return view
        # Never sleep inside a transaction: on SQLite a request's transaction holds the write lock
        # (BEGIN IMMEDIATE), and the worker saving this very fetch would fail with "database is locked".
        rollback()
        time.sleep(_WAIT_POLL_SECONDS)


def _view_of(links: list[SocialLink], *, start_refreshes: bool) -> _SocialDataView:
    config = settings()
    now = utcnow()
    data: dict[str, Any] = {}
    oldest: datetime | None = None
    pending: list[Job] = []
    first_fetch_running = False
    due = [link for link in links if pending_fetch(link) is None and _refresh_due(link, now, config.data_max_age)]
    # Of many concurrent readers of one user, one starts the refreshes and the rest only read.
    refresher = start_refreshes and bool(due) and _claim_user_refresh(config, links[0].user_id)
    for link in links:
        if link.data:
            data.update(link.data)
            fetched_at = as_utc(link.last_fetched_at)
            if fetched_at is not None and (oldest is None or fetched_at < oldest):
                oldest = fetched_at
        job = pending_fetch(link)
        if job is None and refresher and link in due:
            job = request_fetch(link)
        if job is not None:
            pending.append(job)
        # Never fetched yet: a job is pending, or another request is starting it right now.
        if link.status == LINKED and not link.data and (job is not None or link.last_attempted_at is None):
            first_fetch_running = True
    if not data and first_fetch_running:
        return _SocialDataView(data=None, age_seconds=None, pending=tuple(pending))
    age = max(0, int((now - oldest).total_seconds())) if oldest is not None else None
    return _SocialDataView(data=data, age_seconds=age, pending=tuple(pending))


def _claim_user_refresh(config: SocialSettings, user_id: int) -> bool:
    claims = _claims(config)
    key = f"user-refresh:{user_id}"
    if not claims.claim(key, _CLAIM_TTL_SECONDS):
        return False
    after_commit_publish(lambda: claims.release(key))
    return True


def _refresh_due(link: SocialLink, now: datetime, max_age: float) -> bool:
    if link.status != LINKED:
        return False
    not_before = as_utc(link.next_fetch_at)
    if not_before is not None and now < not_before:
        return False
    attempted = as_utc(link.last_attempted_at)
    return attempted is None or (now - attempted).total_seconds() >= max_age


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query, keep_blank_values=True) if key not in params]
    query.extend(params.items())
    return urlunsplit(parts._replace(query=urlencode(query)))
