"""Form and path values a client made up with non-ASCII characters are compared as any other
wrong value (a clear 4xx), never a 500 (found by schemathesis on POST /v1/openidc/logout)."""

from __future__ import annotations

from tests.support.oidc import form_fields

ODD = "\u00b4\u0011L\u00a6\u00e9\U0001f600"


def test_a_logout_confirmation_with_a_non_ascii_csrf_token_is_refused(client):
    client.get("/v1/openidc/logout")  # the browser gets its cookie
    response = client.post(
        "/v1/openidc/logout",
        data={
            "confirm": "yes",
            "csrf_token": ODD,
            "state": "r\u00d3",
            "id_token_hint": "\u009d\U000e63a4",
            "post_logout_redirect_uri": "\u009c\u001c\u00ff",
            "client_id": "",
        },
    )
    assert response.status_code == 403, response.get_data(as_text=True)[:300]


def test_a_privacy_reference_with_a_non_ascii_tag_is_not_found(client):
    assert client.get(f"/privacy/1-{ODD}").status_code == 404


def test_a_claim_form_with_a_non_ascii_token_is_refused(client):
    page = client.get("/claim")
    assert page.status_code == 200
    fields = form_fields(page.get_data(as_text=True))
    response = client.post("/claim", data={**fields, "csrf_token": ODD})
    assert response.status_code == 400
