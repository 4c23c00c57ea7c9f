"""`POST /v1/vc/verify` and `POST /credentials/verify` answered before Flask dispatches.

Verification is what callers wait on; Flask's dispatch, flask-smorest's argument and response
handling and the request hooks cost more than a JCS proof check and as much as an RDFC one. Only
the plain answer is given here: a JSON object body of known length, in UTF-8 as the view reads it,
that `CredentialVerifyIn` loads (so with `verifiableCredential`, and only options the verifier
honours), a valid API token whose last use needs no stamp (or the endpoint open, for
`/credentials/verify` with `VC_VERIFY_OPEN`), no cookie, and no rate limit beyond a route's own.
The result is the view's: `service.verify_submitted` and the view's response schema, 200 when
verified and 400 when not. Everything else (no or bad token, malformed body, refused options, a
credential over the verification budget, a fault) goes to the view, which remains the one
definition of those answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from flask import Flask
from marshmallow import ValidationError

from app.credentials import service
from app.credentials.schemas import CredentialVerifyIn, CredentialVerifyOut
from app.credentials.settings import CredentialSettings
from app.extensions import limiter
from app.http import parse_json_body
from app.ops.edge import BeforeDispatch, edge_engine, request_body
from app.settings import current
from app.tenancy.auth import unstamped_caller

log = logging.getLogger(__name__)

API_RULE = "/v1/vc/verify"
VC_API_RULE = "/credentials/verify"
_JSON = "application/json"


class VerifyBeforeDispatch(BeforeDispatch):
    """Plain verifications before dispatch; every other request to the application."""

    def __init__(self, app: Flask, inner: Callable) -> None:
        super().__init__(app, inner)
        self._arguments = CredentialVerifyIn()
        self._schema = CredentialVerifyOut()

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        rule = environ.get("PATH_INFO")
        if (
            rule not in (API_RULE, VC_API_RULE)
            or environ.get("REQUEST_METHOD") != "POST"
            or "HTTP_COOKIE" in environ
            or (limiter.enabled and limiter.limits_beyond_routes())
        ):
            return self.inner(environ, start_response)
        started = time.perf_counter()
        body = request_body(environ, _JSON, self.app.config["MAX_CONTENT_LENGTH"])
        if body is None:
            return self.inner(environ, start_response)
        try:
            answer = self._answer(environ, rule, body)
        except Exception:  # anything unusual: the view answers (and reports) it
            log.debug("verification before dispatch declined; the view answers", exc_info=True)
            answer = None
        if answer is None:
            return self.inner(environ, start_response)
        status, payload = answer
        headers = {"Content-Type": _JSON, "Content-Length": str(len(payload))}
        return self.respond(environ, start_response, rule=rule, status=status, headers=headers, body=payload,
                            started=started)

    def _answer(self, environ: dict, rule: str, body: bytes) -> tuple[int, bytes] | None:
        with self.app.app_context():
            if not (rule == VC_API_RULE and current(CredentialSettings).verify_open):
                with edge_engine(self.app).connect() as connection:
                    if unstamped_caller(environ.get("HTTP_X_API_TOKEN", ""), connection) is None:
                        return None
            document = parse_json_body(body)
            if not isinstance(document, dict):
                return None
            try:
                args = self._arguments.load(document)
            except ValidationError:
                return None
            result = service.verify_submitted(args["verifiableCredential"], args["options"])
            payload = self.app.json.dumps(self._schema.dump(result.as_dict())) + "\n"
        return (200 if result.verified else 400), payload.encode()

