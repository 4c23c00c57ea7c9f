"""Extensions, created unbound; `create_app` binds them."""

from __future__ import annotations

import http

from celery import Celery, Task
from flask import current_app, has_app_context
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_migrate import Migrate
from flask_smorest import Api
from flask_smorest.utils import prepare_response
from flask_sqlalchemy import SQLAlchemy

from app.errors import PROBLEM_MIMETYPE, ProblemSchema
from app.orm import Base


class ProblemApi(Api):
    """flask-smorest documenting every error as application/problem+json."""

    ERROR_SCHEMA = ProblemSchema

    def _register_responses(self) -> None:
        for status in http.HTTPStatus:
            response: dict = {"description": status.phrase}
            if not (100 <= status < 200) and status not in (204, 304):
                response["schema"] = self.ERROR_SCHEMA
            prepare_response(response, self.spec, PROBLEM_MIMETYPE)
            self.spec.components.response(status.name, response, lazy=True)
        response = {"description": "Default error response", "schema": self.ERROR_SCHEMA}
        prepare_response(response, self.spec, PROBLEM_MIMETYPE)
        self.spec.components.response("DEFAULT_ERROR", response, lazy=True)


class RouteLimiter(Limiter):
    """Flask-Limiter without its per-request pass while no limit applies beyond a route's own.

    Its before-request hook resolves the application, default, blueprint and meta limits of every
    request, whatever the route (about a tenth of a cheap authenticated read). Tessera declares
    none of those: every limit is a view's `@limiter.limit`, which checks itself when that view is
    called. While that holds the hook could only find nothing, so it returns at once; the moment
    such a limit (or an in-memory fallback limit) is configured, the full pass runs again.
    """

    def _check_request_limit(self, callable_name: str | None = None, in_middleware: bool = True) -> None:
        if in_middleware and callable_name is None and not self.limits_beyond_routes():
            return
        super()._check_request_limit(callable_name=callable_name, in_middleware=in_middleware)

    def limits_beyond_routes(self) -> bool:
        """True when an application, default, blueprint, meta or in-memory fallback limit is set."""
        manager = self.limit_manager
        return bool(
            manager._application_limits
            or manager._default_limits
            or manager._blueprint_limits
            or self._meta_limits
            or self._in_memory_fallback
        )


class FlaskTask(Task):
    """A Celery task that runs inside the Flask application context."""

    def __call__(self, *args, **kwargs):
        # Run eagerly (tests, embedded use) the task belongs to the application that published it;
        # in a worker process there is one application, the one `create_app` bound last.
        app = current_app._get_current_object() if has_app_context() else self.app.flask_app
        with app.app_context():
            return self.run(*args, **kwargs)


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
api = ProblemApi()
limiter = RouteLimiter(key_func=get_remote_address, default_limits=[])
celery = Celery("tessera", task_cls=FlaskTask, set_as_current=True)
