"""Tessera: the application factory, the one place extensions are bound."""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from pathlib import Path

from celery import signals as celery_signals
from flask import Flask, Response, has_app_context, request
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from app.config import INSTANCE_DIR, Config, UnsafeConfiguration, check_startup_safety
from app.db import configure_engine
from app.http import BoundedJSONProvider, CookieSessionInterface, TesseraFlask
from app.ops.logging import configure_logging
from app.settings import current, install_settings

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def create_app(config: dict | None = None) -> Flask:
    """Build the Flask application; `config` overrides settings read from the environment."""
    app = TesseraFlask(__name__, instance_path=str(INSTANCE_DIR))
    app.json = BoundedJSONProvider(app)
    app.session_interface = CookieSessionInterface()
    try:
        app.config.update(Config().as_dict())
        if config:
            app.config.update(config)
        install_settings(app)
    except ValueError as malformed:
        # The loader names the variable ("SMTP_PORT: invalid literal ..."): one line, no traceback.
        refusal = UnsafeConfiguration(f"malformed setting {malformed}")
        print(refusal.message, file=sys.stderr, flush=True)
        raise refusal from None
    configure_logging(app.config["LOG_LEVEL"])
    INSTANCE_DIR.mkdir(parents=True, exist_ok=True)

    _import_models()
    _init_extensions(app)
    _connect_features(app)
    _register_request_hooks(app)
    _register_blueprints(app)
    _install_middleware(app)
    _register_tasks(app)
    _register_commands(app)
    try:
        check_startup_safety(app.config)
    except UnsafeConfiguration as refusal:
        print(refusal.message, file=sys.stderr, flush=True)
        raise
    if app.config.get("DEV_OUTBOX"):
        logging.getLogger(__name__).warning(
            "DEV_OUTBOX=1: login codes are readable by anyone at /dev/outbox; never enable it in production."
        )
    return app


def _install_middleware(app: Flask) -> None:
    """The hot-route layer (app/web/hot.py; its routes registered by the features' routes.py, all
    imported by now) in front of Flask's dispatch, and ProxyFix in front of both, which must see
    every request first."""
    from app.web.hot import HotLayer

    HotLayer.install(app)
    if app.config["TRUSTED_PROXIES"]:
        from werkzeug.middleware.proxy_fix import ProxyFix

        hops = app.config["TRUSTED_PROXIES"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)


def _import_models() -> None:
    """Import every feature's models so the metadata (and Alembic) see all tables."""
    package_dir = Path(__file__).resolve().parent
    for feature in pkgutil.iter_modules([str(package_dir)]):
        if feature.ispkg and (package_dir / feature.name / "models.py").exists():
            importlib.import_module(f"app.{feature.name}.models")


def _init_extensions(app: Flask) -> None:
    from app.extensions import api, celery, db, limiter, migrate
    from app.ops.broker import set_polling_interval
    from app.ops.metrics import init_metrics
    from app.ops.settings import OpsSettings
    from app.web.edge import install_edge_hooks
    from app.web.problem import register_error_handlers

    install_edge_hooks(app)  # first: its hooks open every request and close its final response
    db.init_app(app)
    migrate.init_app(app, db, directory=str(MIGRATIONS_DIR), render_as_batch=True, compare_type=True)
    api.init_app(app)
    limiter.init_app(app)
    register_error_handlers(app)
    init_metrics(app)

    set_polling_interval(current(OpsSettings, app).broker_polling_interval)
    celery.conf.update(app.config["CELERY"])
    celery.flask_app = app
    # The application owns logging: a receiver here stops Celery from reconfiguring the root
    # logger (its level and handlers) in worker and beat processes.
    celery_signals.setup_logging.connect(_keep_application_logging, weak=False, dispatch_uid="tessera-logging")
    app.extensions["celery"] = celery

    with app.app_context():
        configure_engine(db.engine)


def _keep_application_logging(**_kwargs) -> None:
    from flask import current_app

    from app.extensions import celery

    app = current_app if has_app_context() else celery.flask_app
    configure_logging(app.config["LOG_LEVEL"])


def _connect_features(app: Flask) -> None:
    """Hand lower layers the callbacks they need from features, so they never import those features."""
    from app.agents.registry import find_agent_did
    from app.db import transaction_open
    from app.dids.local import LocalDids, register_local_dids
    from app.dids.resolution import document_finder, register_did_finders, resolve_network_did
    from app.issuer.keys import local_did_document
    from app.jobs.service import count_jobs_by_state, oldest_queued_job_age_seconds
    from app.oidc.authorize import end_user_access
    from app.ops.queue import QueueReader, register_queue_reader
    from app.outbound import set_transaction_probe
    from app.users.service import register_access_ender, user_did_document

    set_transaction_probe(transaction_open)
    register_queue_reader(app, QueueReader(count_jobs_by_state, oldest_queued_job_age_seconds))
    register_did_finders(app, [find_agent_did, document_finder(user_did_document)])
    register_local_dids(app, LocalDids(network=resolve_network_did, web=local_did_document))
    register_access_ender(app, end_user_access)


