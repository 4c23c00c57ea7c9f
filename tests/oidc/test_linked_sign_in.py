"""Sign in with a linked account (Steam by OpenID 2.0, Discord and Twitch by OAuth) on the hosted
login, over HTTP against the fake platforms: the tenant's switch, sign-up only with a verified e-mail
address, no takeover of another user's account, the state bound to the browser, the attempt limits,
the passkey policy, and the same consent, session and back-channel logout as every sign-in."""

from __future__ import annotations

import base64
import html
import json
import re
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import select

from app.db import transaction
from app.extensions import db
from app.passkeys.settings import PasskeySettings
from app.settings import current
from app.social import sign_in as social_sign_in
from app.social.models import SocialLink
from app.tenancy import service as tenancy_service
from app.users import service as users_service
from app.users.models import User
from tests.support.config import change_settings, set_settings
from tests.support.environment import USING_POSTGRES
from tests.support.linked import link_account, links_removed_afterwards, new_account, platform_settings, turn_on
from tests.support.oidc import (
    add_sub_client,
    authorize_query,
    exchange,
    form_fields,
    latest_code,
    make_tenant,
    path_of,
    query_of,
    sign_in,
)
from tests.support.passkeys import SoftAuthenticator
from tests.support.servers import LogoutReceiver
from tests.support.social_fakes import FakeChat, FakeGameStore, FakeStreaming, Platforms

LINKED = "urn:tessera:acr:linked-account"


@pytest.fixture
def fakes(app, monkeypatch):
    """The three fake platforms, and the application configured to use them."""
    with (
        links_removed_afterwards(app),
        FakeGameStore() as game_store,
        FakeChat() as chat,
        FakeStreaming() as streaming,
    ):
        platforms = Platforms(game_store, chat, streaming)
        change_settings(monkeypatch, app, **platform_settings(platforms))
        yield platforms


@pytest.fixture
def http(app):
    return app.test_client()


def login_page(http, tenant, **params) -> str:
    response = http.get(authorize_query(tenant, **params))
    assert response.status_code == 302 and "/v1/openidc/login" in response.headers["Location"], response.headers
    page = http.get(path_of(response.headers["Location"]))
    assert page.status_code == 200
    return page.get_data(as_text=True)


def button(page: str, platform: str) -> str | None:
    found = re.search(rf'id="sign-in-{platform}" href="([^"]+)"', page)
    return html.unescape(found.group(1)) if found else None


def leave_for_platform(http, page: str, platform: str) -> str:
    """Press "Sign in with ..." on the login page and let the fake platform answer: the path of our
    callback the platform sends the browser back to."""
    href = button(page, platform)
    assert href, f"no {platform} button on the login page"
    response = http.get(href)
    assert response.status_code == 303, response.get_data(as_text=True)
    answer = httpx.get(response.headers["Location"])
    assert answer.status_code == 302, answer.text
    return path_of(answer.headers["Location"])


def follow_to_client(http, response) -> dict[str, str]:
    """From the answer to a sign-in step, through the consent page (allowing), to the client."""
    assert response.status_code in (302, 303), response.get_data(as_text=True)
    location = response.headers["Location"]
    if "/v1/openidc/consent" in location:
        page = http.get(path_of(location))
        response = http.post(
            "/v1/openidc/consent", data={**form_fields(page.get_data(as_text=True)), "decision": "allow"}
        )
        location = response.headers["Location"]
    return query_of(location)


def id_token_of(http, tenant, code: str) -> dict:
    response = exchange(http, tenant, code)
    assert response.status_code == 200, response.get_data(as_text=True)
    payload = response.get_json()["id_token"].split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def links_of(app, user_id: int) -> list[tuple[str, str]]:
    with app.app_context():
        rows = db.session.execute(
            select(SocialLink.platform, SocialLink.account_id).where(SocialLink.user_id == user_id)
        ).all()
        db.session.rollback()
    return [tuple(row) for row in rows]


