"""Core settings (database, secrets, broker, web, jobs), declared in `CoreSettings`.

`Config` copies them into `app.config` under the keys Flask, Flask-SQLAlchemy, Celery and
Flask-Limiter read; feature settings live in `app/<feature>/settings.py` (see `app.settings`).
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kombu import Exchange, Queue

from app.dialect import postgres_json_loads
from app.ops.database import CALL_TIMEOUT_ARG, FREEZE_ARG
from app.settings import Derived, env, feature_settings, load


def _default_instance_dir() -> Path:
    """`instance/` of the source checkout; for a non-editable install, `<prefix>/var/tessera-instance`.

    Never relative to the current directory, so operator commands run from anywhere find the same
    database and secrets as the service.
    """
    project_root = Path(__file__).resolve().parent.parent
    if (project_root / "pyproject.toml").exists():
        return project_root / "instance"
    return Path(sys.prefix) / "var" / "tessera-instance"


# Needed before any application exists (Flask's instance path, operator commands); declared with
# the other core settings below (`CoreSettings.instance_dir`) so the settings table of docs/settings.md lists it.
INSTANCE_DIR = Path(os.environ.get("TESSERA_INSTANCE_DIR") or _default_instance_dir()).resolve()


def _sqlite_url(name: str) -> str:
    return f"sqlite:///{INSTANCE_DIR / name}"


# The databases Tessera runs on, as SQLAlchemy names them (backend and driver).
_DATABASE_DRIVERS = frozenset({"sqlite", "sqlite+pysqlite", "postgresql+psycopg"})


def _normalise_database_url(url: str) -> str:
    """postgres:// and postgresql:// URLs use psycopg 3; anything but PostgreSQL or SQLite is refused.

    The refusal never quotes the URL, which may hold a password.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url[len("postgres://") :]
    elif url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    expected = "postgresql://USER:PASSWORD@HOST/DATABASE or sqlite:////PATH/TO/FILE.sqlite"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(f"not a database URL; expected {expected}") from None
    if parsed.drivername not in _DATABASE_DRIVERS:
        raise ValueError(f"Tessera runs on PostgreSQL or SQLite, not {parsed.drivername!r}; expected {expected}")
    return url


def _shown(text: str) -> Derived:
    """A default `Config` works out from other settings (`CoreSettings` properties); `text` says how."""
    return Derived(lambda _config: "", text)


_EMBEDDED_SECRET = "SQLite: random, kept in `instance/`; PostgreSQL: required (start-up refuses without it)"