def _register_request_hooks(app: Flask) -> None:
    from app.db import commit, nothing_to_commit, release, rollback
    from app.errors import Conflict, NotFound, ServiceUnavailable
    from app.http import enforce_content_type
    from app.web.problem import handle_domain_error, handle_unstorable_value

    @app.before_request
    def _refuse_nul_in_path() -> None:
        # No resource has a NUL in its address; refusing it here keeps it away from every query.
        if "\x00" in request.path:
            raise NotFound("No such resource.")

    @app.before_request
    def _content_type() -> None:
        enforce_content_type(app.view_functions)

    @app.after_request
    def _finish_unit_of_work(response: Response) -> Response:
        if response.status_code >= 400:
            rollback()
        elif nothing_to_commit():
            release()
        else:
            try:
                commit()
            except IntegrityError:
                response = handle_domain_error(Conflict("The request conflicts with existing data."))
            except DataError as error:
                response = handle_unstorable_value(error)
            except OperationalError:
                response = handle_domain_error(ServiceUnavailable("The database is unreachable; try again shortly."))
        return response


def _register_blueprints(app: Flask) -> None:
    from app.agents.routes import blp as agents_blp
    from app.credentials.routes import blp as credentials_blp
    from app.extensions import api
    from app.home.routes import blp as home_blp
    from app.issuer.routes import blp as issuer_blp
    from app.jobs.routes import blp as jobs_blp
    from app.oidc.pages import blp as oidc_pages_blp
    from app.oidc.routes import blp as oidc_blp
    from app.ops.docs import blp as docs_assets_blp
    from app.ops.routes import blp as ops_blp
    from app.registration.routes import blp as registration_blp
    from app.social.routes import blp as social_blp
    from app.tenancy.routes import blp as tenancy_blp
    from app.tenancy.routes import tokens_blp
    from app.users.routes import blp as users_blp

    app.register_blueprint(home_blp)
    app.register_blueprint(ops_blp)
    app.register_blueprint(docs_assets_blp)
    app.register_blueprint(oidc_pages_blp)
    for blueprint in (
        jobs_blp,
        tenancy_blp,
        tokens_blp,
        users_blp,
        oidc_blp,
        registration_blp,
        credentials_blp,
        issuer_blp,
        social_blp,
        agents_blp,
    ):
        api.register_blueprint(blueprint)


def _register_tasks(app: Flask) -> None:
    """Import every feature's task module (`app/<feature>/tasks.py`) and collect their beat schedules."""
    from app.extensions import celery

    package_dir = Path(__file__).resolve().parent
    schedule: dict = {}
    for feature in pkgutil.iter_modules([str(package_dir)]):
        if feature.ispkg and (package_dir / feature.name / "tasks.py").exists():
            module = importlib.import_module(f"app.{feature.name}.tasks")
            schedule.update(getattr(module, "beat_schedule", lambda _app: {})(app))
    celery.conf.beat_schedule = schedule


def _register_commands(app: Flask) -> None:
    from app.agents.cli import agents_cli
    from app.chain.cli import chain_cli
    from app.jobs.cli import outbox_cli
    from app.oidc.cli import create_demo, keys_cli, set_subject
    from app.ops.schema import require_current_schema
    from app.registration.cli import issue_registration_token, revoke_registration_token, set_registration_scopes
    from app.social.cli import set_linked_sign_in
    from app.tenancy.cli import clients_cli
    from app.users.cli import users_cli

    clients_cli.add_command(create_demo)  # the demo sign-in needs OpenID, above the clients feature
    clients_cli.add_command(set_linked_sign_in)  # platforms are the social feature's, above the clients feature
    clients_cli.add_command(issue_registration_token)  # registration builds on OpenID and clients
    clients_cli.add_command(revoke_registration_token)
    clients_cli.add_command(set_registration_scopes)
    clients_cli.add_command(set_subject)
    for group in (clients_cli, outbox_cli, keys_cli, agents_cli, users_cli):
        require_current_schema(group, MIGRATIONS_DIR)
        app.cli.add_command(group)
    app.cli.add_command(chain_cli)  # deploying the contracts reads and writes no table: before `db upgrade` too