def users_with(app, root_id: int, email: str) -> list[int]:
    with app.app_context():
        ids = list(
            db.session.execute(select(User.id).where(User.root_client_id == root_id, User.email_address == email))
            .scalars()
            .all()
        )
        db.session.rollback()
    return ids


@pytest.mark.parametrize("platform", ["platform_a", "platform_b", "platform_c"])
def test_a_linked_account_signs_its_user_in(app, http, tenant, fakes, platform):
    turn_on(app, tenant, platform)
    account_id = new_account(fakes, platform)
    link_account(app, tenant.user_id, tenant.client_id, platform, account_id)
    page = login_page(http, tenant)
    assert button(page, platform) and "Sign in with " + social_sign_in.PLATFORM_NAMES[platform] in page
    query = follow_to_client(http, http.get(leave_for_platform(http, page, platform)))
    identity = id_token_of(http, tenant, query["code"])
    assert identity["sub"] == str(tenant.user_id)
    assert identity["amr"] == ["fed"] and identity["acr"] == LINKED


def test_the_buttons_follow_the_master_client_and_are_off_by_default(app, http, tenant, fakes):
    page = login_page(http, tenant)
    assert 'id="linked-sign-in"' not in page
    handle = form_fields(page)["request"]
    refused = http.get("/v1/openidc/login/linked/platform_b", query_string={"request": handle})
    assert refused.status_code == 404 and "does not offer" in refused.get_data(as_text=True)

    turn_on(app, tenant, "platform_b", "platform_c")
    sub_id, sub_secret = add_sub_client(http, tenant, redirect_uris=[tenant.redirect_uri])
    sub = type(tenant)(sub_id, sub_secret, tenant.api_token, tenant.redirect_uri, tenant.user_id, tenant.email, "")
    page = login_page(http, sub)
    assert button(page, "platform_b") and button(page, "platform_c") and not button(page, "platform_a")
    refused = http.get("/v1/openidc/login/linked/platform_a", query_string={"request": form_fields(page)["request"]})
    assert refused.status_code == 404


def test_a_first_sign_in_creates_an_account_only_with_a_verified_address_and_sign_up_allowed(app, http, tenant, fakes):
    turn_on(app, tenant, "platform_b", sign_up=True)
    account_id = new_account(fakes, "platform_b", verified=True)
    email = fakes.chat.users[account_id].email
    query = follow_to_client(http, http.get(leave_for_platform(http, login_page(http, tenant), "platform_b")))
    identity = id_token_of(http, tenant, query["code"])
    [user_id] = users_with(app, tenant.client_id, email)
    assert identity["sub"] == str(user_id) and identity["amr"] == ["fed"]
    assert links_of(app, user_id) == [("platform_b", account_id)]

    # The next sign-in finds the link: the same account, no second user.
    fresh = app.test_client()
    query = follow_to_client(fresh, fresh.get(leave_for_platform(fresh, login_page(fresh, tenant), "platform_b")))
    assert id_token_of(fresh, tenant, query["code"])["sub"] == str(user_id)
    assert users_with(app, tenant.client_id, email) == [user_id]


def test_sign_up_is_refused_when_the_tenant_does_not_allow_it(app, http, tenant, fakes):
    turn_on(app, tenant, "platform_b")
    account_id = new_account(fakes, "platform_b", verified=True)
    answer = http.get(leave_for_platform(http, login_page(http, tenant), "platform_b"))
    assert answer.status_code == 403
    assert "does not create accounts this way" in answer.get_data(as_text=True)
    assert users_with(app, tenant.client_id, fakes.chat.users[account_id].email) == []


