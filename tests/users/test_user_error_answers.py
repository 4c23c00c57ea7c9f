"""Hardening of user creation found by probing its HTTP surface."""

from __future__ import annotations

import pytest

from tests.support.rows import row_count
from tests.support.tenancy import assert_problem, undocumented_error_statuses


def _user_count(app, client_id: int) -> int:
    from app.users.models import User

    return row_count(app, User, User.client_id == client_id)


def test_user_operations_document_every_error_they_can_answer(app):
    spec = app.test_client().get("/openapi.json").get_json()
    assert undocumented_error_statuses(spec, ("/v1/user/create",)) == {}
    assert undocumented_error_statuses(spec, ("/v1/user/{user_id}",)).get("GET /v1/user/{user_id}") is None


@pytest.mark.parametrize(
    ("member", "value"),
    [("mobile_country_code", "+44\n"), ("language_primary", "en\n"), ("residence_country", "DE\u0000")],
)
def test_a_trailing_control_character_is_refused_and_no_user_is_created(app, client, master, member, value):
    profile = {"email_address": "control@example.org", member: value}
    response = client.post("/v1/user/create", json={"profile": profile}, headers=master.headers)
    assert_problem(response, 422, f"profile.{member}")
    assert _user_count(app, master.client_id) == 0


def test_a_user_id_with_a_trailing_newline_is_a_422(client, master):
    response = client.get("/v1/user/1%0A", headers=master.headers)
    assert_problem(response, 422, "user_id")
