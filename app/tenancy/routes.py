"""HTTP surface of tenancy: sub-clients (spec 4.6-4.9), their client secrets, and API tokens."""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from urllib.parse import parse_qsl

from flask import Flask, url_for
from flask.views import MethodView
from flask_smorest import Blueprint
from marshmallow import ValidationError

from app.cache import Cache
from app.db import read_only
from app.dialect import ROW_VERSION_TTL
from app.http import LOCATION_HEADER, MAX_ID, id_parameter, no_store, path_id, problem_doc
from app.idempotency.service import idempotent
from app.pagination import PageArgs
from app.tenancy import service
from app.tenancy.auth import api_token_required, current_caller, unstamped_caller
from app.tenancy.schemas import (
    ApiTokenIn,
    ApiTokenPage,
    ClientSecretEnvelope,
    IssuedApiTokenEnvelope,
    SubClientCreateIn,
    SubClientEnvelope,
    SubClientPage,
    SubClientUpdateIn,
)
from app.web.hot import HotAnswer, HotRequest, hot, json_answer, json_form

blp = Blueprint(
    "sub_clients",
    __name__,
    url_prefix="/v1/sub_client",
    description="Sub-clients of a client tree. x-api-subclient-id selects the node a request acts in.",
)
tokens_blp = Blueprint(
    "api_tokens",
    __name__,
    url_prefix="/v1/api_tokens",
    description="API tokens of the acting client (x-api-subclient-id selects a node of your tree).",
)


@blp.route("")
class SubClients(MethodView):
    @api_token_required(subclient=True)
    @idempotent
    @blp.arguments(SubClientCreateIn)
    @blp.response(201, SubClientEnvelope, headers=LOCATION_HEADER)
    @problem_doc(400, 404, 409, 413, 415, 422)
    def post(self, fields: dict):
        """Create a sub-client as a child of the acting node.

        `name` is required. `(subdomain, domain)` must be unused (409). The new client has no
        client secret until one is created with `POST /v1/sub_client/{subclient_id}/client_secret`.
        """
        created = service.create_sub_client(current_caller(), fields)
        return {"data": created}, 201, {"Location": url_for("sub_clients.SubClientById", subclient_id=created.id)}

    @read_only
    @api_token_required(subclient=True)
    @blp.arguments(PageArgs, location="query")
    @blp.response(200, SubClientPage)
    @problem_doc(404, 422)
    def get(self, args: dict):
        """List the direct children of the acting node, oldest first."""
        return service.list_sub_clients(current_caller(), args["page"], args["per_page"])


@blp.route("/<subclient_id>", parameters=[id_parameter("subclient_id", "A client in the acting node's subtree.")])
class SubClientById(MethodView):
    @read_only
    @api_token_required(subclient=True)
    @blp.response(200, SubClientEnvelope)
    @problem_doc(404, 422)
    def get(self, subclient_id: str):
        """Read a client within the acting node's subtree (the node itself included)."""
        return {"data": service.read_sub_client(current_caller(), path_id(subclient_id, "subclient_id"))}

    @api_token_required(subclient=True)
    @blp.arguments(SubClientUpdateIn)
    @blp.response(200, SubClientEnvelope)
    @problem_doc(400, 403, 404, 409, 413, 415, 422)
    def put(self, changes: dict, subclient_id: str):
        """Update a client within the acting subtree. Master clients only (403 for a sub-client's token).

        Members sent are changed, members left out keep their value, `null` clears an optional
        member (`timezone` returns to `UTC`).
        """
        client_id = path_id(subclient_id, "subclient_id")
        return {"data": service.update_sub_client(current_caller(), client_id, changes)}


_SUB_CLIENT_ENVELOPE, _SUB_CLIENT_PAGE, _PAGE_ARGS = SubClientEnvelope(), SubClientPage(), PageArgs()
_PAGE_ARG_NAMES = frozenset({"page", "per_page"})