@pytest.mark.parametrize(
    ("platform", "options", "refusal"),
    [
        ("platform_b", {"verified": False}, "has not verified your e-mail address"),
        ("platform_b", {"verified": None}, "No account here is linked to this Discord account"),
        ("platform_c", {}, "No account here is linked to this Twitch account"),
        ("platform_a", {}, "No account here is linked to this Steam account"),
    ],
)
def test_an_unlinked_account_without_a_verified_address_never_creates_one(
    app, http, tenant, fakes, platform, options, refusal
):
    turn_on(app, tenant, platform, sign_up=True)
    new_account(fakes, platform, **options)
    answer = http.get(leave_for_platform(http, login_page(http, tenant), platform))
    assert answer.status_code == 403
    text = answer.get_data(as_text=True)
    assert refusal in text and 'id="email-form"' in text  # the e-mail code is still offered
    with app.app_context():
        assert db.session.execute(select(User.id).where(User.root_client_id == tenant.client_id)).all() == [
            (tenant.user_id,)
        ]
        db.session.rollback()


def test_the_address_of_an_existing_user_links_only_after_they_sign_in_by_code(app, http, tenant, fakes):
    turn_on(app, tenant, "platform_b", sign_up=True)
    account_id = new_account(fakes, "platform_b", verified=True)
    fakes.chat.users[account_id].email = tenant.email.upper()  # the same address, as the platform spells it

    refused = http.get(leave_for_platform(http, login_page(http, tenant), "platform_b"))
    text = refused.get_data(as_text=True)
    assert refused.status_code == 403 and "already exists" in text
    assert links_of(app, tenant.user_id) == []  # no takeover: nothing linked, nobody signed in
    assert "tessera_sso" not in (refused.headers.get("Set-Cookie") or "")

    # Another browser that only holds the platform account gets no further.
    stranger = app.test_client()
    again = stranger.get(leave_for_platform(stranger, login_page(stranger, tenant), "platform_b"))
    assert again.status_code == 403 and links_of(app, tenant.user_id) == []

    # The owner signs in by e-mail code on the page that refused: then the account is linked.
    page = http.post("/v1/openidc/login", data={**form_fields(text), "email": tenant.email})
    response = http.post(
        "/v1/openidc/login/code",
        data={**form_fields(page.get_data(as_text=True)), "code": latest_code(http, tenant.email)},
    )
    assert id_token_of(http, tenant, follow_to_client(http, response)["code"])["amr"] == ["otp"]
    assert links_of(app, tenant.user_id) == [("platform_b", account_id)]

    fresh = app.test_client()
    query = follow_to_client(fresh, fresh.get(leave_for_platform(fresh, login_page(fresh, tenant), "platform_b")))
    assert id_token_of(fresh, tenant, query["code"])["sub"] == str(tenant.user_id)


def test_a_link_signs_in_only_within_its_tree_and_never_a_disabled_user(app, http, tenant, fakes):
    other = make_tenant(app, http, name="Other University")
    turn_on(app, other, "platform_c", sign_up=True)
    turn_on(app, tenant, "platform_c")
    account_id = new_account(fakes, "platform_c")
    link_account(app, tenant.user_id, tenant.client_id, "platform_c", account_id)
    elsewhere = http.get(leave_for_platform(http, login_page(http, other), "platform_c"))
    assert elsewhere.status_code == 403 and "No account here is linked" in elsewhere.get_data(as_text=True)

    with app.app_context(), transaction():
        users_service.disable_user(db.session.get(User, tenant.user_id))
    disabled = http.get(leave_for_platform(http, login_page(http, tenant), "platform_c"))
    assert disabled.status_code == 403 and "cannot sign you in here" in disabled.get_data(as_text=True)
    assert "tessera_sso" not in (disabled.headers.get("Set-Cookie") or "")


def test_the_state_is_bound_to_the_browser_and_used_once(app, http, tenant, fakes):
    turn_on(app, tenant, "platform_c")
    account_id = new_account(fakes, "platform_c")
    link_account(app, tenant.user_id, tenant.client_id, "platform_c", account_id)
    callback = leave_for_platform(http, login_page(http, tenant), "platform_c")

    # The victim's browser is sent the attacker's return: refused, and nobody is signed in there.
    victim = app.test_client()
    login_page(victim, tenant)
    forced = victim.get(callback)
    assert forced.status_code == 400 and "invalid_state" in forced.get_data(as_text=True)
    assert "tessera_sso" not in (forced.headers.get("Set-Cookie") or "")

    tampered = urlsplit(callback)
    other_state = http.get(tampered.path + "?" + re.sub(r"state=[^&]+", "state=forged", tampered.query))
    assert other_state.status_code == 400
    wrong_platform = http.get(callback.replace("/platform_c/", "/platform_b/"))
    assert wrong_platform.status_code == 400

    first = http.get(callback)
    assert first.status_code in (302, 303)
    replay = http.get(callback)
    assert replay.status_code == 400 and "invalid_state" in replay.get_data(as_text=True)


