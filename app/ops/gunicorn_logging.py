"""gunicorn's access log without secrets: `--logger-class app.ops.gunicorn_logging.RedactingLogger`.

Query strings carry authorization codes, states, nonces and id_token hints, and a redirect's
`Location` carries the code it hands out: every query value in the request line, the referrer,
the response location and the raw URI is redacted, and credentials headers are never logged.
"""

from __future__ import annotations

from gunicorn.glogging import Logger

from app.ops.logging import REDACTED, redact_query, redact_urls

_URL_ATOMS = ("r", "f", "{referer}i", "{location}o", "{raw_uri}e", "{request_uri}e")
_QUERY_ATOMS = ("q", "{query_string}e")
_SECRET_HEADERS = ("{authorization}i", "{cookie}i", "{x-api-token}i", "{set-cookie}o")


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time) -> dict:
        atoms = super().atoms(resp, req, environ, request_time)
        for key in _URL_ATOMS:
            if isinstance(atoms.get(key), str):
                atoms[key] = redact_urls(atoms[key])
        for key in _QUERY_ATOMS:
            if isinstance(atoms.get(key), str):
                atoms[key] = redact_query(atoms[key])
        for key in _SECRET_HEADERS:
            if key in atoms:
                atoms[key] = REDACTED
        return atoms
