"""A link is bound to the browser of the user it is for (RFC 6749 §10.12, login CSRF): the link's
`authorization_url` opened by anyone else's browser links nothing, over HTTP and in a real headless
Chromium, against the fake platforms (real HTTP servers on loopback)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import application_served, headless_chromium, page_left
from tests.support.oidc import authorize_query, latest_code_over_http, make_tenant
from tests.support.servers import serve_on_loopback
from tests.support.social import (
    create_user,
    finish_link,
    follow_callback,
    links_of,
    new_numeric_id,
    sign_in_browser,
    start_link,
    visit_platform,
)
from tests.support.social_fakes import Platforms


def test_a_link_opened_in_another_browser_links_nothing(app, client, master, platforms: Platforms) -> None:
    attacker, victim = create_user(client, master), create_user(client, master)
    victims_discord = new_numeric_id()
    platforms.chat.add_user(victims_discord)
    platforms.chat.authorize_as = victims_discord
    sign_in_browser(client, master, attacker)  # the linking user's own browser
    callbacks = [visit_platform(start_link(client, master, attacker, "platform_b")) for _ in range(2)]

    # The victim's browser: not signed in, then signed in as the victim.
    signed_out, victims_browser = app.test_client(), app.test_client()
    sign_in_browser(victims_browser, master, victim)
    for browser, callback in zip((signed_out, victims_browser), callbacks, strict=True):
        refused = finish_link(browser, callback)
        assert refused.status_code == 403 and refused.mimetype == "text/html"
        page = refused.get_data(as_text=True)
        assert "link_browser_refused" in page and "nothing was linked" in page
    assert platforms.chat.calls["oauth2.token"] == 0  # the victim's code was never redeemed
    assert links_of(app, attacker) == [] and links_of(app, victim) == []
    vouched = client.post(f"/v1/user/{attacker}/credentials/social/platform_b", headers=master.headers)
    assert vouched.status_code == 404 and vouched.json["code"] == "social_link_not_found"

    # The attempt is spent: not even the linking user's browser can finish it afterwards.
    replayed = finish_link(client, callbacks[0])
    assert replayed.status_code == 400 and "invalid_link_state" in replayed.get_data(as_text=True)

    # The linking user's own browser links their own account.
    own_discord = new_numeric_id()
    platforms.chat.add_user(own_discord)
    platforms.chat.authorize_as = own_discord
    outcome = follow_callback(client, visit_platform(start_link(client, master, attacker, "platform_b")))
    assert outcome["status"] == "linked"
    assert [link.account_id for link in links_of(app, attacker)] == [own_discord]


def test_the_callback_page_is_behind_the_sign_in_cookie_s_path(app, client, master, platforms: Platforms) -> None:
    """The platform's callback itself never links: it only sends the browser on, with the same query,
    to the page that sees the sign-in cookie."""
    user = create_user(client, master)
    sign_in_browser(client, master, user)
    platforms.chat.add_user(account := new_numeric_id())
    platforms.chat.authorize_as = account
    callback = visit_platform(start_link(client, master, user, "platform_b"))
    hop = client.get(callback)
    assert hop.status_code == 303
    target = urlsplit(hop.headers["Location"])
    assert target.path == "/v1/openidc/social/platform_b/link"
    assert dict(parse_qsl(target.query)) == dict(parse_qsl(urlsplit(callback).query))
    assert links_of(app, user) == []


@pytest.fixture
def pages():
    """Where the relying party's browser lands: its sign-in callback and the link's `return_to`."""

    def answer(_method: str, path: str, _body: bytes) -> tuple[str, bytes]:
        return "text/html", f"<!doctype html><title>Relying party</title><p id='rp'>{path}</p>".encode()

    server = serve_on_loopback(answer, name="rp-pages")
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def _wait_for(driver, element_id: str):
    return WebDriverWait(driver, 15).until(expected_conditions.presence_of_element_located((By.ID, element_id)))


def _click_and_wait_for_next_page(driver, element_id: str) -> None:
    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, element_id).click()
    WebDriverWait(driver, 15).until(page_left(page))


def _start_link(base_url: str, tenant, return_to: str) -> str:
    response = requests.post(
        f"{base_url}/v1/user/{tenant.user_id}/social/platform_b/link",
        json={"return_to": return_to},
        headers=tenant.headers,
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()["authorization_url"]


@pytest.mark.browser
def test_in_chromium_only_the_user_s_signed_in_browser_links(app, client, real_worker, platforms, pages) -> None:
    tenant = make_tenant(app, client, redirect_uris=[pages + "/signed-in"], name="Linking University")
    return_to = pages + "/after-link"
    driver = headless_chromium()
    try:
        with application_served(app) as base_url:
            # Someone else's browser (no sign-in here) opens the link the tenant started for its user.
            platforms.chat.add_user(victims_discord := new_numeric_id())
            platforms.chat.authorize_as = victims_discord
            driver.get(_start_link(base_url, tenant, return_to))
            message = _wait_for(driver, "message").text
            assert "nothing was linked" in message and driver.current_url.startswith(base_url + "/v1/openidc/")
            assert "link_browser_refused" in driver.page_source
            assert links_of(app, tenant.user_id) == []

            # The user signs in to the application in this browser, then links their own account.
            driver.get(base_url + authorize_query(tenant, scope="openid"))
            _wait_for(driver, "email").send_keys(tenant.email)
            _click_and_wait_for_next_page(driver, "send-code")
            _wait_for(driver, "code").send_keys(latest_code_over_http(requests.Session(), base_url, tenant.email))
            _click_and_wait_for_next_page(driver, "verify-code")
            _click_and_wait_for_next_page(driver, "allow")
            WebDriverWait(driver, 15).until(lambda current: current.current_url.startswith(pages + "/signed-in"))

            platforms.chat.add_user(own_discord := new_numeric_id())
            platforms.chat.authorize_as = own_discord
            driver.get(_start_link(base_url, tenant, return_to))
            WebDriverWait(driver, 15).until(lambda current: current.current_url.startswith(return_to))
            assert dict(parse_qsl(urlsplit(driver.current_url).query)) == {"status": "linked", "platform": "platform_b"}
            assert [link.account_id for link in links_of(app, tenant.user_id)] == [own_discord]
    finally:
        driver.quit()