@hot.route("GET", r"/v1/sub_client", view="sub_clients.SubClients", cookies=False)
def list_sub_clients_at_once(request: HotRequest) -> HotAnswer | None:
    """The list's plain success: a valid token whose last use needs no stamp, acting in its own
    client, `page` and `per_page` (each at most once, digits only) that the view's `PageArgs` takes.
    The view's token statement runs on every request, and `service.sub_client_page_versions`: the
    answer the view's schema makes of a page is kept while what it is built from is unchanged
    (`_page_version`), and the page itself (`service.list_sub_clients`) is read only to build it."""
    token = request.header("HTTP_X_API_TOKEN")
    page_args = _plain_page_args(request.header("QUERY_STRING"))
    if not token or "HTTP_X_API_SUBCLIENT_ID" in request.environ or page_args is None:
        return request.hand_off("no token, another acting node, or a query the view reads or refuses")
    number, per_page = page_args
    with request.app.app_context(), request.unit_of_work() as connection:
        caller = unstamped_caller(token, connection)
        if caller is None:
            return request.hand_off("token unknown, revoked, expired or its use to stamp")
        key = (caller.root_id, caller.acting_client_id, number, per_page)
        versions = service.sub_client_page_versions(caller, number, per_page, connection)
        answer = _PAGE_ANSWERS.peek(key, _page_version(versions.data, versions.total_pages, request.app))
        if answer is None:
            page = service.list_sub_clients(caller, number, per_page, connection)
            answer = json_answer(request.app, 200, _SUB_CLIENT_PAGE.dump(page))
            version = _page_version([row.version for row in page.data], page.total_pages, request.app)
            _PAGE_ANSWERS.put(key, answer, version)
        return answer


# Plain pages as answered, per tenant, acting node and page (a kept answer is shared, never changed).
_PAGE_ANSWERS: Cache[HotAnswer] = Cache("sub_client_pages", maxsize=256, ttl=ROW_VERSION_TTL)


def _page_version(rows: Sequence[Hashable], total_pages: int, app: Flask) -> Hashable:
    """What a page's answer is built from besides its key: the version of each row, the number of
    pages, the settings its items read and the JSON form (kept beside the builder,
    `list_sub_clients_at_once`)."""
    return tuple(rows), total_pages, service.answer_settings(), json_form(app)


@functools.lru_cache(maxsize=256)
def _plain_page_args(query: str) -> tuple[int, int] | None:
    """`page` and `per_page` of a plain query string (`_plain_query`) as the view's `PageArgs` loads
    them, or None. A function of the query alone, kept for the few queries clients send."""
    plain = _plain_query(query)
    if plain is None:
        return None
    try:
        args = _PAGE_ARGS.load(plain)
    except ValidationError:
        return None
    return args["page"], args["per_page"]


def _plain_query(query: str) -> dict[str, str] | None:
    """`page` and `per_page` of a query string holding nothing else, each once and all digits; else None."""
    pairs = parse_qsl(query, keep_blank_values=True)
    values = dict(pairs)
    if len(values) != len(pairs) or not values.keys() <= _PAGE_ARG_NAMES:
        return None
    if not all(value.isascii() and value.isdigit() and len(value) <= 10 for value in values.values()):
        return None
    return values