@feature_settings
@dataclass(frozen=True)
class CoreSettings:
    """Database, secrets, broker, web and job settings; `Config` copies them into `app.config`."""

    database_url: str = env(
        "DATABASE_URL",
        Derived(lambda _config: _sqlite_url("tessera.sqlite"), "SQLite `instance/tessera.sqlite`"),
        "PostgreSQL, e.g. `postgresql://user:pass@host/db` (psycopg 3 is used)",
        parse=_normalise_database_url,
    )
    redis_url: str = env(
        "REDIS_URL",
        "",
        "Celery broker, rate limits, shared call budgets (unset: broker on SQLite `instance/broker.sqlite`, "
        "limits in memory)",
    )
    secret_key: str = env("SECRET_KEY", _shown(_EMBEDDED_SECRET), "signs session cookies and CSRF tokens")
    encryption_keys: str = env(
        "ENCRYPTION_KEYS",
        _shown(_EMBEDDED_SECRET),
        "comma-separated keys for data at rest (signing keys, platform tokens); the first encrypts, all "
        "decrypt — prepend a new key to rotate",
    )
    secret_hash_key: str = env(
        "SECRET_HASH_KEY",
        _shown(_EMBEDDED_SECRET),
        "comma-separated keys of the HMAC that stores API tokens and client secrets; the first hashes, all "
        "are recognised — prepend a new key to rotate",
    )
    instance_dir: str = env(
        "TESSERA_INSTANCE_DIR",
        Derived(
            lambda _config: str(_default_instance_dir()),
            "`instance/` of the checkout (`<prefix>/var/tessera-instance` for a non-editable install), "
            "whatever the current directory",
        ),
        "where the embedded default keeps its databases and generated secrets",
    )
    port: int = env("PORT", 5000, "port of the `web` process (Procfile) and of the default `BASE_URL`")
    base_url_setting: str = env(
        "BASE_URL",
        _shown("`http://localhost:$PORT`"),
        "public address of the service (discovery, privacy links, `iss`, CLI hints); never a loopback IP "
        "address, where browsers refuse passkeys",
    )
    trusted_proxies: int = env(
        "TRUSTED_PROXIES",
        0,
        "number of reverse proxies whose `X-Forwarded-For/Proto/Host` are trusted (client address for rate "
        "limits, scheme and host of generated URLs)",
    )
    dev_outbox: bool = env(
        "DEV_OUTBOX",
        False,
        "`1`: keep mail in the database, readable at `/dev/outbox?to=<address>` (development only; refused "
        "unless `BASE_URL` is loopback http, warned when on)",
    )
    log_level: str = env("LOG_LEVEL", "INFO", "level of the application's logs")
    metrics_token: str = env(
        "METRICS_TOKEN",
        "",
        "bearer token Prometheus presents on `/metrics` (`Authorization: Bearer …`); unset, only loopback "
        "clients may scrape",
    )
    hsts_max_age: int = env(
        "HSTS_MAX_AGE",
        365 * 24 * 3600,
        "`Strict-Transport-Security` max-age on https responses (`BASE_URL` https, or "
        "`X-Forwarded-Proto: https` from `TRUSTED_PROXIES`); 0 sends none",
    )
    ratelimit_enabled: bool = env("RATELIMIT_ENABLED", True, "rate limits on")
    ratelimit_headers_enabled: bool = env(
        "RATELIMIT_HEADERS_ENABLED",
        False,
        "send `X-RateLimit-*` headers on rate-limited endpoints (each costs Redis round trips per request); "
        "a refusal always says `Retry-After`",
    )
    redis_socket_timeout: float = env(
        "REDIS_SOCKET_TIMEOUT",
        1.0,
        "seconds a Redis call of rate limits and social claims/budgets may take before they fall back to this process",
    )
    outbound_ca_bundle: str = env(
        "OUTBOUND_CA_BUNDLE",
        "",
        "CA bundle of outbound HTTPS calls (did:web, status lists, clients' `jwks_uri` and logout endpoints); "
        "unset, the system's",
    )
    outbound_deadline: float = env(
        "OUTBOUND_DEADLINE",
        5.0,
        "seconds a call to a client's `jwks_uri` or logout endpoint, or to the reCAPTCHA verifier, may take in all",
    )
    celery_broker_url: str = env(
        "CELERY_BROKER_URL", _shown("`REDIS_URL`"), "broker URL of Celery (overrides `REDIS_URL` for Celery)"
    )
    celery_queue: str = env("CELERY_QUEUE", "tessera", "queue of jobs")
    celery_sweep_queue: str = env(
        "CELERY_SWEEP_QUEUE",
        _shown("`<CELERY_QUEUE>.sweep`"),
        "queue of the outbox sweep (a worker without `-Q` consumes it and `CELERY_QUEUE`)",
    )
    celery_always_eager: bool = env("CELERY_ALWAYS_EAGER", False, "run jobs in the web process (tests only)")
    worker_prefetch_multiplier: int = env(
        "WORKER_PREFETCH_MULTIPLIER",
        1,
        "jobs a worker process reserves ahead; keep 1: on Redis a job delivered and not started within "
        "`OUTBOX_GRACE_SECONDS` counts as lost with its worker and is published again",
    )
    worker_shutdown_seconds: float = env(
        "WORKER_SHUTDOWN_SECONDS",
        1.5,
        "on SIGTERM/SIGINT, how long a worker lets running jobs finish before it hands them back to the queue; "
        "its stop takes about 2 s more, which must fit the supervisor's grace (honcho 5 s, Heroku 30 s)",
    )
    broker_visibility_timeout: int = env(
        "BROKER_VISIBILITY_TIMEOUT", 3600, "seconds before Redis hands an unacknowledged job to another worker"
    )
    outbox_grace_seconds: float = env(
        "OUTBOX_GRACE_SECONDS",
        10.0,
        "seconds after which the sweep publishes again a queued job the broker never accepted, or one a Redis "
        "broker no longer holds (taken by a worker that died before starting it)",
    )
    outbox_sweep_interval: float = env(
        "OUTBOX_SWEEP_INTERVAL", 5.0, "how often beat and every worker request a sweep, seconds"
    )
    job_lease_seconds: float = env(
        "JOB_LEASE_SECONDS", 60.0, "after this, a running job whose worker died is re-published"
    )
    job_republish_seconds: float = env(
        "JOB_REPUBLISH_SECONDS",
        300.0,
        "how long a job the broker accepted may wait in its queue before the sweep presumes it lost and "
        "publishes it again (the delay doubles with each publish, up to `JOB_REPUBLISH_MAX_SECONDS`); a Redis "
        "broker whose queues hold at most 1,000 messages is asked instead",
    )
    job_republish_max_seconds: float = env(
        "JOB_REPUBLISH_MAX_SECONDS", 3600.0, "the longest delay between two publishes of a waiting job"
    )
    job_max_retries: int = env("JOB_MAX_RETRIES", 5, "retries of a job on transient faults")
    job_stall_seconds: float = env(
        "JOB_STALL_SECONDS",
        60.0,
        "a queued job older than this makes `/readyz` report `queue.consuming: false` (no worker is taking "
        "jobs; readiness itself stays 200)",
    )
    job_retry_backoff_max: float = env(
        "JOB_RETRY_BACKOFF_MAX",
        300.0,
        "cap in seconds of a job's retry backoff after its handler failed (a database outage: `JOB_OUTAGE_RETRY_MAX`)",
    )
    job_outage_retry_max: float = env(
        "JOB_OUTAGE_RETRY_MAX",
        5.0,
        "cap in seconds of the delay between retries of a job, or of its final `failed` write, while the "
        "database is unreachable (those retries never count against a job's retries)",
    )
    retry_after_seconds: int = env("RETRY_AFTER_SECONDS", 5, "`Retry-After` of a 503 while a dependency is down")
    readyz_timeout: float = env(
        "READYZ_TIMEOUT", 1.5, "seconds within which `/readyz` answers, 503 for a dependency that has not answered"
    )
    idempotency_ttl_seconds: int = env(
        "IDEMPOTENCY_TTL_SECONDS", 24 * 3600, "how long an `Idempotency-Key` answer is replayed, seconds"
    )
    db_pool_size: int = env("DB_POOL_SIZE", 5, "PostgreSQL connections kept per process")
    db_max_overflow: int = env("DB_MAX_OVERFLOW", 10, "PostgreSQL connections beyond the pool under load")
    db_pool_timeout: float = env("DB_POOL_TIMEOUT", 5.0, "seconds a request waits for a pooled connection")
    db_pool_pre_ping: bool = env(
        "DB_POOL_PRE_PING",
        False,
        "test each pooled PostgreSQL connection with a round trip before use; off, a connection the server "
        "dropped fails one request with 503 and the pool is then renewed",
    )
    db_connect_timeout: int = env("DB_CONNECT_TIMEOUT", 3, "seconds to connect to PostgreSQL")
    db_statement_timeout_ms: int = env(
        "DB_STATEMENT_TIMEOUT_MS",
        10_000,
        "server-side statement timeout of every PostgreSQL connection (0: none; set 0, with `DB_CALL_TIMEOUT`, "
        "for a migration that rewrites a large table)",
    )
    db_call_timeout: float = env(
        "DB_CALL_TIMEOUT",
        15.0,
        "seconds a database call waits for PostgreSQL's answer (a frozen server: 503) or SQLite's write lock; "
        "above the statement timeout (0: no limit on PostgreSQL)",
    )
    db_freeze_seconds: float = env(
        "DB_FREEZE_SECONDS",
        2.0,
        "seconds within which a PostgreSQL call learns that the server is frozen (no call answered for half of it, "
        "then a new connection not answered in the other half): the calls waiting on it answer 503 (0: only "
        "`DB_CALL_TIMEOUT`)",
    )
    db_tcp_user_timeout_ms: int = env(
        "DB_TCP_USER_TIMEOUT_MS", 10_000, "a PostgreSQL connection whose sent data goes unacknowledged this long fails"
    )
    db_keepalives_idle: int = env("DB_KEEPALIVES_IDLE", 10, "seconds before an idle PostgreSQL connection is probed")
    db_keepalives_interval: int = env("DB_KEEPALIVES_INTERVAL", 3, "seconds between keepalive probes")
    db_keepalives_count: int = env("DB_KEEPALIVES_COUNT", 3, "unanswered probes before a connection counts as dead")

    @property
    def embedded(self) -> bool:
        """The embedded default (SQLite): it makes its own secrets and is a testnet."""
        return self.database_url.startswith("sqlite")

    @property
    def base_url(self) -> str:
        return (self.base_url_setting or f"http://localhost:{self.port}").rstrip("/")

    @property
    def broker_url(self) -> str:
        """Celery broker: `REDIS_URL` in production, kombu's SQLAlchemy transport on SQLite otherwise."""
        if self.celery_broker_url or self.redis_url:
            return self.celery_broker_url or self.redis_url
        from app.ops.broker import TRANSPORT_NAME

        return f"{TRANSPORT_NAME}+" + _sqlite_url("broker.sqlite")

    @property
    def sweep_queue(self) -> str:
        return self.celery_sweep_queue or f"{self.celery_queue}.sweep"


