"""Assertions on RFC 9457 problem+json answers, shared by every feature's tests."""

from __future__ import annotations

PROBLEM = "application/problem+json"


def assert_problem(response, status: int, code: str | None = None, *, field: str | None = None) -> dict:
    """The response is a problem with `status` (and `code`); with `field`, its errors name the field.

    Nested members count: `redirect_uris.0` names `redirect_uris`. Returns the body.
    """
    assert response.status_code == status, (response.status_code, response.get_data(as_text=True)[:500])
    assert response.mimetype == PROBLEM
    body = response.get_json(force=True)
    assert body["status"] == status
    assert {"type", "title", "status", "detail", "code"} <= body.keys()
    assert "Traceback" not in response.get_data(as_text=True)
    if code is not None:
        assert body["code"] == code, body
    if field is not None:
        assert any(key == field or key.startswith(f"{field}.") for key in body["errors"]), body
    return body
