"""Hardening of the job routes found by fuzzing their HTTP surface (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from tests.support.tenancy import assert_problem, undocumented_error_statuses


def test_job_operations_document_every_error_they_can_answer(app):
    spec = app.test_client().get("/openapi.json").get_json()
    assert undocumented_error_statuses(spec, ("/v1/jobs",)) == {}


@pytest.mark.parametrize("job_id", ["a%00b", "not-a-job", "%F0%9F%98%80", "0" * 300])
def test_a_job_id_that_cannot_exist_is_a_404_problem(client, master, job_id):
    response = client.get(f"/v1/jobs/{job_id}", headers=master.headers)
    assert assert_problem(response, 404)["code"] == "not_found"


def test_a_path_with_nul_is_404_for_everyone(client):
    # No resource has a NUL in its address, so refusing it before authentication reveals nothing.
    response = client.get("/v1/jobs/a%00b")
    assert assert_problem(response, 404)["code"] == "not_found"


def test_a_canary_body_that_is_not_json_is_a_400_problem(client, master):
    response = client.post("/v1/jobs/canary", data=b"\x00\xff", content_type="application/json", headers=master.headers)
    assert assert_problem(response, 400)["code"] == "malformed_json"
