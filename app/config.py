"""Settings, read from the environment; one class per profile."""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kombu import Exchange, Queue


def _default_instance_dir() -> Path:
    """`instance/` of the source checkout; for a non-editable install, `<prefix>/var/tessera-instance`.

    Never relative to the current directory, so operator commands run from anywhere find the same
    database and secrets as the service.
    """
    project_root = Path(__file__).resolve().parent.parent
    if (project_root / "pyproject.toml").exists():
        return project_root / "instance"
    return Path(sys.prefix) / "var" / "tessera-instance"


INSTANCE_DIR = Path(os.environ.get("TESSERA_INSTANCE_DIR") or _default_instance_dir()).resolve()
# Seconds a Redis call (rate limits, social claims and budgets) may wait before it counts as down.
REDIS_SOCKET_TIMEOUT = float(os.environ.get("REDIS_SOCKET_TIMEOUT", "1"))


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def _env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _sqlite_url(name: str) -> str:
    return f"sqlite:///{INSTANCE_DIR / name}"


def database_url() -> str:
    """The database URL: `DATABASE_URL` (postgres:// normalised to psycopg 3) or embedded SQLite."""
    url = os.environ.get("DATABASE_URL") or _sqlite_url("tessera.sqlite")
    if url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url[len("postgres://"):]
    elif url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def broker_url() -> str:
    """Celery broker: `REDIS_URL` in production, kombu's SQLAlchemy transport on SQLite otherwise."""
    if os.environ.get("CELERY_BROKER_URL"):
        return os.environ["CELERY_BROKER_URL"]
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    from app.ops.broker import TRANSPORT_NAME

    return f"{TRANSPORT_NAME}+" + _sqlite_url("broker.sqlite")


def default_queue() -> str:
    return os.environ.get("CELERY_QUEUE", "tessera")


def sweep_queue() -> str:
    return os.environ.get("CELERY_SWEEP_QUEUE") or f"{default_queue()}.sweep"


