"""POST /v1/user/create: the profile of spec 2.4 with the formats of design 5, DIDs, uniqueness."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest

from tests.support.config import change_settings
from tests.support.rows import row_count
from tests.support.tenancy import assert_problem, create_sub_client

FULL_PROFILE = {
    "first_name": "Ada",
    "last_name": "Lovelace",
    "email_address": "Ada.Lovelace@Example.ORG",
    "middle_name": "King",
    "user_name": "ada",
    "mobile_number": 7700900123,
    "mobile_country_code": "+44",
    "avatar": "https://cdn.example.org/ada.png",
    "language_others": ["fr", "de-ch"],
    "language_primary": "en-gb",
    "residence_country": "GB",
    "residence_province": "England",
    "residence_city": "London",
    "gender": "female",
    "date_of_birth": "1815-12-10",
    "employment_status": "self_employed",
    "employment_industry": 541511,
    "marital_status": "married",
    "education": "doctorate",
    "household_income": "200000-",
}


def _users_in_tree(app, root_id: int) -> int:
    from app.users.models import User

    return row_count(app, User, User.root_client_id == root_id)


def _create(client, headers, profile: dict):
    return client.post("/v1/user/create", json={"profile": profile}, headers=headers)


def test_full_profile_is_validated_normalised_and_returned(client, master):
    response = _create(client, master.headers, FULL_PROFILE)
    assert response.status_code == 201, response.get_json()
    data = response.get_json()["data"]
    assert set(data) == {"user_id", "did", "created_at", "profile"}
    assert isinstance(data["user_id"], int) and data["user_id"] > 0
    assert re.fullmatch(r"did:tessera:[0-9a-f]{40}", data["did"])
    assert data["created_at"].endswith("Z")
    expected = {
        **FULL_PROFILE,
        "email_address": "ada.lovelace@example.org",
        "language_primary": "en-GB",
        "language_others": ["fr", "de-CH"],
    }
    assert data["profile"] == expected


def test_only_the_email_address_is_required(client, app, master):
    before = _users_in_tree(app, master.client_id)
    assert_problem(_create(client, master.headers, {"first_name": "No mail"}), 422, "profile.email_address")
    assert_problem(client.post("/v1/user/create", json={}, headers=master.headers), 422, "profile")
    assert _users_in_tree(app, master.client_id) == before
    assert _create(client, master.headers, {"email_address": "only@example.org"}).status_code == 201


def test_every_user_gets_a_distinct_did(client, master):
    dids = {
        _create(client, master.headers, {"email_address": f"u{i}@example.org"}).get_json()["data"]["did"]
        for i in range(5)
    }
    assert len(dids) == 5


def test_did_method_follows_configuration(client, app, master, monkeypatch):
    change_settings(monkeypatch, app, DID_METHOD="example")
    did = _create(client, master.headers, {"email_address": "m@example.org"}).get_json()["data"]["did"]
    assert re.fullmatch(r"did:example:[0-9a-f]{40}", did)


def test_duplicate_email_in_the_tree_is_a_conflict(client, app, master, other_master):
    assert _create(client, master.headers, {"email_address": "dup@example.org"}).status_code == 201
    sub = create_sub_client(client, master.headers)
    in_sub = {**master.headers, "x-api-subclient-id": str(sub["client_id"])}
    before = _users_in_tree(app, master.client_id)
    for headers, address in [(master.headers, "dup@example.org"), (in_sub, " DUP@Example.org ".strip())]:
        problem = assert_problem(_create(client, headers, {"email_address": address}), 409)
        assert problem["code"] == "email_address_taken"
    assert _users_in_tree(app, master.client_id) == before
    # Another tree may hold the same address.
    assert _create(client, other_master.headers, {"email_address": "dup@example.org"}).status_code == 201


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("gender", ["male", "female", "non_binary", "other", "prefer_not_to_say"]),
        ("employment_status", ["employed", "self_employed", "unemployed", "student", "retired", "homemaker",
                               "unable_to_work", "prefer_not_to_say"]),
        ("marital_status", ["single", "married", "domestic_partnership", "separated", "divorced", "widowed",
                            "prefer_not_to_say"]),
        ("education", ["none", "primary", "secondary", "high_school", "vocational", "associate", "bachelor",
                       "master", "doctorate", "prefer_not_to_say"]),
        ("household_income", ["0-24999", "25000-49999", "50000-74999", "75000-99999", "100000-149999",
                              "150000-199999", "200000-"]),
    ],
)  # fmt: skip
def test_enumerations_accept_exactly_their_values(client, app, master, field, values):
    for index, value in enumerate(values):
        response = _create(client, master.headers, {"email_address": f"{field}{index}@example.org", field: value})
        assert response.status_code == 201, (value, response.get_json())
    before = _users_in_tree(app, master.client_id)
    for wrong in ["", values[0] + " ", " " + values[0], values[0] + "x", "unknown", 1, None]:
        response = _create(client, master.headers, {"email_address": f"{field}-bad@example.org", field: wrong})
        assert_problem(response, 422, f"profile.{field}")
    assert _users_in_tree(app, master.client_id) == before


YESTERDAY = (date.today() - timedelta(days=2)).isoformat()
TOMORROW = (date.today() + timedelta(days=2)).isoformat()

FORMAT_CASES = [
    ("email_address", ["a@b.example", "first.last+tag@sub.example.org"], ["", "not-an-email", "a@", "@b.org", 5,
                                                                          "a@b.org" + "x" * 250]),
    ("date_of_birth", ["2000-02-29", YESTERDAY], ["2001-02-29", "2000-1-1", "01/02/2000", TOMORROW, "2000-13-01",
                                                  "20000101", 20000101]),
    ("mobile_country_code", ["+1", "+44", "+999"], ["1", "+", "+1234", "+4a", "44", 44]),
    ("mobile_number", [1, 7700900123, 999_999_999_999_999], [0, -5, 1.5, "7700900123", True,
                                                            1_000_000_000_000_000]),
    ("employment_industry", [1, 541511], [0, -1, 2.5, "541511", 1_000_000]),
    ("language_primary", ["en", "en-US", "zh-Hant-TW", "sr-Latn-RS", "es-419", "de-CH-1996", "x-private",
                          "i-klingon"], ["", "english", "xx", "en_US", "en--US", "e", "en-US-US", 5]),
    ("residence_country", ["US", "FR", "GB"], ["", "XX", "USA", "U", "UK", "gb", "Gb", " GB", "GB ", 840]),
    ("avatar", ["https://example.org/a.png", "http://example.org/a.png"], ["", "not a url", "ftp://x.org/a",
                                                                         "javascript:alert(1)"]),
    ("first_name", ["A", "A" * 100], ["", "A" * 101, 5, ["Ada"]]),
    ("user_name", ["a", "a" * 64], ["", "a" * 65]),
    ("residence_city", ["X", "X" * 100], ["", "X" * 101]),
    ("residence_province", ["X", "X" * 100], ["", "X" * 101]),
]  # fmt: skip


@pytest.mark.parametrize(("field", "good", "bad"), FORMAT_CASES, ids=[case[0] for case in FORMAT_CASES])
def test_formats(client, app, master, field, good, bad):
    for index, value in enumerate(good):
        email = value if field == "email_address" else f"{field}{index}@example.org"
        response = _create(client, master.headers, {"email_address": email, field: value})
        assert response.status_code == 201, (value, response.get_json())
    before = _users_in_tree(app, master.client_id)
    for value in bad:
        profile = {"email_address": f"{field}-bad@example.org", field: value}
        assert_problem(_create(client, master.headers, profile), 422, f"profile.{field}")
    assert _users_in_tree(app, master.client_id) == before


def test_language_others_is_a_bounded_list_of_tags(client, app, master):
    ok = _create(client, master.headers, {"email_address": "l@example.org", "language_others": []})
    assert ok.status_code == 201
    before = _users_in_tree(app, master.client_id)
    for value in [["en", "xx"], "en", [5], ["en"] * 21]:
        profile = {"email_address": "l2@example.org", "language_others": value}
        assert_problem(_create(client, master.headers, profile), 422, "profile.language_others")
    assert _users_in_tree(app, master.client_id) == before


@pytest.mark.parametrize(
    "body",
    [
        {"profile": {"email_address": "u@example.org", "nickname": "x"}},
        {"profile": {"email_address": "u@example.org"}, "extra": 1},
        {"profile": "u@example.org"},
        {"profile": ["u@example.org"]},
        {"profile": None},
    ],
)
def test_unknown_members_and_wrong_shapes_are_refused(client, app, master, body):
    before = _users_in_tree(app, master.client_id)
    response = client.post("/v1/user/create", json=body, headers=master.headers)
    assert_problem(response, 422)
    assert _users_in_tree(app, master.client_id) == before


def test_idempotency_key_replays_the_first_user(client, app, master):
    headers = {**master.headers, "Idempotency-Key": "user-create-1"}
    first = client.post("/v1/user/create", json={"profile": {"email_address": "i@example.org"}}, headers=headers)
    again = client.post("/v1/user/create", json={"profile": {"email_address": "i@example.org"}}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.get_json() == again.get_json()
    other = client.post("/v1/user/create", json={"profile": {"email_address": "j@example.org"}}, headers=headers)
    assert_problem(other, 422)
