"""`GET /v1/sub_client` keeps each item's dump per version of its row and of the settings it reads
(`schemas.ListedSubClients`), and its hot route each page's answer per version of its rows, those
settings and the JSON form (`routes._page_version`), as `GET /v1/sub_client/{id}`'s hot route keeps
each read's answer (`routes._read_version`): a listed item is what a read of that sub-client answers,
before and after they are kept, and any change of a row, a setting or the form shows at once."""

from __future__ import annotations

import dataclasses

from tests.support.tenancy import create_sub_client

_JWKS = {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "k1"}]}
_FULL = {
    "name": "Ünïcode Ltd", "address_1": "1 rue", "country": "FR", "city": "Lyon", "timezone": "Europe/Paris",
    "domain": "example.org", "subdomain": "listed-full", "redirect_uris": ["https://a.example/cb"],
    "id_token_claims": {"edu_username": "user_name"}, "logo_url": "https://a.example/logo.png",
    "accent_color": "#AABBCC", "jwks": _JWKS, "client_credentials_scopes": ["a:b", "c"],
    "grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_post",
    "issue_refresh_tokens": True, "refresh_token_ttl": 3600, "signing_alg": "ES256",
}  # fmt: skip


def _page(client, headers: dict) -> dict[int, dict]:
    response = client.get("/v1/sub_client?per_page=50", headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    return {item["client_id"]: item for item in response.get_json()["data"]}


def _calls_to(monkeypatch, name: str) -> list:
    """The calls made from now on to the tenancy service's function `name`, which still runs."""
    from app.tenancy import service

    calls = []
    function = getattr(service, name)
    monkeypatch.setattr(service, name, lambda *args: calls.append(args) or function(*args))
    return calls


def _read(client, headers: dict, client_id: int) -> dict:
    response = client.get(f"/v1/sub_client/{client_id}", headers=headers)
    assert response.status_code == 200
    return response.get_json()["data"]


def test_listed_items_are_what_a_read_answers_before_and_after_they_are_kept(client, master, other_master):
    full = create_sub_client(client, master.headers, **_FULL)["client_id"]
    plain = create_sub_client(client, master.headers, name="Plain")["client_id"]
    other = create_sub_client(client, other_master.headers, name="Another tenant's")["client_id"]

    first = client.get("/v1/sub_client?per_page=50", headers=master.headers)
    again = client.get("/v1/sub_client?per_page=50", headers=master.headers)

    assert again.get_data() == first.get_data()
    listed = {item["client_id"]: item for item in again.get_json()["data"]}
    assert set(listed) == {full, plain}
    for client_id in (full, plain):
        assert listed[client_id] == _read(client, master.headers, client_id)
    assert listed[full]["jwks"] == _JWKS and listed[full]["grant_types"][-1] == "client_credentials"
    assert "jwks" not in listed[plain] and listed[plain]["redirect_uris"] == []
    assert set(_page(client, other_master.headers)) == {other}


def test_a_changed_row_is_listed_as_changed(app, client, master):
    from app.db import transaction
    from app.tenancy import service

    child = create_sub_client(client, master.headers, name="Before", redirect_uris=["https://a.example/1"])
    child_id = child["client_id"]
    assert _page(client, master.headers)[child_id] == child

    changes = {"name": "After", "redirect_uris": ["https://a.example/2"], "jwks": _JWKS}
    assert client.put(f"/v1/sub_client/{child_id}", json=changes, headers=master.headers).status_code == 200
    listed = _page(client, master.headers)[child_id]
    assert (listed["name"], listed["redirect_uris"], listed["jwks"]) == ("After", ["https://a.example/2"], _JWKS)

    with app.app_context(), transaction():  # the operator's paths, not the API's
        service.configure_recaptcha(child_id, site_key="site", secret=None, threshold=0.7, enabled=True)
    listed = _page(client, master.headers)[child_id]
    assert (listed["recaptcha_key"], listed["recaptcha_threshold"], listed["recaptcha_enabled"]) == ("site", 0.7, True)
    assert listed == _read(client, master.headers, child_id)


def test_the_settings_an_item_reads_are_part_of_its_version(app, client, master, monkeypatch):
    from app.settings import EXTENSION_KEY
    from app.tenancy.settings import TenancySettings

    child_id = create_sub_client(client, master.headers, name="Settings")["client_id"]
    before = _page(client, master.headers)[child_id]
    assert before == _read(client, master.headers, child_id)

    settings = app.extensions[EXTENSION_KEY]
    monkeypatch.setitem(app.config, "BASE_URL", "https://elsewhere.example")
    elsewhere = dataclasses.replace(settings[TenancySettings], mail_default_from="x@elsewhere.example")
    monkeypatch.setitem(settings, TenancySettings, elsewhere)
    after = _page(client, master.headers)[child_id]

    assert after["privacy_link"].startswith("https://elsewhere.example/privacy/")
    assert not before["privacy_link"].startswith("https://elsewhere.example/")
    assert after["from_email_address"] == "x@elsewhere.example" != before["from_email_address"]
    assert after == _read(client, master.headers, child_id)


def test_an_answer_kept_follows_the_json_form(app, client, master, monkeypatch):
    child_id = create_sub_client(client, master.headers, name="Form")["client_id"]
    compact = client.get("/v1/sub_client", headers=master.headers).get_data()
    read = client.get(f"/v1/sub_client/{child_id}", headers=master.headers).get_data()
    assert client.get("/v1/sub_client", headers=master.headers).get_data() == compact

    monkeypatch.setattr(app.json, "compact", False)
    indented = client.get("/v1/sub_client", headers=master.headers).get_data()
    read_indented = client.get(f"/v1/sub_client/{child_id}", headers=master.headers).get_data()

    assert indented != compact and b'\n  "data": [\n' in indented
    assert read_indented != read and b'\n  "data": {\n' in read_indented


def test_a_row_written_by_anyone_else_is_listed_as_changed(app, client, master):
    """A page or a read kept is versioned by its rows' versions (`app.dialect.row_version`), not by
    the service's writes: a plain UPDATE from elsewhere (an operator's SQL, another release) shows at once."""
    from sqlalchemy import update

    from app.db import transaction
    from app.extensions import db
    from app.tenancy.models import Client

    child_id = create_sub_client(client, master.headers, name="Before", city="Lyon")["client_id"]
    assert _page(client, master.headers)[child_id]["city"] == _read(client, master.headers, child_id)["city"] == "Lyon"

    with app.app_context(), transaction():
        db.session.execute(update(Client).where(Client.id == child_id).values(city="Nantes"))
    listed = _page(client, master.headers)[child_id]

    assert listed["city"] == "Nantes"
    assert listed == _read(client, master.headers, child_id)


def test_an_unchanged_sub_client_is_read_without_reading_its_row(app, client, master, monkeypatch):
    child_id = create_sub_client(client, master.headers, name="Kept")["client_id"]
    first = client.get(f"/v1/sub_client/{child_id}", headers=master.headers).get_data()
    reads = _calls_to(monkeypatch, "find_sub_client_row")

    assert client.get(f"/v1/sub_client/{child_id}", headers=master.headers).get_data() == first
    assert reads == []
    assert client.put(f"/v1/sub_client/{child_id}", json={"city": "Lille"}, headers=master.headers).status_code == 200
    assert _read(client, master.headers, child_id)["city"] == "Lille"
    assert len(reads) == 1


def test_an_unchanged_page_is_answered_without_reading_its_rows(client, master, monkeypatch):
    create_sub_client(client, master.headers, name="Kept")
    first = client.get("/v1/sub_client", headers=master.headers).get_data()
    reads = _calls_to(monkeypatch, "list_sub_clients")

    assert client.get("/v1/sub_client", headers=master.headers).get_data() == first
    assert reads == []
    create_sub_client(client, master.headers, name="Added")
    assert len(client.get("/v1/sub_client", headers=master.headers).get_json()["data"]) == 2
    assert len(reads) == 1


def test_an_answer_kept_by_row_versions_is_built_again_after_their_time(client, master, monkeypatch):
    """A row version is unique within one database's history only (`app.dialect.ROW_VERSION_TTL`)."""
    import time

    from app.dialect import ROW_VERSION_TTL
    from app.tenancy import routes

    create_sub_client(client, master.headers, name="Aged")
    first = client.get("/v1/sub_client", headers=master.headers).get_data()
    reads = _calls_to(monkeypatch, "list_sub_clients")
    monkeypatch.setattr(routes._PAGE_ANSWERS, "_clock", lambda: time.monotonic() + ROW_VERSION_TTL + 1)

    assert client.get("/v1/sub_client", headers=master.headers).get_data() == first
    assert len(reads) == 1