def core_settings() -> CoreSettings:
    """The core settings from the environment (`create_app(config=...)` overrides `app.config` after)."""
    return load(CoreSettings, {})


def database_url() -> str:
    """The database URL: `DATABASE_URL` (postgres:// normalised to psycopg 3) or embedded SQLite."""
    return core_settings().database_url


class Config:
    """Production-shaped defaults; every value can be overridden by `create_app(config=...)`."""

    def __init__(self) -> None:
        core = core_settings()
        self.SQLALCHEMY_DATABASE_URI = core.database_url
        # Only the embedded default (SQLite) makes its own secrets; on a shared database every host
        # must be given the same ones (`check_startup_safety` refuses to start without them).
        embedded = core.embedded
        self.SECRET_KEY = _secret(core.secret_key, "secret_key", embedded)
        # Key material for hashing secrets and encrypting data at rest. Comma-separated list:
        # the first key encrypts, every key decrypts, so keys can be rotated.
        self.ENCRYPTION_KEYS = _secret(core.encryption_keys, "encryption_key", embedded)
        self.SECRET_HASH_KEY = _secret(core.secret_hash_key, "secret_hash_key", embedded)
        self.SQLALCHEMY_ENGINE_OPTIONS = _engine_options(core)
        self.REDIS_URL = core.redis_url
        self.REDIS_SOCKET_TIMEOUT = core.redis_socket_timeout
        self.DEV_OUTBOX = core.dev_outbox
        queue = core.celery_queue
        self.CELERY = {
            "broker_url": core.broker_url,
            # Beside the embedded databases, wherever the instance directory is (not the current directory).
            "beat_schedule_filename": str(INSTANCE_DIR / "celerybeat-schedule"),
            "task_ignore_result": True,
            "task_acks_late": True,
            "task_reject_on_worker_lost": True,
            "worker_prefetch_multiplier": core.worker_prefetch_multiplier,
            # With the Procfile's REMAP_SIGTERM=SIGQUIT a stop is Celery's soft then cold shutdown: running
            # jobs get this long, then are cancelled and, acknowledged late, delivered again.
            "worker_soft_shutdown_timeout": core.worker_shutdown_seconds,
            "task_always_eager": core.celery_always_eager,
            "broker_connection_retry_on_startup": True,
            "broker_connection_timeout": 2,
            "task_publish_retry": False,
            "broker_transport_options": _broker_transport_options(core),
            **_broker_transport(core),
            "worker_hijack_root_logger": False,
            "timezone": "UTC",
            "task_default_queue": queue,
            # The outbox sweep has a queue of its own so it never waits behind a backlog of jobs;
            # a worker started without `-Q` consumes both.
            "task_queues": tuple(
                Queue(name, Exchange(queue, type="direct"), routing_key=name) for name in (queue, core.sweep_queue)
            ),
            "task_routes": {"jobs.sweep_outbox": {"queue": core.sweep_queue}},
        }
        self.RATELIMIT_STORAGE_URI = self.REDIS_URL or "memory://"
        # Redis down must not turn rate-limited endpoints into 500s: the limits then hold per
        # process (in memory) until Redis answers again, and a storage error never fails a request.
        self.RATELIMIT_IN_MEMORY_FALLBACK_ENABLED = True
        self.RATELIMIT_SWALLOW_ERRORS = True
        if self.REDIS_URL:
            self.RATELIMIT_STORAGE_OPTIONS = {
                "socket_connect_timeout": core.redis_socket_timeout,
                "socket_timeout": core.redis_socket_timeout,
            }
        # X-RateLimit-* headers would cost a storage round trip per allowed request; a refusal
        # still says Retry-After (the limit's window).
        self.RATELIMIT_HEADERS_ENABLED = core.ratelimit_headers_enabled
        self.RATELIMIT_ENABLED = core.ratelimit_enabled

        self.MAX_CONTENT_LENGTH = 1024 * 1024
        # Number of reverse proxies in front of the service whose X-Forwarded-* headers are trusted
        # (client addresses for rate limits, scheme and host for generated URLs).
        self.TRUSTED_PROXIES = core.trusted_proxies
        self.BASE_URL = core.base_url
        # Flask's session cookie carries the claim form's token: never sent by cross-site posts.
        self.SESSION_COOKIE_HTTPONLY = True
        self.SESSION_COOKIE_SAMESITE = "Lax"
        self.SESSION_COOKIE_SECURE = self.BASE_URL.startswith("https://")
        self.LOG_LEVEL = core.log_level
        # Bearer token of /metrics scrapes; unset, only the loopback interface may scrape.
        self.METRICS_TOKEN = core.metrics_token
        # Strict-Transport-Security max-age on https responses; 0 sends none.
        self.HSTS_MAX_AGE = core.hsts_max_age

        # Jobs: how long a queued job waits before the sweep re-publishes it, and how long a
        # running job may hold its lease before it is considered abandoned by a dead worker.
        self.OUTBOX_GRACE_SECONDS = core.outbox_grace_seconds
        self.OUTBOX_SWEEP_INTERVAL = core.outbox_sweep_interval
        self.JOB_LEASE_SECONDS = core.job_lease_seconds
        # A job the broker accepted but no worker took yet is waiting in a backlog, not lost: it is
        # published again only after this long, doubling after each publish up to the maximum.
        self.JOB_REPUBLISH_SECONDS = core.job_republish_seconds
        self.JOB_REPUBLISH_MAX_SECONDS = core.job_republish_max_seconds
        self.JOB_MAX_RETRIES = core.job_max_retries
        # A queued job older than this means no worker is consuming; /readyz and the CLI say so.
        self.JOB_STALL_SECONDS = core.job_stall_seconds
        self.JOB_RETRY_BACKOFF_MAX = core.job_retry_backoff_max
        # An outage is retried soon and without limit: accepted jobs run once the database is back.
        self.JOB_OUTAGE_RETRY_MAX = core.job_outage_retry_max
        self.RETRY_AFTER_SECONDS = core.retry_after_seconds
        # /readyz answers within this many seconds whatever its dependencies do.
        self.READYZ_TIMEOUT = core.readyz_timeout
        self.IDEMPOTENCY_TTL_SECONDS = core.idempotency_ttl_seconds

        self.API_TITLE = "Tessera"
        self.API_VERSION = version("tessera")  # the OpenAPI document's: the package's own
        self.OPENAPI_VERSION = "3.0.3"
        self.OPENAPI_URL_PREFIX = "/"
        self.OPENAPI_JSON_PATH = "openapi.json"
        self.OPENAPI_SWAGGER_UI_PATH = "/docs"
        # Served by the service (app/ops/docs.py) from the pinned swagger-ui-bundle package.
        self.OPENAPI_SWAGGER_UI_URL = "/docs/assets/"
        self.API_SPEC_OPTIONS = {
            "info": {
                "description": "Tessera identity platform API. Errors are RFC 9457 application/problem+json documents.",
            },
            "components": {
                "securitySchemes": {
                    "ApiToken": {"type": "apiKey", "in": "header", "name": "x-api-token"},
                    "BearerToken": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                }
            },
        }

    def as_dict(self) -> dict:
        return dict(vars(self))


