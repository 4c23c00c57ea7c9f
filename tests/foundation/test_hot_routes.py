"""The hot-route layer (app/web/hot.py): every hot route answers as its view, through both doors,
for each success and each refusal; a fault never escapes; a hand-off says why.

Each request is sent through the hot door (as any client sends it) and through the view (the
environ's `FORCE_VIEW`, which no HTTP request can set), and the two answers compared: status,
headers and body (the tokens of a code exchange are fresh each time: their shape is compared).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from sqlalchemy.exc import OperationalError

from app.db import transaction
from app.extensions import db
from app.oidc import dpop
from app.tenancy.models import Client
from app.web.hot import FORCE_VIEW, HotLayer, hot
from tests.support.config import set_settings, setting_of
from tests.support.dpop import TOKEN_URL, Holder
from tests.support.oidc import exchange, make_tenant, pkce_pair, sign_in
from tests.support.tenancy import create_sub_client, make_master
from tests.support.vectors import VECTORS, VERIFIED_VECTORS

UNBOUND = {"issuerMustControlKeys": False}


@dataclass(frozen=True)
class Case:
    """A request to send through each door: `send(http)` sends it (a fresh code each time where
    one is spent); `at_once`: the hot door answers it itself; `tokens`: compare a token answer's shape."""

    name: str
    send: Callable
    at_once: bool
    tokens: bool = False
    without: Callable[[dict], None] | None = None  # takes what differs between two answers out of a JSON body
    volatile: tuple[str, ...] = ()  # headers both answers send with values of their own (a new job's Location)


class _Counting:
    """The application behind the layer, noting the request ids of the requests handed to it."""

    def __init__(self, inner: Callable) -> None:
        self.inner, self.calls, self.request_ids = inner, 0, set()

    def __call__(self, environ: dict, start_response: Callable):
        self.calls += 1
        self.request_ids.add(environ.get("HTTP_X_REQUEST_ID"))
        return self.inner(environ, start_response)


@pytest.fixture
def layer(app, monkeypatch) -> HotLayer:
    found = HotLayer.of(app)
    monkeypatch.setattr(found, "inner", _Counting(found.inner))
    return found


@pytest.fixture
def generous_login_rate_limit(app):
    previous = setting_of(app, "OIDC_LOGIN_RATE_LIMIT")
    set_settings(app, OIDC_LOGIN_RATE_LIMIT="100000 per minute")
    yield
    set_settings(app, OIDC_LOGIN_RATE_LIMIT=previous)


def _agent(app, *, card: bytes | None, deactivated: bool = False) -> str:
    """An agent account of this network (with a published card when `card` is given)."""
    from app.agents.models import AgentAccount, PublicCard, RegistryRecord
    from app.db import utcnow
    from app.dids.settings import DidSettings
    from app.extensions import db
    from app.settings import current

    did = f"did:{current(DidSettings, app).method}:{secrets.token_hex(20)}"
    address = "0x" + secrets.token_hex(20)
    with app.app_context():
        now = utcnow()
        db.session.add(
            AgentAccount(address=address, did=did, did_bound_at=now, deactivated_at=now if deactivated else None)
        )
        db.session.add(
            RegistryRecord(
                did=did, address=address, card_uri="https://agent.example/card.json", created_at=now, updated_at=now
            )
        )
        if card is not None:
            db.session.add(PublicCard(did=did, body=card, etag=f'"{secrets.token_hex(8)}"', job_id="test"))
        db.session.commit()
    return did


def _credential(changed: bool = False) -> dict:
    vc = json.loads((VECTORS / VERIFIED_VECTORS[0]).read_text(encoding="utf-8"))
    if changed:
        subject = vc["credentialSubject"]
        subject = subject[0] if isinstance(subject, list) else subject
        subject[next(key for key in subject if key not in ("id", "type"))] = "tampered"
    return vc


def _tenancy_cases(app, http) -> list[Case]:
    master, other = make_master(app), make_master(app, "Other organisation")
    child = create_sub_client(http, master.headers, name="Both doors", city="Lyon")["client_id"]
    path = f"/v1/sub_client/{child}"
    assert http.get(path, headers=master.headers).status_code == 200  # the token's use is stamped
    assert http.get(f"/v1/sub_client/{other.client_id}", headers=other.headers).status_code == 200
    return [
        Case("read", lambda h: h.get(path, headers=master.headers), at_once=True),
        Case("unknown token", lambda h: h.get(path, headers={"x-api-token": "tsk_unknown"}), at_once=False),
        Case("another tenant's", lambda h: h.get(path, headers=other.headers), at_once=False),
        Case(
            "acting node", lambda h: h.get(path, headers={**master.headers, "x-api-subclient-id": "0"}), at_once=False
        ),
        Case("id out of range", lambda h: h.get(f"/v1/sub_client/{2**31}", headers=master.headers), at_once=False),
    ]


