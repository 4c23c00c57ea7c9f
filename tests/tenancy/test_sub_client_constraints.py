"""Every constraint of spec 2.2 / 4.6-4.9 and design 4 at its boundaries, through HTTP."""

from __future__ import annotations

import re

import pytest

from tests.support.tenancy import assert_problem, count_clients, create_sub_client, load_client_row

LENGTH_CASES = [
    ("name", 0, 422),
    ("name", 1, 201),
    ("name", 70, 201),
    ("name", 71, 422),
    ("address_1", 0, 422),
    ("address_1", 1, 201),
    ("address_1", 100, 201),
    ("address_1", 101, 422),
    ("address_2", 0, 422),
    ("address_2", 1, 201),
    ("address_2", 100, 201),
    ("address_2", 101, 422),
    ("country", 0, 422),
    ("country", 1, 201),
    ("province", 0, 422),
    ("province", 1, 201),
    ("city", 0, 422),
    ("city", 1, 201),
    ("country", 255, 201),
    ("country", 256, 422),
    ("province", 255, 201),
    ("province", 256, 422),
    ("city", 255, 201),
    ("city", 256, 422),
]


@pytest.mark.parametrize(("field", "length", "status"), LENGTH_CASES)
def test_create_length_boundaries(client, app, master, field, length, status):
    before = count_clients(app, master.client_id)
    body = {"name": "Valid name", field: "x" * length}
    response = client.post("/v1/sub_client", json=body, headers=master.headers)
    if status == 201:
        assert response.status_code == 201, response.get_json()
        assert response.get_json()["data"][field] == "x" * length
        assert count_clients(app, master.client_id) == before + 1
    else:
        assert_problem(response, 422, field)
        assert count_clients(app, master.client_id) == before


@pytest.mark.parametrize(("field", "length", "status"), LENGTH_CASES)
def test_update_length_boundaries(client, app, master, field, length, status):
    sub = create_sub_client(client, master.headers, name="Before")
    before = load_client_row(app, sub["client_id"])
    response = client.put(f"/v1/sub_client/{sub['client_id']}", json={field: "y" * length}, headers=master.headers)
    if status == 201:
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["data"][field] == "y" * length
        assert client.get(f"/v1/sub_client/{sub['client_id']}", headers=master.headers).get_json()["data"][field] == (
            "y" * length
        )
    else:
        assert_problem(response, 422, field)
        assert load_client_row(app, sub["client_id"]) == before


def test_name_is_required_on_create(client, app, master):
    before = count_clients(app, master.client_id)
    assert_problem(client.post("/v1/sub_client", json={"city": "Lyon"}, headers=master.headers), 422, "name")
    assert count_clients(app, master.client_id) == before


def test_name_may_not_be_null(client, app, master):
    sub = create_sub_client(client, master.headers)
    before = load_client_row(app, sub["client_id"])
    assert_problem(
        client.put(f"/v1/sub_client/{sub['client_id']}", json={"name": None}, headers=master.headers), 422, "name"
    )
    assert load_client_row(app, sub["client_id"]) == before


def test_every_response_field_of_spec_2_2(client, master, app):
    sub = create_sub_client(client, master.headers, name="Shop", domain="example.org", subdomain="shop-1")
    expected = {
        "client_id", "name", "address_1", "address_2", "country", "province", "city", "timezone", "domain",
        "subdomain", "from_email_address", "esp_token", "recaptcha_key", "recaptcha_threshold",
        "recaptcha_enabled", "created_at", "privacy_link",
    }  # fmt: skip
    assert expected <= set(sub)
    assert isinstance(sub["client_id"], int) and sub["client_id"] > 0
    assert sub["timezone"] == "UTC"
    assert sub["from_email_address"] == "no-reply@shop-1.example.org"
    assert sub["esp_token"].startswith("esp_")
    assert sub["recaptcha_key"] == ""
    assert sub["recaptcha_threshold"] == 0.5
    assert sub["recaptcha_enabled"] is False
    assert sub["created_at"].endswith("Z")
    # The default link carries a keyed tag after the id, so privacy pages cannot be listed by id.
    assert re.fullmatch(
        rf"{re.escape(app.config['BASE_URL'])}/privacy/{sub['client_id']}-[0-9a-f]{{32}}", sub["privacy_link"]
    )
    assert sub["redirect_uris"] == [] and sub["id_token_claims"] == {}


def test_from_email_address_falls_back_to_the_deployment_default(client, master):
    sub = create_sub_client(client, master.headers, domain="example.org")
    assert sub["from_email_address"].startswith("no-reply@")
    assert sub["from_email_address"] != "no-reply@None.example.org"


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/Argentina/Buenos_Aires", "Asia/Kolkata"])
def test_timezone_accepts_iana_names(client, master, zone):
    assert create_sub_client(client, master.headers, timezone=zone)["timezone"] == zone


