"""API plumbing through HTTP: problem+json for every error, probes, OpenAPI, idempotency."""

from __future__ import annotations

import json

import pytest

from tests.support.problems import assert_problem

PROBLEM = "application/problem+json"


def test_health_and_readiness(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.get_json()["checks"] == {"database": "ok", "broker": "ok"}


def test_metrics_are_prometheus_text(client, master):
    client.get("/healthz")
    body = client.get("/metrics").get_data(as_text=True)
    assert "tessera_http_request_duration_seconds_bucket" in body
    assert 'tessera_jobs{state="queued"}' in body


def test_openapi_document_and_docs_ui(client):
    spec = client.get("/openapi.json").get_json()
    assert spec["openapi"].startswith("3.")
    assert "/v1/jobs/{job_id}" in spec["paths"]
    assert spec["components"]["securitySchemes"]["ApiToken"]["name"] == "x-api-token"
    canary = spec["paths"]["/v1/jobs/canary"]["post"]
    assert "Idempotency-Key" in {p["name"] for p in canary["parameters"]}
    assert PROBLEM in canary["responses"]["422"]["content"]
    assert client.get("/docs").status_code == 200


def test_openapi_says_the_packages_version_and_that_optional_bodies_are_optional(client, master):
    import tomllib

    from tests.support.environment import REPO_ROOT

    spec = client.get("/openapi.json").get_json()
    assert spec["info"]["version"] == tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    # Bodies whose every member has a default: the operation takes a request without one.
    for path, method in (("/v1/jobs/canary", "post"), ("/v1/api_tokens", "post"),
                         ("/v1/openidc/initial_access_tokens", "post"), ("/api/agents/{did}", "delete")):  # fmt: skip
        assert spec["paths"][path][method]["requestBody"]["required"] is False, (method, path)
    started = client.post("/v1/jobs/canary", headers=master.headers)
    assert started.status_code == 202, started.get_data(as_text=True)


def test_unknown_path_is_problem_404(client):
    assert_problem(client.get("/v1/nothing-here"), 404, "not_found")


def test_wrong_method_is_problem_405_with_allow(client):
    response = client.delete("/v1/jobs/canary")
    assert_problem(response, 405)
    assert "POST" in response.headers["Allow"]


def test_missing_and_unknown_token_are_401_with_challenge(client):
    response = client.get("/v1/jobs/abc")
    assert_problem(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"].startswith("ApiToken")
    assert_problem(client.get("/v1/jobs/abc", headers={"x-api-token": "tsk_nope"}), 401)


def test_validation_errors_name_the_field(client, master):
    response = client.post("/v1/jobs/canary", json={"delay_ms": -1, "surprise": 1}, headers=master.headers)
    body = assert_problem(response, 422, "validation_failed")
    assert set(body["errors"]) == {"delay_ms", "surprise"}


def test_wrong_type_is_422(client, master):
    body = assert_problem(client.post("/v1/jobs/canary", json={"delay_ms": "soon"}, headers=master.headers), 422)
    assert "delay_ms" in body["errors"]


def test_malformed_json_is_400(client, master):
    response = client.post("/v1/jobs/canary", data="{not json", content_type="application/json", headers=master.headers)
    assert_problem(response, 400, "malformed_json")


def test_wrong_content_type_is_415(client, master):
    response = client.post("/v1/jobs/canary", data="delay_ms=1", content_type="text/plain", headers=master.headers)
    assert_problem(response, 415, "unsupported_media_type")


def test_huge_body_is_413(client, master):
    payload = json.dumps({"delay_ms": 1, "pad": "x" * (1024 * 1024 + 10)})
    response = client.post("/v1/jobs/canary", data=payload, content_type="application/json", headers=master.headers)
    assert_problem(response, 413)


def test_unexpected_error_is_problem_500_without_trace(app, client):
    from flask import Blueprint

    if "boom" not in app.blueprints:
        probe = Blueprint("boom", __name__)

        @probe.get("/__boom")
        def boom():
            raise RuntimeError("secret internals")

        app.view_functions.pop("boom.boom", None)
        app._got_first_request = False
        app.register_blueprint(probe)
    response = client.get("/__boom")
    body = assert_problem(response, 500, "internal_error")
    assert "secret internals" not in json.dumps(body)


def test_rate_limit_is_problem_429_with_retry_after(app, client):
    from flask import Blueprint

    from app.extensions import limiter

    if "limited" not in app.blueprints:
        probe = Blueprint("limited", __name__)

        @probe.get("/__limited")
        @limiter.limit("1 per minute")
        def limited():
            return {"ok": True}

        app._got_first_request = False
        app.register_blueprint(probe)
    client.get("/__limited")
    response = client.get("/__limited")
    assert_problem(response, 429)
    assert int(response.headers["Retry-After"]) > 0


def test_request_id_is_echoed_or_made(client):
    assert client.get("/healthz", headers={"X-Request-Id": "abc-123"}).headers["X-Request-Id"] == "abc-123"
    assert len(client.get("/healthz").headers["X-Request-Id"]) == 32


def test_idempotency_key_replays_first_response(client, master):
    headers = {**master.headers, "Idempotency-Key": "canary-1"}
    first = client.post("/v1/jobs/canary", json={"delay_ms": 0}, headers=headers)
    second = client.post("/v1/jobs/canary", json={"delay_ms": 0}, headers=headers)
    assert first.status_code == second.status_code == 202
    assert second.get_json()["data"]["id"] == first.get_json()["data"]["id"]
    assert second.headers["Location"] == first.headers["Location"]
    assert second.headers["Idempotent-Replayed"] == "true"


def test_idempotency_key_with_other_body_is_422(client, master):
    headers = {**master.headers, "Idempotency-Key": "canary-2"}
    assert client.post("/v1/jobs/canary", json={"delay_ms": 0}, headers=headers).status_code == 202
    assert_problem(client.post("/v1/jobs/canary", json={"delay_ms": 5}, headers=headers), 422)


def test_idempotency_keys_are_per_tenant(app, client, master):
    from tests.support.tenancy import make_master

    other = make_master(app, "Other organisation")
    first = client.post("/v1/jobs/canary", json={}, headers={**master.headers, "Idempotency-Key": "same"})
    second = client.post("/v1/jobs/canary", json={}, headers={**other.headers, "Idempotency-Key": "same"})
    assert first.get_json()["data"]["id"] != second.get_json()["data"]["id"]


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json"])
def test_probes_need_no_token(client, path):
    assert client.get(path).status_code == 200


def test_json_nested_too_deeply_is_400(client, master):
    body = "[" * 100_000 + "]" * 100_000
    response = client.post("/v1/jobs/canary", data=body, content_type="application/json", headers=master.headers)
    assert_problem(response, 400, "malformed_json")


def test_nul_in_a_path_is_404_before_any_query(client, master):
    assert_problem(client.get("/v1/jobs/abc%00def", headers=master.headers), 404, "not_found")


def test_a_value_the_database_refuses_is_400_not_500(app, client):
    from flask import Blueprint

    from app.extensions import db
    from app.jobs.models import Job

    if "unstorable" not in app.blueprints:
        probe = Blueprint("unstorable", __name__)

        @probe.get("/__unstorable")
        def unstorable():
            # PostgreSQL text cannot hold NUL (SQLite stores it).
            db.session.add(Job(id="x" * 36, kind="pro\x00be", payload={}, attempts=0))
            db.session.flush()
            return {"stored": True}

        app._got_first_request = False
        app.register_blueprint(probe)
    response = client.get("/__unstorable")
    if app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite"):
        assert response.status_code == 200
        response = client.get("/__unstorable")  # the same primary key again: a conflict, not a fault
        assert_problem(response, 409)
    else:
        assert_problem(response, 400, "invalid_value")


def test_a_read_only_views_change_is_written_by_its_edge_only_when_the_answer_succeeds(app, client, master):
    # A read unit of work never writes on its own (on PostgreSQL its reads run in autocommit, where
    # a flushed stamp would commit by itself): its edge writes the change, or drops it with a 4xx.
    from flask import Blueprint
    from sqlalchemy import select

    from app.db import read_only
    from app.errors import NotFound
    from app.extensions import db
    from app.tenancy.models import Client

    if "stamping" not in app.blueprints:
        probe = Blueprint("stamping", __name__)

        @probe.get("/__stamping/<int:client_id>/<city>/<answer>")
        @read_only
        def stamping(client_id: int, city: str, answer: str):
            db.session.get(Client, client_id).city = city
            db.session.scalar(select(Client.id).limit(1))  # no autoflush: the change waits for the edge
            if answer == "refused":
                raise NotFound("refused after the change")
            if answer == "flushed":
                db.session.flush()
            return {"stamped": True}

        app._got_first_request = False
        app.register_blueprint(probe)
    assert client.get(f"/__stamping/{master.client_id}/Refused/refused").status_code == 404
    with app.app_context():
        assert db.session.get(Client, master.client_id).city != "Refused"
    assert client.get(f"/__stamping/{master.client_id}/Flushed/flushed").status_code == 500
    with app.app_context():
        assert db.session.get(Client, master.client_id).city != "Flushed"
    assert client.get(f"/__stamping/{master.client_id}/Kept/ok").status_code == 200
    with app.app_context():
        assert db.session.get(Client, master.client_id).city == "Kept"