@hot.route("GET", r"/v1/sub_client/(?P<subclient_id>[0-9]{1,10})", view="sub_clients.SubClientById", cookies=False)
def read_sub_client_at_once(request: HotRequest) -> HotAnswer | None:
    """The hottest authenticated read, its plain success only: a valid token whose last use needs
    no stamp, acting in its own client, for a sub-client of its subtree. The token statement and the
    sub-client's version (`service.sub_client_version`) are read on every request (a revoked token
    or a disabled client is refused at once); the answer the view's schema makes of the row is kept
    while what it is built from is unchanged (`_read_version`), the row read only to build it."""
    client_id = int(request.params["subclient_id"])
    token = request.header("HTTP_X_API_TOKEN")
    if not token or "HTTP_X_API_SUBCLIENT_ID" in request.environ or not 0 < client_id <= MAX_ID:
        return request.hand_off("no token, another acting node or an id out of range")
    with request.app.app_context(), request.unit_of_work() as connection:
        caller = unstamped_caller(token, connection)
        if caller is None:
            return request.hand_off("token unknown, revoked, expired or its use to stamp")
        version = service.sub_client_version(caller, client_id, connection)
        if version is None:
            return request.hand_off("no such sub-client in the token's subtree")
        key = (caller.root_id, client_id)
        answer = _READ_ANSWERS.peek(key, _read_version(version, request.app))
        if answer is None:
            row = service.find_sub_client_row(caller, client_id, connection)
            if row is None:
                return request.hand_off("no such sub-client in the token's subtree")
            answer = json_answer(request.app, 200, _SUB_CLIENT_ENVELOPE.dump({"data": row}))
            _READ_ANSWERS.put(key, answer, _read_version(service.sub_client_row_version(row), request.app))
        return answer


# Sub-client reads as answered, per tenant and sub-client (a kept answer is shared, never changed).
_READ_ANSWERS: Cache[HotAnswer] = Cache("sub_client_reads", maxsize=4096, ttl=ROW_VERSION_TTL)


def _read_version(row: Hashable, app: Flask) -> Hashable:
    """What a read's answer is built from besides its key: the row's version, the settings it reads
    and the JSON form (kept beside the builder, `read_sub_client_at_once`)."""
    return row, service.answer_settings(), json_form(app)


@blp.route(
    "/<subclient_id>/client_secret",
    parameters=[id_parameter("subclient_id", "A client in the acting node's subtree.")],
)
class SubClientSecret(MethodView):
    @api_token_required(subclient=True)
    @no_store
    @blp.response(200, ClientSecretEnvelope)
    @problem_doc(404, 422)
    def post(self, subclient_id: str):
        """Create or rotate the client's OpenID client secret; it is shown only in this response.

        The previous secret stays valid for `CLIENT_SECRET_GRACE_SECONDS` (default 86400). Not
        idempotent by key: a replay would have to store the secret in clear.
        """
        return {"data": service.rotate_client_secret(current_caller(), path_id(subclient_id, "subclient_id"))}


@tokens_blp.route("")
class ApiTokens(MethodView):
    @api_token_required(subclient=True)
    @no_store
    @tokens_blp.arguments(ApiTokenIn, required=False)
    @tokens_blp.response(201, IssuedApiTokenEnvelope)
    @problem_doc(400, 404, 409, 413, 415, 422)
    def post(self, args: dict):
        """Issue an API token for the acting client; the token is shown only in this response.

        Not idempotent by key: a replay would have to store the token in clear.
        """
        issued = service.create_api_token(current_caller(), name=args["name"], expires_at=args["expires_at"])
        return {"data": {**_token_fields(issued.token), "token": issued.plaintext}}

    @api_token_required(subclient=True)
    @tokens_blp.arguments(PageArgs, location="query")
    @tokens_blp.response(200, ApiTokenPage)
    @problem_doc(404, 422)
    def get(self, args: dict):
        """List the acting client's API tokens, newest first (secrets are never shown again)."""
        return service.list_api_tokens(current_caller().acting_client_id, args["page"], args["per_page"])


@tokens_blp.route("/<token_id>", parameters=[id_parameter("token_id", "An API token of the acting client.")])
class ApiTokenById(MethodView):
    @api_token_required(subclient=True)
    @tokens_blp.response(204)
    @problem_doc(404, 422)
    def delete(self, token_id: str):
        """Revoke an API token of the acting client (revoking twice is harmless)."""
        service.revoke_api_token(current_caller().acting_client_id, path_id(token_id, "token_id"))


def _token_fields(token) -> dict:
    return {
        name: getattr(token, name)
        for name in ("id", "client_id", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at")
    }