def _engine_options(core: CoreSettings) -> dict:
    if core.embedded:
        # sqlite3's `timeout` is the busy timeout: how long a call waits for another's write lock.
        return {"connect_args": {"timeout": core.db_call_timeout, "check_same_thread": False}}
    connect_args: dict = {
        "connect_timeout": core.db_connect_timeout,
        # A partition must surface as an error, not a hang: keepalives find a dead idle connection,
        # tcp_user_timeout fails one whose sent data goes unacknowledged, and the server cancels
        # a statement that runs too long. A frozen server acknowledges and never answers, which
        # none of those notice: the client ends the wait (app/ops/database.py), once a new
        # connection finds the server frozen, at the latest at the call deadline.
        CALL_TIMEOUT_ARG: core.db_call_timeout,
        FREEZE_ARG: core.db_freeze_seconds,
        "keepalives": 1,
        "keepalives_idle": core.db_keepalives_idle,
        "keepalives_interval": core.db_keepalives_interval,
        "keepalives_count": core.db_keepalives_count,
        "tcp_user_timeout": core.db_tcp_user_timeout_ms,
    }
    statement_timeout = core.db_statement_timeout_ms
    if statement_timeout > 0:
        connect_args["options"] = f"-c statement_timeout={statement_timeout}"
    return {
        # A pre-ping costs a round trip per checkout; without it a connection the server dropped
        # fails one statement (503 to that request) and SQLAlchemy then recycles the whole pool.
        "pool_pre_ping": core.db_pool_pre_ping,
        "pool_size": core.db_pool_size,
        "max_overflow": core.db_max_overflow,
        "pool_timeout": core.db_pool_timeout,
        "connect_args": connect_args,
        "json_deserializer": postgres_json_loads,
    }