def test_a_declined_or_forged_answer_is_refused(app, http, tenant, fakes):
    turn_on(app, tenant, "platform_a", "platform_b")
    fakes.chat.authorize_as = None  # the user declines at the platform
    declined = http.get(leave_for_platform(http, login_page(http, tenant), "platform_b"))
    assert declined.status_code == 400 and "You did not sign in at Discord" in declined.get_data(as_text=True)

    account_id = new_account(fakes, "platform_a")
    link_account(app, tenant.user_id, tenant.client_id, "platform_a", account_id)
    callback = leave_for_platform(http, login_page(http, tenant), "platform_a")
    forged = re.sub(r"openid\.claimed_id=[^&]+", "openid.claimed_id=" + "x" * 5, callback)
    answer = http.get(forged)
    assert answer.status_code == 400 and "Steam did not confirm your account" in answer.get_data(as_text=True)


def test_linked_sign_ins_count_against_the_attempts_of_the_e_mail_code(app, http, tenant, fakes):
    turn_on(app, tenant, "platform_b")
    fakes.chat.authorize_as = None
    page = login_page(http, tenant)
    statuses = []
    for _ in range(6):
        answer = http.get(leave_for_platform(http, page, "platform_b"))
        statuses.append(answer.status_code)
        page = answer.get_data(as_text=True)
    assert statuses == [400] * 5 + [429]
    assert "Too many sign-in attempts" in page

    # The attempts are the request's: no e-mail code is sent after them either.
    refused = http.post("/v1/openidc/login", data={**form_fields(page), "email": tenant.email})
    assert refused.status_code == 429


def test_the_network_limit_of_the_sign_in_pages_applies(app, http, tenant, fakes, monkeypatch):
    turn_on(app, tenant, "platform_b")
    account_id = new_account(fakes, "platform_b")
    link_account(app, tenant.user_id, tenant.client_id, "platform_b", account_id)
    callback = leave_for_platform(http, login_page(http, tenant), "platform_b")
    change_settings(monkeypatch, app, OIDC_LOGIN_RATE_LIMIT="1 per minute")
    assert http.get(callback).status_code == 303
    limited = http.get(callback)
    assert limited.status_code == 429 and limited.headers.get("Retry-After")


def test_a_passkey_policy_still_asks_for_the_passkey(app, http, tenant, fakes):
    turn_on(app, tenant, "platform_b")
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, "passkey_second_factor")
    account_id = new_account(fakes, "platform_b")
    link_account(app, tenant.user_id, tenant.client_id, "platform_b", account_id)
    answer = http.get(leave_for_platform(http, login_page(http, tenant), "platform_b"))
    assert answer.status_code == 303 and "/v1/openidc/login/passkey" in answer.headers["Location"]
    step = http.get(path_of(answer.headers["Location"]))
    assert "requires a passkey" in step.get_data(as_text=True)  # this user has none: refused, not let through