def _list_cases(app, http) -> list[Case]:
    master, empty = make_master(app), make_master(app, "No children")
    for index in range(3):
        create_sub_client(http, master.headers, name=f"Listed {index}", city="Lyon", redirect_uris=[])
    assert http.get("/v1/sub_client", headers=master.headers).status_code == 200  # the token's use is stamped
    assert http.get("/v1/sub_client", headers=empty.headers).status_code == 200

    def get(query: str, headers: dict = master.headers):
        return lambda h: h.get(f"/v1/sub_client{query}", headers=headers)

    return [
        Case("first page", get(""), at_once=True),
        Case("a page", get("?page=2&per_page=2"), at_once=True),
        Case("past the end", get("?per_page=2&page=9"), at_once=True),
        Case("no children", get("?page=1", empty.headers), at_once=True),
        Case("refused by the schema", get("?per_page=100"), at_once=False),
        Case("page 0", get("?page=0"), at_once=False),
        Case("another member", get("?page=1&sort=name"), at_once=False),
        Case("repeated", get("?page=1&page=2"), at_once=False),
        Case("unknown token", get("", {"x-api-token": "tsk_unknown"}), at_once=False),
        Case("acting node", get("", {**master.headers, "x-api-subclient-id": str(master.client_id)}), at_once=False),
    ]


def _canary_cases(app, http) -> list[Case]:
    master = make_master(app)
    assert http.post("/v1/jobs/canary", json={}, headers=master.headers).status_code == 202  # the use is stamped

    def post(body, headers=master.headers):
        return lambda h: h.post("/v1/jobs/canary", json=body, headers=headers)

    def keyed(h):
        return h.post("/v1/jobs/canary", json={}, headers={**master.headers, "Idempotency-Key": secrets.token_hex(8)})

    started = {"without": _new_job, "volatile": ("Location",)}
    return [
        Case("start", post({}), at_once=True, **started),
        Case("with a delay", post({"delay_ms": 1}), at_once=True, **started),
        Case("an Idempotency-Key", keyed, at_once=False, **started),
        Case("refused by the schema", post({"delay_ms": -1}), at_once=False),
        Case("another member", post({"delay": 1}), at_once=False),
        Case("not an object", post([]), at_once=False),
        Case(
            "not JSON",
            lambda h: h.post("/v1/jobs/canary", data=b"{", headers=master.headers, content_type="application/json"),
            at_once=False,
        ),
        Case("unknown token", post({}, {"x-api-token": "tsk_unknown"}), at_once=False),
        Case("no token", post({}, {}), at_once=False),
    ]


def _new_job(body: dict) -> None:
    """Each answer starts a job of its own: its id and creation time differ."""
    assert body["data"]["state"] == "queued"
    del body["data"]["id"], body["data"]["created_at"]


def _verify_cases(path: str):
    def cases(app, http) -> list[Case]:
        master = make_master(app)
        first = http.post(
            path, json={"verifiableCredential": _credential(), "options": UNBOUND}, headers=master.headers
        )
        assert first.status_code == 200  # the token's use is stamped

        def post(body, headers=master.headers):
            return lambda h: h.post(path, json=body, headers=headers)

        return [
            Case("verified", post({"verifiableCredential": _credential(), "options": UNBOUND}), at_once=True),
            Case("not verified", post({"verifiableCredential": _credential(True), "options": UNBOUND}), at_once=True),
            Case("no token", post({"verifiableCredential": {}}, {}), at_once=False),
            Case("refused by the schema", post({"options": {}}), at_once=False),
            Case(
                "not JSON",
                lambda h: h.post(path, data=b"{", headers=master.headers, content_type="application/json"),
                at_once=False,
            ),
        ]

    return cases


