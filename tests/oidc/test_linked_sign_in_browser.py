"""Sign in with a linked account in a real headless Chromium: the login page's "Sign in with
Steam/Discord/Twitch" button, through each fake platform and back, consent, and the client's
redirect with a code whose id_token says `fed`; and the refusal page of an address that belongs to
another user."""

from __future__ import annotations

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from app.oidc.tokens import b64_json
from tests.support.browser import application_served, headless_chromium, page_left
from tests.support.linked import link_account, links_removed_afterwards, new_account, platform_settings, turn_on
from tests.support.oidc import authorize_query, make_tenant, query_of
from tests.support.social_fakes import FakeChat, FakeGameStore, FakeStreaming, Platforms

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def fakes(app):
    with (
        links_removed_afterwards(app),
        FakeGameStore() as game_store,
        FakeChat() as chat,
        FakeStreaming() as streaming,
    ):
        yield Platforms(game_store, chat, streaming)


@pytest.fixture(scope="module")
def linked_server(app, real_worker, fakes):
    """The application on 127.0.0.1, named http://localhost:<port> (its issuer), its platforms the fakes."""
    with application_served(app, **platform_settings(fakes)) as url:
        yield url


@pytest.fixture
def browser():
    driver = headless_chromium()
    yield driver
    driver.quit()


def _wait_for(driver, element_id: str):
    return WebDriverWait(driver, 15).until(expected_conditions.presence_of_element_located((By.ID, element_id)))


def _click_and_wait_for_next_page(driver, element_id: str) -> None:
    page = driver.find_element(By.TAG_NAME, "html")
    WebDriverWait(driver, 15).until(expected_conditions.element_to_be_clickable((By.ID, element_id))).click()
    WebDriverWait(driver, 15).until(page_left(page))


def _id_token(base_url: str, tenant, redirect_uri: str, code: str) -> dict:
    response = requests.post(
        base_url + "/v1/openidc/token",
        timeout=10,
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
        },
    )
    assert response.status_code == 200, response.text
    return b64_json(response.json()["id_token"].split(".")[1])


@pytest.mark.parametrize(
    ("platform", "name"), [("platform_a", "Steam"), ("platform_b", "Discord"), ("platform_c", "Twitch")]
)
def test_sign_in_through_each_platform_reaches_the_client_with_a_code(
    app, client, linked_server, callback_server, browser, fakes, platform, name
):
    redirect_uri = callback_server.url + "/cb"
    tenant = make_tenant(app, client, redirect_uris=[redirect_uri], name="Linked University")
    turn_on(app, tenant, "platform_a", "platform_b", "platform_c")
    account_id = new_account(fakes, platform)
    link_account(app, tenant.user_id, tenant.client_id, platform, account_id)

    browser.get(linked_server + authorize_query(tenant, state="linked"))
    assert _wait_for(browser, f"sign-in-{platform}").text == f"Sign in with {name}"
    _click_and_wait_for_next_page(browser, f"sign-in-{platform}")
    _click_and_wait_for_next_page(browser, "allow")
    WebDriverWait(browser, 15).until(lambda current: current.current_url.startswith(redirect_uri))
    query = query_of(browser.current_url)
    assert query["state"] == "linked"
    identity = _id_token(linked_server, tenant, redirect_uri, query["code"])
    assert identity["sub"] == str(tenant.user_id)
    assert identity["amr"] == ["fed"] and identity["acr"] == "urn:tessera:acr:linked-account"


def test_an_address_of_another_user_is_refused_on_the_login_page(
    app, client, linked_server, callback_server, browser, fakes
):
    redirect_uri = callback_server.url + "/cb"
    tenant = make_tenant(app, client, redirect_uris=[redirect_uri], name="Linked University")
    turn_on(app, tenant, "platform_b", sign_up=True)
    account_id = new_account(fakes, "platform_b", verified=True)
    fakes.chat.users[account_id].email = tenant.email

    browser.get(linked_server + authorize_query(tenant))
    _click_and_wait_for_next_page(browser, "sign-in-platform_b")
    assert "already exists" in _wait_for(browser, "message").text
    assert _wait_for(browser, "email").is_displayed()  # the way on: the e-mail code