def test_after_a_linked_sign_in_the_passkey_step_makes_it_multi_factor(app, http, tenant, fakes):
    with app.app_context():
        settings = current(PasskeySettings)
        authenticator = SoftAuthenticator(origin=settings.origins.split()[0], rp_id=settings.rp_id)
    sign_in(http, tenant)
    page = http.get("/v1/openidc/account").get_data(as_text=True)
    options = json.loads(html.unescape(re.search(r'data-passkey-create="([^"]*)"', page).group(1)))
    added = http.post(
        "/v1/openidc/account/passkeys",
        data={
            "csrf_token": form_fields(page)["csrf_token"],
            "credential": authenticator.create(options),
            "name": "Key",
        },
    )
    assert "Your passkey was added." in added.get_data(as_text=True)
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, "passkey_second_factor")
    turn_on(app, tenant, "platform_b")
    account_id = new_account(fakes, "platform_b")
    link_account(app, tenant.user_id, tenant.client_id, "platform_b", account_id)

    answer = http.get(leave_for_platform(http, login_page(http, tenant, prompt="login"), "platform_b"))
    assert answer.status_code == 303 and "/v1/openidc/login/passkey" in answer.headers["Location"]
    step = http.get(path_of(answer.headers["Location"])).get_data(as_text=True)
    options = json.loads(html.unescape(re.search(r'data-passkey-get="([^"]*)"', step).group(1)))
    fields = {name: form_fields(step)[name] for name in ("csrf_token", "request")}
    response = http.post("/v1/openidc/login/passkey", data={**fields, "credential": authenticator.get(options)})
    identity = id_token_of(http, tenant, follow_to_client(http, response)["code"])
    assert identity["amr"] == ["fed", "hwk", "user", "mfa"] and identity["acr"] == "urn:tessera:acr:mfa"


@pytest.fixture
def receiver(app, real_worker):
    receiver = LogoutReceiver()
    set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS=receiver.host)
    if USING_POSTGRES:
        real_worker.stop()
        real_worker.start(extra_env={"OIDC_OUTBOUND_ALLOW_HOSTS": receiver.host})
    yield receiver
    set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS="")
    receiver.server.shutdown()
    if USING_POSTGRES:
        real_worker.stop()
        real_worker.start()


def test_consent_session_and_back_channel_logout_are_those_of_every_sign_in(app, http, tenant, fakes, receiver):
    response = http.put(
        f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers, json={"backchannel_logout_uri": receiver.url}
    )
    assert response.status_code == 200
    turn_on(app, tenant, "platform_b")
    account_id = new_account(fakes, "platform_b")
    link_account(app, tenant.user_id, tenant.client_id, "platform_b", account_id)

    signed_in = http.get(leave_for_platform(http, login_page(http, tenant), "platform_b"))
    assert "/v1/openidc/consent" in signed_in.headers["Location"]  # first use of the client: consent
    query = follow_to_client(http, signed_in)
    id_token = exchange(http, tenant, query["code"]).get_json()["id_token"]
    again = follow_to_client(http, http.get(authorize_query(tenant, prompt="none")))
    identity = id_token_of(http, tenant, again["code"])
    assert identity["amr"] == ["fed"]  # single sign-on from the session, consent remembered
    sid = identity["sid"]

    logout = http.get("/v1/openidc/logout", query_string={"id_token_hint": id_token})
    assert logout.status_code in (200, 303)
    [token] = receiver.wait_for(1)
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sid"] == sid and claims["sub"] == str(tenant.user_id)
    after = http.get(authorize_query(tenant, prompt="none"))
    assert query_of(after.headers["Location"])["error"] == "login_required"


def test_the_operator_command_sets_the_platforms_on_the_master_client(app, http, tenant):
    runner = app.test_cli_runner()
    result = runner.invoke(
        args=["clients", "set-linked-sign-in", str(tenant.client_id), "--platform", "platform_b", "--sign-up"]
    )
    assert result.exit_code == 0, result.output
    assert "platform_b; sign-up allowed" in result.output
    sub_id, _ = add_sub_client(http, tenant, redirect_uris=[tenant.redirect_uri])
    refused = runner.invoke(args=["clients", "set-linked-sign-in", str(sub_id), "--platform", "platform_b"])
    assert refused.exit_code == 1 and "master client" in refused.output
    unknown = runner.invoke(args=["clients", "set-linked-sign-in", str(tenant.client_id), "--platform", "myspace"])
    assert unknown.exit_code == 2
    off = runner.invoke(args=["clients", "set-linked-sign-in", str(tenant.client_id)])
    assert off.exit_code == 0 and "none; sign-up not allowed" in off.output