def _broker_transport(core: CoreSettings) -> dict:
    """kombu's Redis transport with one client per channel (`app.ops.broker`) for `redis://`.

    A `rediss://` broker keeps kombu's own transport: kombu derives its TLS default from that scheme.
    """
    if not core.broker_url.startswith("redis://"):
        return {}
    from app.ops.broker import REDIS_TRANSPORT_NAME

    return {"broker_transport": REDIS_TRANSPORT_NAME}


def _broker_transport_options(core: CoreSettings) -> dict:
    if not core.broker_url.startswith(("redis://", "rediss://")):
        return {}
    return {
        "visibility_timeout": core.broker_visibility_timeout,
        "socket_connect_timeout": 2,
        "socket_timeout": 5,
        "max_retries": 0,
    }


class UnsafeConfiguration(SystemExit):
    """Start-up refused because the settings would be unsafe; the process exits with status 3.

    The Procfile's web server (granian, which respawns a dead worker once but takes a second death within
    5.5 s for a crash loop) then shuts down instead of restarting workers forever, and a supervisor sees a
    non-zero exit; 3 also matches gunicorn's "worker failed to boot" for deployments that run the app under
    gunicorn.
    """

    EXIT_STATUS = 3

    def __init__(self, reason: str) -> None:
        super().__init__(self.EXIT_STATUS)
        self.reason = reason
        self.message = f"Tessera refuses to start: {reason}"

    def __str__(self) -> str:
        return self.message


