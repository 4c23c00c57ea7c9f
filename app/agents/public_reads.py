"""Public card and DID document reads served before Flask dispatches: the hot path of the network.

`GET /api/agent-card/<did>` answers the bytes the publish job stored with their strong ETag, and
`GET /api/did/<did>` an agent's DID document from a per-process cache whose entries are checked
against the rows they were built from on every request (one prebuilt autocommit statement each),
so a publish, an unpublish, a card URI change or a deregistration shows on the next request.
Only plain successful reads are answered here; everything else (unknown or deactivated DIDs, user
DIDs, `Accept: application/did-resolution`, HEAD, malformed paths, a database error) goes to the
Flask views, which remain the one definition of those answers. The headers every response gets
from the application's hooks (`X-Request-Id`, HSTS) and the request metrics are given here too.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask
from sqlalchemy import bindparam, exists, select
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.http import parse_etags

from app.agents.models import AgentAccount, PublicCard, RegistryRecord
from app.agents.settings import AgentSettings
from app.dids.resolution import resolve_did
from app.dids.settings import DidSettings
from app.ops.edge import BeforeDispatch, DriverStatement, edge_engine
from app.settings import current

DID_JSON = "application/did+json"
CARD_RULE = "/api/agent-card/<string:did>"
DID_RULE = "/api/did/<string:did>"
_PATH = re.compile(r"^/api/(agent-card|did)/(did:[a-z0-9]+:[0-9a-f]{40})$")
_CACHE_LIMIT = 10_000
_CARD = DriverStatement(select(PublicCard.body, PublicCard.etag).where(PublicCard.did == bindparam("did")))
# Every input of an agent's DID document (the settings it reads are added to the key per request).
_DOCUMENT_INPUTS = DriverStatement(
    select(
        AgentAccount.address,
        AgentAccount.deactivated_at,
        RegistryRecord.owner_did,
        RegistryRecord.card_uri,
        exists().where(PublicCard.did == AgentAccount.did),
    )
    .outerjoin(RegistryRecord, RegistryRecord.did == AgentAccount.did)
    .where(AgentAccount.did == bindparam("did"))
)


def card_headers(etag: str, cache_seconds: int) -> dict[str, str]:
    """Headers of a public card answer (200 or 304)."""
    return {
        "ETag": etag,
        "Cache-Control": f"public, max-age={cache_seconds}",
        # The bytes are the agent's: never sniffed as another type, never run as a page.
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'",
    }


def encode_did_body(body: dict[str, Any]) -> tuple[bytes, str]:
    """The bytes of a DID document or resolution result and their strong validator (unquoted)."""
    payload = json.dumps(body).encode()
    return payload, hashlib.sha256(payload).hexdigest()[:32]


def did_headers(etag: str, cache_seconds: int) -> dict[str, str]:
    """Headers of a DID resolution answer; the bytes depend on Accept, hence Vary."""
    return {"Cache-Control": f"public, max-age={cache_seconds}", "ETag": f'"{etag}"', "Vary": "Accept"}


class PublicReads(BeforeDispatch):
    """Plain public reads from prebuilt statements before dispatch, the rest to the application."""

    def __init__(self, app: Flask, inner: Callable) -> None:
        super().__init__(app, inner)
        self._documents: dict[str, tuple[tuple, bytes, str]] = {}

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        match = _PATH.fullmatch(environ.get("PATH_INFO", "")) if environ.get("REQUEST_METHOD") == "GET" else None
        if match is None or match.group(2).split(":", 2)[1] != self._did_method():
            return self.inner(environ, start_response)
        started = time.perf_counter()
        try:
            if match.group(1) == "agent-card":
                answer = self._card(environ, match.group(2))
            else:
                answer = self._document(environ, match.group(2))
        except SQLAlchemyError:
            answer = None  # the view answers (and reports) a database fault
        if answer is None:
            return self.inner(environ, start_response)
        rule, status, headers, body = answer
        return self.respond(environ, start_response, rule=rule, status=status, headers=headers, body=body,
                            started=started)

    def _did_method(self) -> str:
        return current(DidSettings, self.app).method

    def _fetch(self, statement: DriverStatement, did: str) -> Any:
        with edge_engine(self.app).connect() as connection:
            return statement.first(connection, {"did": did})

    def _card(self, environ: dict, did: str) -> tuple | None:
        row = self._fetch(_CARD, did)
        if row is None:
            return None
        body, etag = row
        headers = card_headers(etag, current(AgentSettings, self.app).card_cache_seconds)
        if _matches(environ, etag.strip('"')):
            return CARD_RULE, 304, headers, b""
        return CARD_RULE, 200, {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}, body

    def _document(self, environ: dict, did: str) -> tuple | None:
        if "did-resolution" in environ.get("HTTP_ACCEPT", ""):
            return None  # the full resolution result carries the time of retrieval: built by the view
        row = self._fetch(_DOCUMENT_INPUTS, did)
        if row is None or row.deactivated_at is not None:
            return None
        settings = current(AgentSettings, self.app)
        version = (*row, settings, self.app.config["BASE_URL"])
        cached = self._documents.get(did)
        if cached is None or cached[0] != version:
            built = self._build_document(did)
            if built is None:
                return None
            if len(self._documents) >= _CACHE_LIMIT:
                self._documents.clear()
            cached = self._documents[did] = (version, *built)
        _version, body, etag = cached
        headers = did_headers(etag, settings.card_cache_seconds)
        if _matches(environ, etag):
            return DID_RULE, 304, headers, b""
        return DID_RULE, 200, {"Content-Type": DID_JSON, "Content-Length": str(len(body)), **headers}, body

    def _build_document(self, did: str) -> tuple[bytes, str] | None:
        with self.app.app_context():
            resolution = resolve_did(did)
        if resolution.status != 200:
            return None
        return encode_did_body(resolution.result["didDocument"])


def _matches(environ: dict, etag: str) -> bool:
    header = environ.get("HTTP_IF_NONE_MATCH")
    return bool(header) and etag in parse_etags(header)