@pytest.mark.parametrize("zone", ["", "Mars/Olympus", "europe/paris", "+02:00", "CEST", 5])
def test_timezone_refuses_anything_else(client, app, master, zone):
    before = count_clients(app, master.client_id)
    response = client.post("/v1/sub_client", json={"name": "x", "timezone": zone}, headers=master.headers)
    assert_problem(response, 422, "timezone")
    assert count_clients(app, master.client_id) == before


def test_timezone_null_on_update_returns_to_utc(client, master):
    sub = create_sub_client(client, master.headers, timezone="Europe/Paris")
    response = client.put(f"/v1/sub_client/{sub['client_id']}", json={"timezone": None}, headers=master.headers)
    assert response.status_code == 200
    assert response.get_json()["data"]["timezone"] == "UTC"


@pytest.mark.parametrize(
    ("domain", "stored"),
    [("Example.ORG", "example.org"), ("mail.example.co.uk", "mail.example.co.uk"), ("bücher.de", "xn--bcher-kva.de")],
)
def test_domain_is_a_normalised_host_name(client, master, domain, stored):
    assert create_sub_client(client, master.headers, domain=domain)["domain"] == stored


@pytest.mark.parametrize(
    "domain",
    ["", "localhost", "example", "1.2.3.4", "-bad.example", "bad-.example", "a_b.example", "exa mple.org",
     "example.org.", "a" * 64 + ".org", ("a" * 63 + ".") * 4 + "org", "https://example.org"],
)  # fmt: skip
def test_domain_refuses_what_is_not_a_host_name(client, app, master, domain):
    before = count_clients(app, master.client_id)
    response = client.post("/v1/sub_client", json={"name": "x", "domain": domain}, headers=master.headers)
    assert_problem(response, 422, "domain")
    assert count_clients(app, master.client_id) == before


@pytest.mark.parametrize("subdomain", ["a", "Shop", "shop-1", "1", "x" * 63])
def test_subdomain_accepts_one_label(client, master, subdomain):
    assert create_sub_client(client, master.headers, subdomain=subdomain)["subdomain"] == subdomain.lower()


@pytest.mark.parametrize("subdomain", ["", "a.b", "-a", "a-", "x" * 64, "a_b", "é"])
def test_subdomain_refuses_anything_but_one_label(client, app, master, subdomain):
    before = count_clients(app, master.client_id)
    response = client.post("/v1/sub_client", json={"name": "x", "subdomain": subdomain}, headers=master.headers)
    assert_problem(response, 422, "subdomain")
    assert count_clients(app, master.client_id) == before


def test_subdomain_and_domain_pair_is_unique_across_the_service(client, app, master, other_master):
    create_sub_client(client, master.headers, domain="unique-pair.example", subdomain="shop")
    before = count_clients(app, other_master.client_id)
    body = {"name": "clash", "domain": "Unique-Pair.example", "subdomain": "SHOP"}
    problem = assert_problem(client.post("/v1/sub_client", json=body, headers=other_master.headers), 409)
    assert problem["code"] == "subdomain_taken"
    assert count_clients(app, other_master.client_id) == before
    # Either half alone may repeat.
    create_sub_client(client, other_master.headers, domain="unique-pair.example", subdomain="blog")
    create_sub_client(client, other_master.headers, domain="other-pair.example", subdomain="shop")


def test_update_into_a_taken_pair_is_a_conflict_and_changes_nothing(client, app, master):
    create_sub_client(client, master.headers, domain="taken.example", subdomain="a")
    second = create_sub_client(client, master.headers, domain="taken.example", subdomain="b")
    before = load_client_row(app, second["client_id"])
    response = client.put(f"/v1/sub_client/{second['client_id']}", json={"subdomain": "a"}, headers=master.headers)
    assert assert_problem(response, 409)["code"] == "subdomain_taken"
    assert load_client_row(app, second["client_id"]) == before
    # Re-sending its own pair is not a clash.
    same = client.put(f"/v1/sub_client/{second['client_id']}", json={"subdomain": "b"}, headers=master.headers)
    assert same.status_code == 200


def test_update_is_partial_and_null_clears(client, master):
    sub = create_sub_client(client, master.headers, name="Keep", city="Lyon", address_1="1 rue", country="FR")
    response = client.put(
        f"/v1/sub_client/{sub['client_id']}", json={"city": "Paris", "address_1": None}, headers=master.headers
    )
    data = response.get_json()["data"]
    assert (data["name"], data["city"], data["address_1"], data["country"]) == ("Keep", "Paris", "", "FR")


def test_update_needs_at_least_one_member(client, master):
    sub = create_sub_client(client, master.headers)
    assert_problem(client.put(f"/v1/sub_client/{sub['client_id']}", json={}, headers=master.headers), 422, "_schema")


@pytest.mark.parametrize(
    "uris",
    [
        ["https://app.example/callback"],
        ["http://127.0.0.1:8080/cb", "http://localhost/cb", "http://[::1]:9000/cb"],
        ["https://app.example/cb?x=1"],
    ],
)
def test_redirect_uris_accepts_https_and_loopback_http(client, master, uris):
    assert create_sub_client(client, master.headers, redirect_uris=uris)["redirect_uris"] == uris