class Config:
    """Production-shaped defaults; every value can be overridden by `create_app(config=...)`."""

    def __init__(self) -> None:
        self.SQLALCHEMY_DATABASE_URI = database_url()
        # Only the embedded default (SQLite) makes its own secrets; on a shared database every host
        # must be given the same ones (`check_startup_safety` refuses to start without them).
        embedded = self.SQLALCHEMY_DATABASE_URI.startswith("sqlite")
        self.SECRET_KEY = _secret("SECRET_KEY", "secret_key", embedded)
        # Key material for hashing secrets and encrypting data at rest. Comma-separated list:
        # the first key encrypts, every key decrypts, so keys can be rotated.
        self.ENCRYPTION_KEYS = _secret("ENCRYPTION_KEYS", "encryption_key", embedded)
        self.SECRET_HASH_KEY = _secret("SECRET_HASH_KEY", "secret_hash_key", embedded)
        self.SQLALCHEMY_ENGINE_OPTIONS = _engine_options(self.SQLALCHEMY_DATABASE_URI)
        self.REDIS_URL = os.environ.get("REDIS_URL", "")
        self.CELERY = {
            "broker_url": broker_url(),
            "task_ignore_result": True,
            "task_acks_late": True,
            "task_reject_on_worker_lost": True,
            "worker_prefetch_multiplier": _env_int("WORKER_PREFETCH_MULTIPLIER", 1),
            "task_always_eager": _env_bool("CELERY_ALWAYS_EAGER"),
            "broker_connection_retry_on_startup": True,
            "broker_connection_timeout": 2,
            "task_publish_retry": False,
            "broker_transport_options": _broker_transport_options(broker_url()),
            "worker_hijack_root_logger": False,
            "timezone": "UTC",
            "task_default_queue": default_queue(),
            # The outbox sweep has a queue of its own so it never waits behind a backlog of jobs;
            # a worker started without `-Q` consumes both.
            "task_queues": tuple(
                Queue(name, Exchange(default_queue(), type="direct"), routing_key=name)
                for name in (default_queue(), sweep_queue())
            ),
            "task_routes": {"jobs.sweep_outbox": {"queue": sweep_queue()}},
        }
        self.RATELIMIT_STORAGE_URI = self.REDIS_URL or "memory://"
        # Redis down must not turn rate-limited endpoints into 500s: the limits then hold per
        # process (in memory) until Redis answers again, and a storage error never fails a request.
        self.RATELIMIT_IN_MEMORY_FALLBACK_ENABLED = True
        self.RATELIMIT_SWALLOW_ERRORS = True
        if self.REDIS_URL:
            self.RATELIMIT_STORAGE_OPTIONS = {
                "socket_connect_timeout": REDIS_SOCKET_TIMEOUT,
                "socket_timeout": REDIS_SOCKET_TIMEOUT,
            }
        # X-RateLimit-* headers would cost a storage round trip per allowed request; a refusal
        # still says Retry-After (the limit's window).
        self.RATELIMIT_HEADERS_ENABLED = _env_bool("RATELIMIT_HEADERS_ENABLED", False)
        self.RATELIMIT_ENABLED = _env_bool("RATELIMIT_ENABLED", True)

        self.MAX_CONTENT_LENGTH = 1024 * 1024
        # Number of reverse proxies in front of the service whose X-Forwarded-* headers are trusted
        # (client addresses for rate limits, scheme and host for generated URLs).
        self.TRUSTED_PROXIES = _env_int("TRUSTED_PROXIES", 0)
        port = os.environ.get("PORT") or "5000"
        self.BASE_URL = (os.environ.get("BASE_URL") or f"http://127.0.0.1:{port}").rstrip("/")
        # Flask's session cookie carries the claim form's token: never sent by cross-site posts.
        self.SESSION_COOKIE_HTTPONLY = True
        self.SESSION_COOKIE_SAMESITE = "Lax"
        self.SESSION_COOKIE_SECURE = self.BASE_URL.startswith("https://")
        self.LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
        # Bearer token of /metrics scrapes; unset, only the loopback interface may scrape.
        self.METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
        # Strict-Transport-Security max-age on https responses; 0 sends none.
        self.HSTS_MAX_AGE = _env_int("HSTS_MAX_AGE", 365 * 24 * 3600)

        # Jobs: how long a queued job waits before the sweep re-publishes it, and how long a
        # running job may hold its lease before it is considered abandoned by a dead worker.
        self.OUTBOX_GRACE_SECONDS = _env_float("OUTBOX_GRACE_SECONDS", 10)
        self.OUTBOX_SWEEP_INTERVAL = _env_float("OUTBOX_SWEEP_INTERVAL", 5)
        self.JOB_LEASE_SECONDS = _env_float("JOB_LEASE_SECONDS", 60)
        # A job the broker accepted but no worker took yet is waiting in a backlog, not lost: it is
        # published again only after this long, doubling after each publish up to the maximum.
        self.JOB_REPUBLISH_SECONDS = _env_float("JOB_REPUBLISH_SECONDS", 300)
        self.JOB_REPUBLISH_MAX_SECONDS = _env_float("JOB_REPUBLISH_MAX_SECONDS", 3600)
        self.JOB_MAX_RETRIES = _env_int("JOB_MAX_RETRIES", 5)
        # A queued job older than this means no worker is consuming; /readyz and the CLI say so.
        self.JOB_STALL_SECONDS = _env_float("JOB_STALL_SECONDS", 60)
        self.JOB_RETRY_BACKOFF_MAX = _env_float("JOB_RETRY_BACKOFF_MAX", 300)
        self.RETRY_AFTER_SECONDS = _env_int("RETRY_AFTER_SECONDS", 5)
        # /readyz answers within this many seconds whatever its dependencies do.
        self.READYZ_TIMEOUT = _env_float("READYZ_TIMEOUT", 1.5)
        self.IDEMPOTENCY_TTL_SECONDS = _env_int("IDEMPOTENCY_TTL_SECONDS", 24 * 3600)

        self.API_TITLE = "Tessera"
        self.API_VERSION = "1.0.0"
        self.OPENAPI_VERSION = "3.0.3"
        self.OPENAPI_URL_PREFIX = "/"
        self.OPENAPI_JSON_PATH = "openapi.json"
        self.OPENAPI_SWAGGER_UI_PATH = "/docs"
        # Served by the service (app/ops/docs.py) from the pinned swagger-ui-bundle package.
        self.OPENAPI_SWAGGER_UI_URL = "/docs/assets/"
        self.API_SPEC_OPTIONS = {
            "info": {
                "description": "Tessera identity platform API. Errors are RFC 9457 "
                "application/problem+json documents.",
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


def _engine_options(url: str) -> dict:
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": 30, "check_same_thread": False}}
    connect_args: dict = {
        "connect_timeout": _env_int("DB_CONNECT_TIMEOUT", 3),
        # A partition must surface as an error, not a hang: keepalives find a dead idle connection,
        # tcp_user_timeout fails one whose sent data goes unacknowledged, and the server cancels
        # a statement that runs too long.
        "keepalives": 1,
        "keepalives_idle": _env_int("DB_KEEPALIVES_IDLE", 10),
        "keepalives_interval": _env_int("DB_KEEPALIVES_INTERVAL", 3),
        "keepalives_count": _env_int("DB_KEEPALIVES_COUNT", 3),
        "tcp_user_timeout": _env_int("DB_TCP_USER_TIMEOUT_MS", 10_000),
    }
    statement_timeout = _env_int("DB_STATEMENT_TIMEOUT_MS", 30_000)
    if statement_timeout > 0:
        connect_args["options"] = f"-c statement_timeout={statement_timeout}"
    return {
        # A pre-ping costs a round trip per checkout; without it a connection the server dropped
        # fails one statement (503 to that request) and SQLAlchemy then recycles the whole pool.
        "pool_pre_ping": _env_bool("DB_POOL_PRE_PING", False),
        "pool_size": _env_int("DB_POOL_SIZE", 5),
        "max_overflow": _env_int("DB_MAX_OVERFLOW", 10),
        "pool_timeout": _env_float("DB_POOL_TIMEOUT", 5),
        "connect_args": connect_args,
    }


def _broker_transport_options(url: str) -> dict:
    if not url.startswith(("redis://", "rediss://")):
        return {}
    return {
        "visibility_timeout": _env_int("BROKER_VISIBILITY_TIMEOUT", 3600),
        "socket_connect_timeout": 2,
        "socket_timeout": 5,
        "max_retries": 0,
    }


class UnsafeConfiguration(SystemExit):
    """Start-up refused because the settings would be unsafe; the process exits with status 3.

    3 is gunicorn's "worker failed to boot": its master stops instead of restarting workers forever.
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
    if host in _LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_startup_safety(config: Mapping[str, Any]) -> None:
    """Refuse settings that are dangerous outside a development machine; raises `UnsafeConfiguration`."""
    if config["SQLALCHEMY_DATABASE_URI"].startswith("postgresql"):
        missing = [name for name in SHARED_SECRETS if not config.get(name)]
        if missing:
            raise UnsafeConfiguration(
                f"{', '.join(missing)} must be set when DATABASE_URL is PostgreSQL: every host of the "
                "deployment must share them, and generated ones would differ from host to host."
            )
    if config.get("DEV_OUTBOX") and not is_loopback_http(config["BASE_URL"]):
        raise UnsafeConfiguration(
            f"DEV_OUTBOX=1 shows every login code at /dev/outbox; it is allowed only when BASE_URL is a "
            f"loopback http address (BASE_URL is {config['BASE_URL']})."
        )


def _secret(variable: str, file_name: str, embedded: bool) -> str:
    return os.environ.get(variable) or (_development_secret(file_name) if embedded else "")


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
