"""Verifications answered before dispatch (the hot route of app/credentials/routes.py) are the view's answers,
and everything but the plain case still reaches the view."""

from __future__ import annotations

import copy
import json

import pytest

from app.credentials import routes
from tests.support.config import config_changed
from tests.support.credentials import to_the_view
from tests.support.vectors import VECTORS, VERIFIED_VECTORS

UNBOUND = {"issuerMustControlKeys": False}


@pytest.fixture
def view_calls(client, master, monkeypatch) -> list[dict]:
    """Calls of the views' verification; the master token's first use (a stamp, the view's) is done."""
    first = client.post(
        "/v1/vc/verify", json={"verifiableCredential": _credential(), "options": UNBOUND}, headers=master.headers
    )
    assert first.status_code == 200  # a refusal would roll the stamp back on SQLite
    calls: list[dict] = []
    verify = routes._verify

    def counted(args: dict):
        calls.append(args)
        return verify(args)

    monkeypatch.setattr(routes, "_verify", counted)
    return calls


def _credential(changed: bool = False) -> dict:
    vc = json.loads((VECTORS / VERIFIED_VECTORS[0]).read_text(encoding="utf-8"))
    if changed:
        vc = copy.deepcopy(vc)
        subject = vc["credentialSubject"]
        subject = subject[0] if isinstance(subject, list) else subject
        claim = next(key for key in subject if key not in ("id", "type"))
        subject[claim] = "tampered"
    return vc


@pytest.mark.parametrize("changed", [False, True])
@pytest.mark.parametrize("path", ["/v1/vc/verify", "/credentials/verify"])
def test_the_answer_is_the_views(client, master, view_calls, changed, path):
    body = {"verifiableCredential": _credential(changed), "options": UNBOUND}
    before = client.post(path, json=body, headers={**master.headers, "X-Request-Id": "req-fast"})
    assert view_calls == []
    by_view = to_the_view(client, path, json=body, headers={**master.headers, "X-Request-Id": "req-view"})
    assert len(view_calls) == 1
    assert before.status_code == by_view.status_code == (400 if changed else 200)
    assert before.get_json() == by_view.get_json()
    assert before.headers["Content-Type"] == by_view.headers["Content-Type"] == "application/json"
    assert before.headers["X-Request-Id"] == "req-fast"
    # Without options, the default proof purpose and issuer binding apply, as in the view.
    plain = client.post(path, json={"verifiableCredential": _credential(changed)}, headers=master.headers)
    plain_by_view = to_the_view(
        client, path, json={"verifiableCredential": _credential(changed)}, headers=master.headers
    )
    assert (plain.status_code, plain.get_json()) == (plain_by_view.status_code, plain_by_view.get_json())


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({}, {"verifiableCredential": {}}, 401),  # no token
        ({"x-api-token": "tsk_unknown"}, {"verifiableCredential": {}}, 401),
        (None, {"options": {}}, 422),  # no credential
        (None, {"verifiableCredential": None}, 422),
        (None, {"verifiableCredential": {}, "options": None}, 422),
        (None, {"verifiableCredential": {}, "options": "all"}, 422),
        (None, [1, 2], 422),
    ],
)
def test_everything_else_reaches_the_view(client, master, view_calls, headers, body, status):
    answer = client.post("/v1/vc/verify", json=body, headers=master.headers if headers is None else headers)
    assert answer.status_code == status, answer.get_data(as_text=True)
    assert answer.headers["Content-Type"] == "application/problem+json"


def test_malformed_json_and_other_media_types_reach_the_view(client, master, view_calls):
    broken = client.post(
        "/v1/vc/verify", data=b'{"verifiableCredential": ', headers=master.headers, content_type="application/json"
    )
    assert broken.status_code == 400 and broken.headers["Content-Type"] == "application/problem+json"
    form = client.post("/v1/vc/verify", data={"verifiableCredential": "x"}, headers=master.headers)
    assert form.status_code == 415


def test_the_open_endpoint_needs_no_token(app, client, view_calls):
    with config_changed(app, VC_VERIFY_OPEN=True):
        answer = client.post("/credentials/verify", json={"verifiableCredential": _credential(), "options": UNBOUND})
    assert answer.status_code == 200 and answer.get_json()["verified"]
    assert view_calls == []
    closed = client.post("/credentials/verify", json={"verifiableCredential": _credential()})
    assert closed.status_code == 401 and len(view_calls) == 0


def test_a_credential_over_the_budget_is_the_views_422(app, client, master, view_calls):
    vc = _credential()
    vc["proof"] = [copy.deepcopy(vc["proof"])] * 9
    answer = client.post("/v1/vc/verify", json={"verifiableCredential": vc}, headers=master.headers)
    assert answer.status_code == 422 and answer.get_json()["code"] == "too_many_proofs"
    assert len(view_calls) == 1
