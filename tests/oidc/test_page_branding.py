"""One look for every hosted page, branded per client: logo, accent colour, privacy link and a way back."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from app.db import transaction
from app.extensions import db
from app.tenancy.models import Client
from app.tenancy.service import privacy_reference
from tests.support.oidc import authorize_query, form_fields, latest_code, make_tenant, path_of

LOGO = "https://brand.example/logo.png"


def _brand(app, tenant, **values) -> None:
    with app.app_context(), transaction():
        client = db.session.get(Client, tenant.client_id)
        for name, value in values.items():
            setattr(client, name, value)


def _login_page(http, tenant):
    response = http.get(authorize_query(tenant))
    return http.get(path_of(response.headers["Location"]))


def _consent_page(http, tenant):
    page = _login_page(http, tenant)
    page = http.post("/v1/openidc/login", data={**form_fields(page.get_data(as_text=True)), "email": tenant.email})
    fields = form_fields(page.get_data(as_text=True))
    answer = http.post("/v1/openidc/login/code", data={**fields, "code": latest_code(http, tenant.email)})
    page = http.get(path_of(answer.headers["Location"]))
    assert page.status_code == 200 and "consent-form" in page.get_data(as_text=True)
    return page


def test_sub_client_branding_is_validated_and_answered(client, master):
    made = client.post(
        "/v1/sub_client", json={"name": "Shop", "logo_url": LOGO, "accent_color": "#AA3300"}, headers=master.headers
    )
    assert made.status_code == 201, made.get_json()
    data = made.get_json()["data"]
    assert (data["logo_url"], data["accent_color"]) == (LOGO, "#aa3300")
    bad = client.post(
        "/v1/sub_client",
        json={"name": "Shop", "logo_url": "http://brand.example/logo.png", "accent_color": "red"},
        headers=master.headers,
    )
    assert bad.status_code == 422
    assert set(bad.get_json()["errors"]) == {"logo_url", "accent_color"}
    changes = {"accent_color": "#112233", "logo_url": None}
    changed = client.put(f"/v1/sub_client/{data['client_id']}", json=changes, headers=master.headers)
    assert changed.get_json()["data"]["accent_color"] == "#112233"
    assert changed.get_json()["data"]["logo_url"] == ""


def test_create_master_takes_branding(app):
    from app.tenancy.cli import create_master

    runner = app.test_cli_runner()
    result = runner.invoke(
        create_master, ["--name", "Branded", "--logo-url", LOGO, "--accent-color", "#0A7F3F", "--json"]
    )
    assert result.exit_code == 0, result.output
    with app.app_context():
        row = db.session.get(Client, json.loads(result.output)["client_id"])
        assert (row.logo_url, row.accent_color) == (LOGO, "#0a7f3f")
    bad = runner.invoke(create_master, ["--name", "Branded", "--accent-color", "green"])
    assert bad.exit_code == 2 and "#rrggbb" in bad.output


def test_pages_show_the_logo_and_accent_allowed_by_the_csp(app, client):
    tenant = make_tenant(app, client, name="Branded University")
    _brand(app, tenant, logo_url=LOGO, accent_color="#aa3300")
    page = _login_page(client, tenant)
    html = page.get_data(as_text=True)
    assert f'<img src="{LOGO}" alt="" id="client-logo">' in html
    style = re.search(r"<style>(.*?)</style>", html).group(1)
    assert style == ":root{--accent:#aa3300;--on-accent:#ffffff}"
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    csp = page.headers["Content-Security-Policy"]
    assert f"style-src 'self' 'sha256-{digest}';" in csp
    assert "img-src 'self' https:" in csp and "unsafe-inline" not in csp
    assert "/static/tessera.css" in html


def test_a_light_accent_gets_dark_text(app, client):
    tenant = make_tenant(app, client)
    _brand(app, tenant, accent_color="#ffe066")
    assert "--on-accent:#000000" in _login_page(client, tenant).get_data(as_text=True)


def test_consent_allow_is_primary_and_privacy_is_linked_once(app, client):
    tenant = make_tenant(app, client)
    html = _consent_page(client, tenant).get_data(as_text=True)
    assert html.count("Privacy notice of") == 1
    allow, deny = html.index('id="allow"'), html.index('id="deny"')
    assert allow < deny
    assert re.search(r'<button[^>]*class="primary"[^>]*id="allow"', html)
    assert re.search(r'<button[^>]*class="secondary"[^>]*id="deny"', html)


def test_privacy_page_leads_back_to_the_sign_in(app, client):
    tenant = make_tenant(app, client)
    html = _login_page(client, tenant).get_data(as_text=True)
    href = re.search(r'<a href="([^"]+)" id="privacy-link"', html).group(1).replace("&amp;", "&")
    privacy = client.get(path_of(href)).get_data(as_text=True)
    back = re.search(r'<a href="([^"]+)" id="back-link"', privacy).group(1).replace("&amp;", "&")
    assert back.startswith("/v1/openidc/login?request=")
    assert client.get(back).status_code == 200
    assert 'id="privacy-link"' not in privacy, "the privacy page does not link to itself"


@pytest.mark.parametrize("back", ["https://evil.example/", "//evil.example/x", "/v1/openidc/..//evil", "/admin"])
def test_privacy_page_never_leads_elsewhere(app, client, back):
    tenant = make_tenant(app, client)
    with app.app_context():
        reference = privacy_reference(db.session.get(Client, tenant.client_id))
    page = client.get(f"/privacy/{reference}", query_string={"back": back}).get_data(as_text=True)
    assert 'id="back-link"' not in page and "evil" not in page
    assert 'id="back-hint"' in page
