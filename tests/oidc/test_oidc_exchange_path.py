"""Code exchanges answered before dispatch (the hot route of app/oidc/routes.py): the same answer, headers,
metrics and rate-limit bucket as the view's, and every refusal still the view's."""

from __future__ import annotations

import base64
import functools
import json
import re

import pytest

from tests.support.config import set_settings, setting_of
from tests.support.oidc import exchange, make_tenant, sign_in


def _responses_total(http, status: int) -> float:
    text = http.get("/metrics").text
    labels = rf'[^}}]*endpoint="/v1/openidc/token"[^}}]*status="{status}"[^}}]*'
    return sum(float(value) for value in re.findall(rf"tessera_http_responses_total\{{{labels}\}} (\S+)", text))


@pytest.fixture
def view_refuses_everything(app):
    """The token view answers 418 while the test runs: what still succeeds was answered before dispatch."""
    original = app.view_functions["oidc.token"]

    @functools.wraps(original)  # keeps the media types the view accepts
    def refuse(*_args, **_kwargs):
        return {"error": "view_reached"}, 418

    app.view_functions["oidc.token"] = refuse
    yield
    app.view_functions["oidc.token"] = original


def _unverified(token: str) -> dict:
    """A JWT's claims, unverified: the shapes of the two answers are compared, not their signatures."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def test_a_form_exchange_answers_as_the_view_does(client, tenant):
    form_code, json_code = sign_in(client, tenant)["code"], sign_in(client, tenant)["code"]
    by_form = client.post(
        "/v1/openidc/token",
        headers={"X-Request-Id": "exchange-1"},
        data={
            "grant_type": "authorization_code",
            "code": form_code,
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
            "redirect_uri": tenant.redirect_uri,
        },
    )
    by_json = exchange(client, tenant, json_code, as_json=True)
    assert by_form.status_code == by_json.status_code == 200
    assert by_form.headers["X-Request-Id"] == "exchange-1"
    assert set(by_form.headers.keys()) == set(by_json.headers.keys())
    for name in ("Content-Type", "Cache-Control", "Pragma"):
        assert by_form.headers[name] == by_json.headers[name]
    form_body, json_body = by_form.get_json(), by_json.get_json()
    assert set(form_body) == set(json_body)
    assert {key: form_body[key] for key in ("token_type", "scope", "expires_in", "expire_in")} == {
        key: json_body[key] for key in ("token_type", "scope", "expires_in", "expire_in")
    }
    for name in ("access_token", "id_token"):
        form_claims, json_claims = _unverified(form_body[name]), _unverified(json_body[name])
        assert set(form_claims) == set(json_claims)
        assert form_claims["sub"] == json_claims["sub"] and form_claims["aud"] == json_claims["aud"]
    assert by_form.get_data(as_text=True).endswith("\n") and by_json.get_data(as_text=True).endswith("\n")


def test_successes_and_plain_refusals_skip_the_view_and_the_rest_reach_it(client, tenant, view_refuses_everything):
    code = sign_in(client, tenant)["code"]
    assert exchange(client, tenant, code).status_code == 200
    # A wrong secret or an unknown code is explained by a read, at once.
    assert exchange(client, tenant, sign_in(client, tenant)["code"], client_secret="wrong").status_code == 401
    assert exchange(client, tenant, "unknown").status_code == 400
    # A replayed code (it revokes tokens), another grant and a JSON body are the view's to answer.
    assert exchange(client, tenant, code).status_code == 418
    assert exchange(client, tenant, sign_in(client, tenant)["code"], as_json=True).status_code == 418
    refresh = client.post("/v1/openidc/token", data={"grant_type": "refresh_token", "refresh_token": "x"})
    assert refresh.status_code == 418


def test_a_refused_exchange_changes_nothing(client, tenant):
    code = sign_in(client, tenant)["code"]
    refused = exchange(client, tenant, code, client_secret="wrong")
    assert refused.status_code == 401 and refused.get_json()["error"] == "invalid_client"
    # Nothing was consumed: the code is still good, once.
    assert exchange(client, tenant, code).status_code == 200
    replay = exchange(client, tenant, code)
    assert replay.status_code == 400 and replay.get_json()["error"] == "invalid_grant"


def test_exchanges_are_counted_in_the_metrics(client, tenant):
    before = _responses_total(client, 200)
    for _ in range(2):
        assert exchange(client, tenant, sign_in(client, tenant)["code"]).status_code == 200
    assert _responses_total(client, 200) == before + 2


def test_both_paths_spend_one_budget_and_count_each_request_once(app, client):
    tenant = make_tenant(app, client)  # a client of its own: a fresh bucket
    previous = setting_of(app, "OIDC_TOKEN_RATE_LIMIT")
    set_settings(app, OIDC_TOKEN_RATE_LIMIT="4 per minute")
    try:
        codes = [sign_in(client, tenant)["code"] for _ in range(2)]
        assert exchange(client, tenant, codes[0]).status_code == 200  # before dispatch
        assert exchange(client, tenant, codes[1], as_json=True).status_code == 200  # the view
        assert exchange(client, tenant, "nope").status_code == 400  # counted before dispatch, answered by the view
        assert exchange(client, tenant, "nope", as_json=True).status_code == 400
        limited = exchange(client, tenant, sign_in(client, tenant)["code"])
        assert limited.status_code == 429 and limited.get_json()["error"] == "slow_down"
        assert exchange(client, tenant, "nope", as_json=True).status_code == 429
    finally:
        set_settings(app, OIDC_TOKEN_RATE_LIMIT=previous)


def test_a_plain_exchange_is_one_consuming_statement_and_commits_only_where_it_needs_to(
    app, client, tenant, monkeypatch
):
    """The same redemption on every database. PostgreSQL: one statement run by the driver on an
    autocommit connection (no BEGIN/COMMIT, nothing through the session). SQLite: the consuming
    statement and a read of the user and client, in one transaction, one commit."""
    from sqlalchemy import event

    from app.dialect import DriverStatement
    from app.extensions import db

    with app.app_context():
        engine = db.engine
    code = sign_in(client, tenant)["code"]
    statements, commits, driver_statements = [], [], []
    run_by_driver = DriverStatement.first

    def spy_driver(statement, connection, parameters):
        driver_statements.append((statement._sql, getattr(connection.connection.driver_connection, "autocommit", None)))
        return run_by_driver(statement, connection, parameters)

    def on_statement(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    def on_commit(_conn) -> None:
        commits.append(True)

    monkeypatch.setattr(DriverStatement, "first", spy_driver)
    event.listen(engine, "before_cursor_execute", on_statement)
    event.listen(engine, "commit", on_commit)
    try:
        assert exchange(client, tenant, code).status_code == 200
    finally:
        event.remove(engine, "before_cursor_execute", on_statement)
        event.remove(engine, "commit", on_commit)
    consuming = [statement for statement in statements if "UPDATE oidc_authorization_codes" in statement]
    if engine.dialect.name == "postgresql":
        assert [(sql.count("UPDATE oidc_authorization_codes"), level) for sql, level in driver_statements] == [
            (1, True)
        ]
        assert consuming == [] and commits == [], statements
    else:
        assert [sql.count("UPDATE oidc_authorization_codes") for sql, _level in driver_statements] == [1, 0]
        assert len(consuming) == 1 and len(commits) == 1, statements
    replay = exchange(client, tenant, code)  # the use of the code is durable: a replay is refused
    assert replay.status_code == 400 and replay.get_json()["error"] == "invalid_grant"


def test_grants_that_write_more_take_the_unit_of_work(client, tenant):
    code = sign_in(client, tenant, scope="openid offline_access")["code"]
    answer = exchange(client, tenant, code)
    assert answer.status_code == 200 and answer.get_json()["refresh_token"]