def _token_cases(app, http) -> list[Case]:
    tenant = make_tenant(app, http)
    browser = app.test_client()  # signs in (and keeps the session cookie)

    def code(**params) -> str:
        return sign_in(browser, tenant, **params)["code"]

    # The first exchanges of a process create and load its signing keys (the view's): done here.
    for _ in range(2):
        assert exchange(app.test_client(), tenant, code()).status_code == 200

    def replayed(h):
        spent = code()
        assert exchange(app.test_client(), tenant, spent).status_code == 200
        return exchange(h, tenant, spent)

    def basic_wrong_secret(h):
        credentials = base64.b64encode(f"{tenant.client_id}:wrong".encode()).decode()
        return h.post(
            "/v1/openidc/token",
            headers={"Authorization": f"Basic {credentials}"},
            data={"grant_type": "authorization_code", "code": code(), "redirect_uri": tenant.redirect_uri},
        )

    holder = Holder()
    with app.app_context():
        holder.nonce = dpop.current_nonce()

    def with_proof(h):
        return exchange(h, tenant, code(), headers={"DPoP": holder.proof(TOKEN_URL)})

    bound, bound_browser = make_tenant(app, http), app.test_client()
    with app.app_context(), transaction():
        db.session.get(Client, bound.client_id).dpop_bound_access_tokens = True

    def bound_code() -> str:
        return sign_in(bound_browser, bound)["code"]

    def with_pkce(verifier_sent: str | None):
        def send(h):
            verifier, challenge = pkce_pair()
            issued = code(code_challenge=challenge, code_challenge_method="S256")
            return exchange(h, tenant, issued, code_verifier=verifier if verifier_sent is None else verifier_sent)

        return send

    return [
        Case("exchange", lambda h: exchange(h, tenant, code()), at_once=True, tokens=True),
        Case("exchange with PKCE", with_pkce(None), at_once=True, tokens=True),
        Case("wrong secret", lambda h: exchange(h, tenant, code(), client_secret="wrong"), at_once=True),
        Case("wrong secret by Basic", basic_wrong_secret, at_once=True),
        Case("unknown client", lambda h: exchange(h, tenant, code(), client_id="999999999"), at_once=True),
        Case("unknown code", lambda h: exchange(h, tenant, "unknown"), at_once=True),
        Case(
            "another redirect_uri",
            lambda h: exchange(h, tenant, code(), redirect_uri="https://elsewhere.test/cb"),
            at_once=True,
        ),
        Case("wrong verifier", with_pkce("x" * 43), at_once=True),
        Case("replayed code", replayed, at_once=False),
        Case(
            "refresh token issued",
            lambda h: exchange(h, tenant, code(scope="openid offline_access")),
            at_once=False,
            tokens=True,
        ),
        Case("JSON body", lambda h: exchange(h, tenant, code(), as_json=True), at_once=False, tokens=True),
        Case("DPoP proof", with_proof, at_once=False, tokens=True, volatile=("DPoP-Nonce",)),
        Case("DPoP-bound client without a proof", lambda h: exchange(h, bound, bound_code()), at_once=True),
        Case("dpop_jkt code, no proof", lambda h: exchange(h, tenant, code(dpop_jkt=holder.jkt)), at_once=True),
    ]


def _card_cases(app, http) -> list[Case]:
    did, unknown = _agent(app, card=b'{"name": "Both doors"}'), _agent(app, card=None)
    etag = http.get(f"/api/agent-card/{did}").headers["ETag"]
    return [
        Case("card", lambda h: h.get(f"/api/agent-card/{did}"), at_once=True),
        Case("not modified", lambda h: h.get(f"/api/agent-card/{did}", headers={"If-None-Match": etag}), at_once=True),
        Case(
            "weak validator",
            lambda h: h.get(f"/api/agent-card/{did}", headers={"If-None-Match": f"W/{etag}"}),
            at_once=True,
        ),
        Case("no card", lambda h: h.get(f"/api/agent-card/{unknown}"), at_once=False),
    ]


def _did_cases(app, http) -> list[Case]:
    did, gone = _agent(app, card=None), _agent(app, card=None, deactivated=True)
    etag = http.get(f"/api/did/{did}").headers["ETag"]
    other_method = "did:othermethod:" + "0" * 40
    return [
        Case("document", lambda h: h.get(f"/api/did/{did}"), at_once=True),
        Case("not modified", lambda h: h.get(f"/api/did/{did}", headers={"If-None-Match": etag}), at_once=True),
        Case(
            "resolution result",
            lambda h: h.get(f"/api/did/{did}", headers={"Accept": "application/did-resolution"}),
            at_once=False,
            without=_retrieval_time,
        ),
        Case("deactivated", lambda h: h.get(f"/api/did/{gone}"), at_once=False, without=_retrieval_time),
        Case("unknown", lambda h: h.get(f"/api/did/did:{did.split(':')[1]}:{'0' * 40}"), at_once=False),
        Case("another method", lambda h: h.get(f"/api/did/{other_method}"), at_once=False),
    ]


CASES: dict[str, Callable] = {
    "sub_clients.SubClientById": _tenancy_cases,
    "sub_clients.SubClients": _list_cases,
    "jobs.start_canary": _canary_cases,
    "credentials.verify_credential": _verify_cases("/v1/vc/verify"),
    "credentials.verify_credential_vc_api": _verify_cases("/credentials/verify"),
    "oidc.token": _token_cases,
    "agents.public_agent_card": _card_cases,
    "agents.resolve_did": _did_cases,
}
_VOLATILE = {"Content-Length"}  # of token answers, whose tokens differ


def test_every_hot_route_has_its_cases(app):
    assert {route.view for route in hot.routes} == set(CASES)