SHARED_SECRETS = ("SECRET_KEY", "ENCRYPTION_KEYS", "SECRET_HASH_KEY")
_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


def is_loopback_http(url: str) -> bool:
    """True for an http:// address on this machine only (localhost, 127.0.0.0/8, ::1)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme != "http":
        return False
    return host in _LOOPBACK_HOSTS or _is_loopback_ip(host)


def _is_loopback_ip(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _as_localhost(url: str) -> str:
    """`url` with its host named `localhost`: the same service on this machine."""
    parts = urlsplit(url)
    port = parts.netloc.rpartition("]")[2].partition(":")[2]
    return parts._replace(netloc="localhost" + (f":{port}" if port else "")).geturl()


def check_startup_safety(config: Mapping[str, Any]) -> None:
    """Refuse settings that are dangerous outside a development machine, or that cannot work (a
    `BASE_URL` on which browsers refuse passkeys); raises `UnsafeConfiguration`."""
    if config["SQLALCHEMY_DATABASE_URI"].startswith("postgresql"):
        missing = [name for name in SHARED_SECRETS if not config.get(name)]
        if missing:
            raise UnsafeConfiguration(
                f"{', '.join(missing)} must be set when DATABASE_URL is PostgreSQL: every host of the "
                "deployment must share them, and generated ones would differ from host to host."
            )
    if _is_loopback_ip((urlsplit(config["BASE_URL"]).hostname or "").lower()):
        raise UnsafeConfiguration(
            f"BASE_URL {config['BASE_URL']} is a loopback IP address, where browsers refuse passkeys (their "
            f"relying party must be a domain name): use {_as_localhost(config['BASE_URL'])}."
        )
    if config.get("DEV_OUTBOX") and not is_loopback_http(config["BASE_URL"]):
        raise UnsafeConfiguration(
            f"DEV_OUTBOX=1 shows every login code at /dev/outbox; it is allowed only when BASE_URL is a "
            f"loopback http address (BASE_URL is {config['BASE_URL']})."
        )


def _secret(value: str, file_name: str, embedded: bool) -> str:
    return value or (_development_secret(file_name) if embedded else "")


def _development_secret(name: str) -> str:
    """A per-instance random secret for the embedded default, persisted under `instance/`.

    Production deployments set the environment variable instead; this keeps a fresh machine
    working with no configuration without ever shipping a fixed secret.
    """
    import secrets

    INSTANCE_DIR.mkdir(parents=True, exist_ok=True)
    path = INSTANCE_DIR / f".{name}"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        value = secrets.token_urlsafe(32)
        try:
            with open(path, "x") as handle:
                handle.write(value)
            path.chmod(0o600)
        except FileExistsError:
            return path.read_text().strip()
        return value


# Where the web process last started says where it serves, for operator commands run in another
# terminal without its environment (`tessera-admin` reads it when neither BASE_URL nor PORT is set).
SERVED_FILE = "served.json"


@dataclass(frozen=True)
class ServedAddress:
    """What the instance's web process was started with: its `BASE_URL` and whether `DEV_OUTBOX` is on."""

    base_url: str
    dev_outbox: bool


