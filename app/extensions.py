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

from app.orm import Base
from app.web.problem import PROBLEM_MIMETYPE, ProblemSchema


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
limiter = Limiter(key_func=get_remote_address, default_limits=[])
celery = Celery("tessera", task_cls=FlaskTask, set_as_current=True)
