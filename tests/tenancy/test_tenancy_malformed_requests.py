"""Malformed JSON, wrong content types, huge bodies, unknown members and wrong types: 4xx, never 5xx."""

from __future__ import annotations

import pytest

from tests.support.tenancy import count_clients, count_users, create_sub_client

BODY_ENDPOINTS = [
    ("post", "/v1/sub_client"),
    ("put", "/v1/sub_client/{sub}"),
    ("post", "/v1/api_tokens"),
    ("post", "/v1/user/create"),
]
RAW_BODIES = [
    (b"{bad json", "application/json"),
    (b"\xff\xfe\x00garbage", "application/json"),
    (b"[1, 2, 3]", "application/json"),
    (b'"just a string"', "application/json"),
    (b"null", "application/json"),
    (b"42", "application/json"),
    (b'{"name": "x"', "application/json"),
    (b"name=x", "application/x-www-form-urlencoded"),
    (b"<name>x</name>", "application/xml"),
    (b'{"name": "x"}', "text/plain"),
    (b'{"name": "x"}', "multipart/form-data; boundary=x"),
    (b'{"name": "' + b"x" * (1024 * 1024 + 10) + b'"}', "application/json"),
]


def _problem_4xx(response) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.get_data(as_text=True)[:300])
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["status"] == response.status_code


@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
@pytest.mark.parametrize(("raw", "content_type"), RAW_BODIES, ids=range(len(RAW_BODIES)))
def test_raw_bodies_get_a_problem_not_a_crash(client, app, master, method, path, raw, content_type):
    sub = create_sub_client(client, master.headers)
    before = count_clients(app, master.client_id), count_users(app, master.client_id)
    response = getattr(client, method)(
        path.format(sub=sub["client_id"]), data=raw, content_type=content_type, headers=master.headers
    )
    _problem_4xx(response)
    assert (count_clients(app, master.client_id), count_users(app, master.client_id)) == before


def test_status_codes_for_the_common_mistakes(client, master):
    h = master.headers
    assert client.post("/v1/sub_client", data=b"{bad", content_type="application/json", headers=h).status_code == 400
    assert client.post("/v1/sub_client", data=b'{"name":"x"}', content_type="text/plain", headers=h).status_code == 415
    huge = b'{"name": "' + b"x" * (1024 * 1024 + 10) + b'"}'
    assert client.post("/v1/sub_client", data=huge, content_type="application/json", headers=h).status_code == 413


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "unknown_member": 1},
        {"name": "x", "client_id": 5},
        {"name": "x", "esp_token": "mine"},
        {"name": "x", "recaptcha_enabled": True},
        {"name": "x", "from_email_address": "a@b.example"},
        {"name": 5},
        {"name": None},
        {"name": ["x"]},
        {"name": {"first": "x"}},
        {"name": True},
        {"name": "x", "address_1": 12},
        {"name": "x", "country": False},
        {"name": "x", "timezone": ["UTC"]},
        {"name": "x", "domain": 3.5},
        {"name": "x", "subdomain": {}},
        {"name": "x", "redirect_uris": [1]},
        {"name": "x", "redirect_uris": {"a": "b"}},
        {"name": "x", "id_token_claims": "edu_username"},
        {"name": "x" * 100_000},
    ],
)
def test_unknown_members_and_wrong_types_are_422(client, app, master, body):
    before = count_clients(app, master.client_id)
    response = client.post("/v1/sub_client", json=body, headers=master.headers)
    assert response.status_code == 422, response.get_json()
    _problem_4xx(response)
    assert response.get_json()["errors"]
    assert count_clients(app, master.client_id) == before


def test_response_only_fields_cannot_be_set_by_update(client, app, master):
    sub = create_sub_client(client, master.headers)
    for member in ("client_id", "esp_token", "created_at", "privacy_link", "recaptcha_key", "parent_client_id"):
        response = client.put(f"/v1/sub_client/{sub['client_id']}", json={member: "x"}, headers=master.headers)
        assert response.status_code == 422 and member in response.get_json()["errors"]


def test_unknown_methods_and_paths_are_problems(client, master):
    _problem_4xx(client.delete("/v1/sub_client", headers=master.headers))
    _problem_4xx(client.patch("/v1/sub_client/1", json={}, headers=master.headers))
    _problem_4xx(client.get("/v1/sub_client/1/2/3", headers=master.headers))
    assert client.delete("/v1/sub_client", headers=master.headers).status_code == 405


def test_huge_header_values_are_refused_cleanly(client, master):
    _problem_4xx(client.get("/v1/sub_client", headers={"x-api-token": "t" * 100_000}))
    _problem_4xx(client.get("/v1/sub_client", headers={**master.headers, "x-api-subclient-id": "9" * 10_000}))


UNSTORABLE = ["a\u0000b", "\ud800", "line\nbreak", "tab\there", "\u007f"]
LONE_SURROGATE = "\ud800"


def _refused(response, field: str, value: str) -> bool:
    """A lone surrogate is malformed JSON wherever a body is parsed (400, named by its pointer); the
    other unstorable characters are a 422 naming the member."""
    body = response.get_json()
    if value == LONE_SURROGATE:
        return response.status_code == 400 and body["code"] == "malformed_json" and f"/{field}" in body["detail"]
    return response.status_code == 422 and field in body["errors"]


SUB_CLIENT_STRINGS = ["name", "address_1", "address_2", "country", "province", "city", "timezone", "domain",
                      "subdomain"]  # fmt: skip


@pytest.mark.parametrize("value", UNSTORABLE, ids=["nul", "surrogate", "newline", "tab", "del"])
def test_control_characters_and_lone_surrogates_are_refused_everywhere(client, app, master, value):
    """PostgreSQL cannot store NUL or lone surrogates; every string member refuses them up front (a lone
    surrogate already as malformed JSON), and nothing is written."""
    sub = create_sub_client(client, master.headers)
    before = count_clients(app, master.client_id)
    for field in SUB_CLIENT_STRINGS:
        response = client.post("/v1/sub_client", json={"name": "x", field: value}, headers=master.headers)
        assert _refused(response, field, value), (field, response.get_json())
        response = client.put(f"/v1/sub_client/{sub['client_id']}", json={field: value}, headers=master.headers)
        assert _refused(response, field, value), (field, response.get_json())
    for member in ({"redirect_uris": [f"https://a.example/{value}"]}, {"id_token_claims": {value: "user_name"}},
                   {"id_token_claims": {"claim": value}}):  # fmt: skip
        response = client.post("/v1/sub_client", json={"name": "x", **member}, headers=master.headers)
        assert response.status_code == (400 if value == LONE_SURROGATE else 422), (member, response.get_json())
    response = client.post("/v1/api_tokens", json={"name": value}, headers=master.headers)
    assert _refused(response, "name", value), response.get_json()
    assert count_clients(app, master.client_id) == before
    from app.profile.schemas import ProfileSchema

    users_before = count_users(app, master.client_id)
    for field in ProfileSchema._declared_fields:
        sample = [value] if field == "language_others" else value
        profile = {"email_address": "cc@example.org", field: sample}
        if field == "email_address":
            profile = {"email_address": f"c{value}c@example.org"}
        response = client.post("/v1/user/create", json={"profile": profile}, headers=master.headers)
        assert response.status_code == (400 if value == LONE_SURROGATE else 422), (field, response.get_json())
    assert count_users(app, master.client_id) == users_before
