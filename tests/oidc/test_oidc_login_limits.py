"""Limits of the e-mail code login: attempts per authorization request across resends, codes per
request and per address, all counted in the database so every process enforces them together."""

from __future__ import annotations

import os
import secrets

import pytest
import requests

from tests.support import environment
from tests.support.bench import free_port
from tests.support.config import set_settings, setting_of
from tests.support.oidc import authorize_query, form_fields, latest_code, make_tenant, path_of
from tests.support.servers import web_server


def _start_login(http, tenant):
    response = http.get(authorize_query(tenant))
    assert response.status_code == 302 and "/v1/openidc/login" in response.headers["Location"]
    page = http.get(path_of(response.headers["Location"]))
    assert page.status_code == 200
    return page.get_data(as_text=True)


def _submit_email(http, html: str, email: str):
    return http.post("/v1/openidc/login", data={**form_fields(html), "email": email})


def _submit_code(http, html: str, code: str) -> str:
    response = http.post("/v1/openidc/login/code", data={**form_fields(html), "code": code})
    return response.get_data(as_text=True)


def _mails(http, email: str) -> int:
    return len(http.get("/dev/outbox", query_string={"to": email}).get_json()["data"])


def _sign_in_from(app, address: str):
    """A new browser's sign-in (its own tenant and authorization request) from `address`."""
    from flask.testing import FlaskClient

    browser = FlaskClient(app, use_cookies=True)
    tenant = make_tenant(app, browser)
    page = _start_login(browser, tenant)
    return browser.post(
        "/v1/openidc/login", data={**form_fields(page), "email": tenant.email}, environ_base={"REMOTE_ADDR": address}
    )


def _wrong(code: str) -> str:
    return f"{(int(code) + 1) % 1_000_000:06d}"


def test_a_new_code_keeps_the_attempts_of_the_request(app, client):
    tenant = make_tenant(app, client)
    first = _submit_email(client, _start_login(client, tenant), tenant.email).get_data(as_text=True)
    code = latest_code(client, tenant.email)
    for left in (4, 3, 2):
        assert f"{left} attempts left" in _submit_code(client, first, _wrong(code))
    resent = _submit_email(client, first, tenant.email)
    assert resent.status_code == 200
    page = resent.get_data(as_text=True)
    fresh = latest_code(client, tenant.email)
    assert "1 attempt left" in _submit_code(client, page, _wrong(fresh))
    assert "Too many wrong codes" in _submit_code(client, page, _wrong(fresh))
    # The right code of the latest mail no longer signs this request in.
    finished = client.post("/v1/openidc/login/code", data={**form_fields(page), "code": fresh})
    assert finished.status_code == 200 and "Too many wrong codes" in finished.get_data(as_text=True)


def test_codes_per_sign_in_are_capped(app, client):
    tenant = make_tenant(app, client)
    page = _start_login(client, tenant)
    for _ in range(3):
        response = _submit_email(client, page, tenant.email)
        assert response.status_code == 200
        page = response.get_data(as_text=True)
    refused = _submit_email(client, page, tenant.email)
    assert refused.status_code == 429 and refused.mimetype == "text/html"
    assert "too many codes for this sign-in" in refused.get_data(as_text=True)
    assert _mails(client, tenant.email) == 3
    # The last code sent still works.
    response = client.post(
        "/v1/openidc/login/code", data={**form_fields(page), "code": latest_code(client, tenant.email)}
    )
    assert response.status_code == 303


def test_codes_per_address_are_capped_whether_or_not_it_has_an_account(app, client):
    tenant = make_tenant(app, client)
    stranger = "nobody-" + tenant.email
    for address in (tenant.email, stranger):
        statuses = [_submit_email(client, _start_login(client, tenant), address).status_code for _ in range(5)]
        assert statuses == [200] * 5
        refused = _submit_email(client, _start_login(client, tenant), address)
        assert refused.status_code == 429
        assert f"Too many codes were sent to {address} recently" in refused.get_data(as_text=True)
    assert _mails(client, tenant.email) == 5 and _mails(client, stranger) == 0
    # Other addresses are not affected.
    other = make_tenant(app, client)
    assert _submit_email(client, _start_login(client, other), other.email).status_code == 200


