"""`GET /v1/sub_client/<id>` answered before Flask dispatches (its hot route, app/tenancy/routes.py).

The plain success is answered with the view's bytes and headers, counted in the metrics under the
view's route; everything else (a revoked token, a disabled client, another tenant's sub-client,
x-api-subclient-id, a last use to stamp) reaches the view, at once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from werkzeug.test import EnvironBuilder, run_wsgi_app

from tests.support.problems import assert_problem
from tests.support.tenancy import create_sub_client, token_for

RULE = "/v1/sub_client/<subclient_id>"


class _CountingInner:
    """The WSGI application behind the fast path, counting the requests it is handed."""

    def __init__(self, inner: Callable) -> None:
        self.inner = inner
        self.calls = 0

    def __call__(self, environ: dict, start_response: Callable):
        self.calls += 1
        return self.inner(environ, start_response)


@pytest.fixture
def fast_reads(app, monkeypatch):
    from app.web.hot import HotLayer

    layer = HotLayer.of(app)
    monkeypatch.setattr(layer, "inner", _CountingInner(layer.inner))
    return layer


def _responses_total(status: int) -> float:
    from prometheus_client import REGISTRY

    labels = {"method": "GET", "endpoint": RULE, "status": str(status)}
    return REGISTRY.get_sample_value("tessera_http_responses_total", labels) or 0.0


def _stamped(client, headers: dict, path: str) -> None:
    """A first read records the token's use (through the view); the next ones within a minute need not."""
    assert client.get(path, headers=headers).status_code == 200


def test_a_plain_read_has_the_view_bytes_and_headers_and_is_counted(app, client, master, fast_reads, monkeypatch):
    child = create_sub_client(client, master.headers, name="Fast child", city="Lyon")["client_id"]
    path = f"/v1/sub_client/{child}"
    _stamped(client, master.headers, path)
    monkeypatch.setitem(app.config, "HSTS_MAX_AGE", 3600)
    headers = {**master.headers, "X-Request-Id": "fast-read-1"}
    handed_on = fast_reads.inner.calls
    counted = _responses_total(200)

    fast = client.get(path, headers=headers, base_url="https://localhost")

    assert fast_reads.inner.calls == handed_on  # answered before dispatch
    assert _responses_total(200) == counted + 1
    environ = EnvironBuilder(path=path, headers=headers, base_url="https://localhost").get_environ()
    body, status, view_headers = run_wsgi_app(fast_reads.inner.inner, environ, buffered=True)
    assert fast.status == status == "200 OK"
    assert fast.get_data() == b"".join(body)
    assert sorted(fast.headers.items()) == sorted(view_headers.items())
    assert fast.headers["X-Request-Id"] == "fast-read-1"
    assert fast.headers["Strict-Transport-Security"] == "max-age=3600"
    assert fast.get_json()["data"]["city"] == "Lyon"
    made = client.get(path, headers={**master.headers, "X-Request-Id": "not an id!"}).headers["X-Request-Id"]
    assert len(made) == 32


def test_revocation_and_disabling_take_effect_at_once(app, client, master, fast_reads):
    child = create_sub_client(client, master.headers, name="Child")["client_id"]
    grandchild = create_sub_client(client, {**master.headers, "x-api-subclient-id": str(child)}, name="Grandchild")
    grandchild_path = f"/v1/sub_client/{grandchild['client_id']}"
    child_token = {"x-api-token": token_for(client, master.headers, child)}
    _stamped(client, child_token, grandchild_path)
    _stamped(client, master.headers, grandchild_path)
    handed_on = fast_reads.inner.calls
    assert client.get(grandchild_path, headers=child_token).status_code == 200
    assert fast_reads.inner.calls == handed_on

    listed = client.get("/v1/api_tokens", headers={**master.headers, "x-api-subclient-id": str(child)}).get_json()
    assert client.delete(f"/v1/api_tokens/{listed['data'][0]['id']}", headers=child_token).status_code == 204
    assert_problem(client.get(grandchild_path, headers=child_token), 401, "unauthorized")

    assert app.test_cli_runner().invoke(args=["clients", "disable", str(child)]).exit_code == 0
    assert_problem(client.get(grandchild_path, headers=master.headers), 404, "not_found")


def test_other_tenants_node_headers_cookies_and_due_stamps_reach_the_view(
    app, client, master, other_master, fast_reads
):
    from app.extensions import db
    from app.tenancy.models import ApiToken

    child = create_sub_client(client, master.headers, name="Child")["client_id"]
    path = f"/v1/sub_client/{child}"
    _stamped(client, master.headers, path)
    _stamped(client, other_master.headers, f"/v1/sub_client/{other_master.client_id}")

    handed_on = fast_reads.inner.calls
    assert_problem(client.get(path, headers=other_master.headers), 404, "not_found")
    assert_problem(client.get(path, headers={**master.headers, "x-api-subclient-id": "0"}), 422)
    assert client.get(path, headers={**master.headers, "x-api-subclient-id": str(child)}).status_code == 200
    assert_problem(client.get(f"/v1/sub_client/{2**31}", headers=master.headers), 422)
    client.set_cookie("theme", "dark")
    assert client.get(path, headers=master.headers).status_code == 200
    client.delete_cookie("theme")
    assert fast_reads.inner.calls == handed_on + 5

    with app.app_context():
        token = db.session.query(ApiToken).filter_by(client_id=master.client_id).one()
        token.last_used_at = token.last_used_at - timedelta(minutes=5)
        stale = token.last_used_at
        db.session.commit()
    assert client.get(path, headers=master.headers).status_code == 200
    assert fast_reads.inner.calls == handed_on + 6  # the view records the use
    with app.app_context():
        assert db.session.query(ApiToken).filter_by(client_id=master.client_id).one().last_used_at > stale
        db.session.rollback()