@pytest.mark.parametrize(
    "uris",
    [
        ["http://app.example/cb"],
        ["/relative/cb"],
        ["https://app.example/cb#fragment"],
        ["https://user:pw@app.example/cb"],
        ["ftp://app.example/cb"],
        ["https://"],
        ["https://app.example/cb", "https://app.example/cb"],
        [f"https://app.example/{i}" for i in range(21)],
        "https://app.example/cb",
        ["https://app.example/" + "a" * 2048],
    ],
)
def test_redirect_uris_refuses_unsafe_uris(client, app, master, uris):
    before = count_clients(app, master.client_id)
    response = client.post("/v1/sub_client", json={"name": "x", "redirect_uris": uris}, headers=master.headers)
    assert_problem(response, 422, "redirect_uris")
    assert count_clients(app, master.client_id) == before


def test_id_token_claims_map_claims_to_profile_fields(client, master):
    claims = {"edu_username": "user_name", "given": "first_name", "urn:example:lang": "language_primary"}
    assert create_sub_client(client, master.headers, id_token_claims=claims)["id_token_claims"] == claims


@pytest.mark.parametrize(
    "claims",
    [
        {"edu_username": "no_such_field"},
        {"sub": "user_name"},
        {"user_id": "user_name"},
        {"9lives": "user_name"},
        {"": "user_name"},
        {"edu_username": 5},
        ["edu_username"],
        {f"claim_{i}": "user_name" for i in range(21)},
    ],
)
def test_id_token_claims_refuses_unknown_fields_and_reserved_claims(client, app, master, claims):
    before = count_clients(app, master.client_id)
    response = client.post("/v1/sub_client", json={"name": "x", "id_token_claims": claims}, headers=master.headers)
    body = assert_problem(response, 422)
    assert any(key.startswith("id_token_claims") for key in body["errors"]), body
    assert count_clients(app, master.client_id) == before


@pytest.mark.parametrize("bad_id", ["0", "-1", "-0", "abc", "1.5", "1e3", "2147483648", "99999999999999999999"])
def test_path_ids_must_be_positive_integers(client, app, master, bad_id):
    sub = create_sub_client(client, master.headers)
    before = load_client_row(app, sub["client_id"])
    h = master.headers
    assert_problem(client.get(f"/v1/sub_client/{bad_id}", headers=h), 422, "subclient_id")
    assert_problem(client.put(f"/v1/sub_client/{bad_id}", json={"name": "n"}, headers=h), 422, "subclient_id")
    assert_problem(client.post(f"/v1/sub_client/{bad_id}/client_secret", headers=h), 422, "subclient_id")
    assert_problem(client.delete(f"/v1/api_tokens/{bad_id}", headers=h), 422, "token_id")
    assert load_client_row(app, sub["client_id"]) == before


def test_unknown_path_id_is_not_found(client, master):
    h = master.headers
    assert_problem(client.get("/v1/sub_client/2147483647", headers=h), 404)
    assert_problem(client.put("/v1/sub_client/2147483647", json={"name": "n"}, headers=h), 404)
    assert_problem(client.post("/v1/sub_client/2147483647/client_secret", headers=h), 404)
    assert_problem(client.delete("/v1/api_tokens/2147483647", headers=h), 404)


@pytest.mark.parametrize("header", ["0", "-1", "abc", "1.0", "2147483648", " "])
def test_subclient_header_must_be_a_positive_id(client, app, master, header):
    before = count_clients(app, master.client_id)
    response = client.post(
        "/v1/sub_client", json={"name": "x"}, headers={**master.headers, "x-api-subclient-id": header}
    )
    if header.strip():
        assert_problem(response, 422, "x-api-subclient-id")
        assert count_clients(app, master.client_id) == before
    else:  # a blank header is the same as no header
        assert response.status_code == 201


@pytest.mark.parametrize(
    ("query", "field"),
    [("page=0", "page"), ("page=-1", "page"), ("page=abc", "page"), ("per_page=0", "per_page"),
     ("per_page=100", "per_page"), ("per_page=-5", "per_page"), ("per_page=x", "per_page"), ("page=1.5", "page")],
)  # fmt: skip
def test_list_query_bounds_are_refused(client, master, query, field):
    assert_problem(client.get(f"/v1/sub_client?{query}", headers=master.headers), 422, field)


@pytest.mark.parametrize(("query", "per_page"), [("page=1", 20), ("per_page=1", 1), ("per_page=99", 99), ("", 20)])
def test_list_query_bounds_are_accepted(client, master, query, per_page):
    response = client.get(f"/v1/sub_client?{query}", headers=master.headers)
    assert response.status_code == 200
    body = response.get_json()
    assert body["per_page"] == per_page and body["current_page"] == 1