@pytest.fixture
def second_process(app):
    """The application in a separate server process on the same database (no shared memory),
    behind one trusted proxy, with a sign-in limit of 4 per minute per network address."""
    env = {
        **os.environ,
        "OIDC_ISSUER": setting_of(app, "OIDC_ISSUER"),
        "BASE_URL": app.config["BASE_URL"],
        "OIDC_LOGIN_RATE_LIMIT": "4 per minute",
        "TRUSTED_PROXIES": "1",
    }
    if environment.USING_POSTGRES:
        env["DATABASE_URL"] = os.environ["DIRECT_DATABASE_URL"]
        env["REDIS_URL"] = os.environ["DIRECT_REDIS_URL"]
    with web_server(free_port(), env, ["--workers", "1"], log_name="login-limits-server.log") as url:
        yield url


def _send_over_http(url: str, tenant, network: str | None = None) -> requests.Response:
    headers = {"X-Forwarded-For": network or f"10.9.{secrets.randbelow(250)}.{secrets.randbelow(250) + 1}"}
    browser = requests.Session()
    response = browser.get(url + authorize_query(tenant), allow_redirects=False, timeout=10, headers=headers)
    page = browser.get(url + path_of(response.headers["Location"]), timeout=10, headers=headers)
    return browser.post(
        url + "/v1/openidc/login", data={**form_fields(page.text), "email": tenant.email}, timeout=10, headers=headers
    )


def test_the_address_limit_holds_across_processes(app, client, second_process):
    tenant = make_tenant(app, client)
    for _ in range(3):
        assert _submit_email(client, _start_login(client, tenant), tenant.email).status_code == 200
    assert [_send_over_http(second_process, tenant).status_code for _ in range(2)] == [200, 200]
    assert _send_over_http(second_process, tenant).status_code == 429
    assert _submit_email(client, _start_login(client, tenant), tenant.email).status_code == 429
    assert _mails(client, tenant.email) == 5


@pytest.mark.skipif(
    bool(os.environ.get("REDIS_URL")),
    reason="with Redis the rate limiter's own storage is shared; this tests the embedded default",
)
def test_the_network_limit_holds_across_processes(app, client, second_process):
    """Without Redis the limiter counts in memory; the sign-in limit per network must still be shared."""
    network = f"10.8.{secrets.randbelow(250)}.{secrets.randbelow(250) + 1}"
    set_settings(app, OIDC_LOGIN_RATE_LIMIT="4 per minute")
    for _ in range(2):
        tenant = make_tenant(app, client)
        page = _start_login(client, tenant)
        response = client.post(
            "/v1/openidc/login",
            data={**form_fields(page), "email": tenant.email},
            environ_base={"REMOTE_ADDR": network},
        )
        assert response.status_code == 200
    tenants = [make_tenant(app, client) for _ in range(3)]
    statuses = [_send_over_http(second_process, tenant, network).status_code for tenant in tenants]
    assert statuses == [200, 200, 429]
    limited = _send_over_http(second_process, make_tenant(app, client), network)
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) > 0
    assert "Too many sign-in attempts" in limited.text
    assert _mails(client, tenants[2].email) == 0


def test_the_sign_in_limit_is_per_network_address_across_browsers_and_sign_ins(app, client):
    """One network's sign-ins (each its own browser and authorization request) share the limit; another's don't."""
    limited_network = f"10.7.{secrets.randbelow(250)}.{secrets.randbelow(250) + 1}"
    other_network = f"10.6.{secrets.randbelow(250)}.{secrets.randbelow(250) + 1}"
    set_settings(app, OIDC_LOGIN_RATE_LIMIT="3 per minute")

    statuses = [_sign_in_from(app, limited_network).status_code for _ in range(4)]
    other = _sign_in_from(app, other_network)
    assert statuses == [200, 200, 200, 429]
    assert other.status_code == 200


@pytest.mark.parametrize(
    "neighbours",
    [
        ("2001:db8:{n}:{m}::1", "2001:db8:{n}:{m}:ffff:1:2:3", "2001:db8:{n}:{m}:abcd::9", "2001:db8:{n}:{m}::7"),
        ("10.5.{n}.{m}", "::ffff:10.5.{n}.{m}", "10.5.{n}.{m}", "::ffff:10.5.{n}.{m}"),
    ],
)
def test_the_sign_in_limit_counts_an_ipv6_64_as_one_network(app, client, neighbours):
    """Addresses of one IPv6 /64 (one subscriber) share the limit, as an IPv4 address and its mapped
    IPv6 form do; the next /64 has its own."""
    n, m = secrets.randbelow(250) + 1, secrets.randbelow(250) + 1
    set_settings(app, OIDC_LOGIN_RATE_LIMIT="3 per minute")

    statuses = [_sign_in_from(app, address.format(n=n, m=m)).status_code for address in neighbours]
    assert statuses == [200, 200, 200, 429]
    assert _sign_in_from(app, f"2001:db8:{n}:{m + 1}::1").status_code == 200