def _retrieval_time(body: dict) -> None:
    del body["didResolutionMetadata"]["retrieved"]


def _unverified_claims(token: str) -> set[str]:
    payload = token.split(".")[1]
    return set(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def _assert_same_tokens(hot_body: dict, view_body: dict) -> None:
    assert set(hot_body) == set(view_body)
    for name, value in hot_body.items():
        if name in ("access_token", "id_token"):
            assert _unverified_claims(value) == _unverified_claims(view_body[name])
        elif name != "refresh_token":
            assert value == view_body[name], name


@pytest.mark.parametrize("view", sorted(CASES))
def test_both_doors_answer_alike(app, client, layer, generous_login_rate_limit, view):
    hot_door, view_door = app.test_client(), app.test_client()
    view_door.environ_base[FORCE_VIEW] = True
    for case in CASES[view](app, client):
        request_id = f"both-doors-{secrets.token_hex(4)}"
        by_hot = case.send(_with_request_id(hot_door, request_id))
        answered_at_once = request_id not in layer.inner.request_ids
        by_view = case.send(_with_request_id(view_door, request_id))
        assert answered_at_once == case.at_once, case.name
        assert by_hot.status_code == by_view.status_code, (case.name, by_hot.get_data(), by_view.get_data())
        hot_headers, view_headers = dict(by_hot.headers), dict(by_view.headers)
        assert hot_headers["X-Request-Id"] == request_id, case.name
        for name in case.volatile:
            assert name in hot_headers and name in view_headers, (case.name, name)
            del hot_headers[name], view_headers[name]
        if case.tokens and by_hot.status_code == 200:
            for headers in (hot_headers, view_headers):
                for name in _VOLATILE:
                    headers.pop(name, None)
            _assert_same_tokens(by_hot.get_json(), by_view.get_json())
        elif case.without is not None:  # the bytes differ, and so do their validator and length
            hot_body, view_body = json.loads(by_hot.get_data()), json.loads(by_view.get_data())
            case.without(hot_body)
            case.without(view_body)
            assert hot_body == view_body, case.name
            for headers in (hot_headers, view_headers):
                for name in ("ETag", "Content-Length"):
                    headers.pop(name, None)
        else:
            assert by_hot.get_data() == by_view.get_data(), case.name
        assert hot_headers == view_headers, case.name


def _with_request_id(http, request_id: str):
    http.environ_base["HTTP_X_REQUEST_ID"] = request_id
    return http


def _replace_handler(monkeypatch, layer: HotLayer, view: str, handler: Callable) -> None:
    for method, routes in layer._routes.items():
        replaced = [
            (dataclasses.replace(route, handler=handler) if route.view == view else route, rule)
            for route, rule in routes
        ]
        monkeypatch.setitem(layer._routes, method, replaced)


def test_an_unexpected_fault_is_a_logged_problem_500_never_an_escape(app, layer, monkeypatch, caplog):
    def broken(_request):
        raise RuntimeError("the handler broke")

    _replace_handler(monkeypatch, layer, "agents.resolve_did", broken)
    did = _agent(app, card=None)
    with caplog.at_level(logging.ERROR, logger="app.web.hot"):
        answer = app.test_client().get(f"/api/did/{did}", headers={"X-Request-Id": "fault-1"})
    assert answer.status_code == 500
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert answer.headers["X-Request-Id"] == "fault-1"
    assert answer.get_json()["code"] == "internal_error"
    assert layer.inner.calls == 0
    [record] = [record for record in caplog.records if record.name == "app.web.hot"]
    assert record.levelno == logging.ERROR and record.exc_info[0] is RuntimeError
    assert "/api/did/" in record.getMessage()


def test_a_database_fault_is_logged_and_the_view_answers(app, layer, monkeypatch, caplog):
    def unreachable(_request):
        raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))

    _replace_handler(monkeypatch, layer, "agents.resolve_did", unreachable)
    did = _agent(app, card=None)
    with caplog.at_level(logging.INFO, logger="app.web.hot"):
        answer = app.test_client().get(f"/api/did/{did}")
    assert answer.status_code == 200 and layer.inner.calls == 1
    assert any(
        record.levelno == logging.INFO and "OperationalError" in record.getMessage()
        for record in caplog.records
        if record.name == "app.web.hot"
    )


def test_a_hand_off_says_why_in_the_debug_log(app, layer, caplog):
    did = _agent(app, card=None)
    with caplog.at_level(logging.DEBUG, logger="app.web.hot"):
        answer = app.test_client().get(f"/api/agent-card/{did}")
    assert answer.status_code == 404 and layer.inner.calls == 1
    messages = [record.getMessage() for record in caplog.records if record.name == "app.web.hot"]
    assert any("handed to the view: no published card" in message for message in messages), messages
