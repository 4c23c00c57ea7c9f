"""`GET /v1/sub_client/<id>` with an x-api-token, answered before Flask dispatches.

The hottest authenticated read: Flask's dispatch, the request hooks and flask-smorest cost more
than its two prebuilt statements. Only the plain success is answered here: a GET with a valid
token whose last use needs no stamp, without x-api-subclient-id or a cookie (the view may refresh
a session), for a sub-client in the token's subtree (neither it nor an ancestor disabled), while
no rate limit applies beyond a route's own. Everything else (no, unknown, revoked or expired
token, a stamp due, an unknown or disabled sub-client, a malformed id, HEAD, a fault) goes to the
Flask view, which remains the one definition of those answers. The token and sub-client
statements, the schema and the JSON encoder are the view's, and they run on every request (a
revoked token or a disabled client is refused at once); the headers of the request hooks and the
request metrics are given too (app/ops/edge.py).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable

from flask import Flask, Response
from sqlalchemy.exc import SQLAlchemyError

from app.extensions import limiter
from app.http import MAX_ID
from app.ops.edge import BeforeDispatch, edge_engine
from app.tenancy import service
from app.tenancy.auth import unstamped_caller
from app.tenancy.schemas import SubClientEnvelope

log = logging.getLogger(__name__)

RULE = "/v1/sub_client/<subclient_id>"
_PATH = re.compile(r"^/v1/sub_client/([0-9]{1,10})$")


class SubClientReads(BeforeDispatch):
    """Successful `GET /v1/sub_client/<id>` reads before dispatch, the rest to the application."""

    def __init__(self, app: Flask, inner: Callable) -> None:
        super().__init__(app, inner)
        self._schema = SubClientEnvelope()

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        match = _PATH.fullmatch(environ.get("PATH_INFO", "")) if environ.get("REQUEST_METHOD") == "GET" else None
        token = environ.get("HTTP_X_API_TOKEN", "")
        if (
            match is None
            or not token
            or "HTTP_X_API_SUBCLIENT_ID" in environ
            or "HTTP_COOKIE" in environ
            or (limiter.enabled and limiter.limits_beyond_routes())
        ):
            return self.inner(environ, start_response)
        client_id = int(match.group(1))
        if not 0 < client_id <= MAX_ID:
            return self.inner(environ, start_response)
        started = time.perf_counter()
        try:
            response = self._answer(token, client_id)
        except SQLAlchemyError:
            response = None  # the view answers (and reports) a database fault
        except Exception:
            log.exception("the sub-client fast read failed; the view answers")
            response = None
        if response is None:
            return self.inner(environ, start_response)
        return self.respond(environ, start_response, rule=RULE, status=200, headers=dict(response.headers),
                            body=response.get_data(), started=started)

    def _answer(self, raw_token: str, client_id: int) -> Response | None:
        with self.app.app_context():
            with edge_engine(self.app).connect() as connection:
                caller = unstamped_caller(raw_token, connection)
                if caller is None:
                    return None
                row = service.find_sub_client_row(caller, client_id, connection)
            if row is None:
                return None
            return self.app.json.response(self._schema.dump({"data": row}))