def record_served_address(config: Mapping[str, Any]) -> None:
    """Write `instance/served.json` for the web process starting with `config`; a failure to write is logged only."""
    import json
    import logging
    import tempfile

    record = {"base_url": config["BASE_URL"], "dev_outbox": bool(config.get("DEV_OUTBOX"))}
    try:
        INSTANCE_DIR.mkdir(parents=True, exist_ok=True)
        # Each web worker process writes it: a whole file replaces another, never a half-written one.
        with tempfile.NamedTemporaryFile("w", dir=INSTANCE_DIR, prefix=".served-", delete=False) as handle:
            json.dump(record, handle)
        Path(handle.name).replace(INSTANCE_DIR / SERVED_FILE)
    except OSError as error:
        logging.getLogger(__name__).warning("could not record the served address in %s: %s", INSTANCE_DIR, error)


def served_address() -> ServedAddress | None:
    """What the instance's web process last started with (`record_served_address`); None without a readable record."""
    import json

    try:
        record = json.loads((INSTANCE_DIR / SERVED_FILE).read_text())
        return ServedAddress(base_url=str(record["base_url"]), dev_outbox=bool(record["dev_outbox"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def adopt_served_address(environ: MutableMapping[str, str]) -> None:
    """For an operator command: `BASE_URL` of the instance's web process, unless BASE_URL or PORT is set."""
    if environ.get("BASE_URL") or environ.get("PORT"):
        return
    served = served_address()
    if served is not None:
        environ["BASE_URL"] = served.base_url
