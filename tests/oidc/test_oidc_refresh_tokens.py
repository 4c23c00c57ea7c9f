"""Refresh tokens through the token endpoint: offline_access, rotation, reuse, lifetimes, revocation,
introspection, disabled clients, and concurrent use (exactly one wins)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import requests
from sqlalchemy import update

from app.db import transaction, utcnow
from app.extensions import db
from app.oidc.models import RefreshToken
from app.tenancy.models import Client
from tests.support.config import set_settings
from tests.support.oidc import (
    authorize_query,
    exchange,
    form_fields,
    latest_code,
    make_tenant,
    path_of,
    sign_in,
)


def _set_client(app, client_id: int, **values) -> None:
    with app.app_context(), transaction():
        client = db.session.get(Client, client_id)
        for name, value in values.items():
            setattr(client, name, value)


def _tokens(client, tenant, scope="openid profile offline_access") -> dict:
    code = sign_in(client, tenant, scope=scope)["code"]
    response = exchange(client, tenant, code)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def _refresh(http, tenant, refresh_token: str, **extra):
    body = {
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        "client_id": str(tenant.client_id),
        "client_secret": tenant.client_secret,
        **extra,
    }
    return http.post("/v1/openidc/token", data=body)


def _userinfo(http, access_token: str):
    return http.get("/v1/openidc/user", headers={"Authorization": f"Bearer {access_token}"})


def _introspect(http, tenant, token: str) -> dict:
    response = http.post(
        "/v1/openidc/introspect", data={"token": token}, auth=(str(tenant.client_id), tenant.client_secret)
    )
    assert response.status_code == 200
    return response.get_json()


def test_no_refresh_token_without_offline_access(client, tenant):
    assert "refresh_token" not in _tokens(client, tenant, scope="openid profile")


def test_offline_access_is_listed_on_the_consent_page(client, tenant):
    response = client.get(authorize_query(tenant, scope="openid offline_access"))
    page = client.get(path_of(response.headers["Location"]))
    fields = form_fields(page.get_data(as_text=True))
    page = client.post("/v1/openidc/login", data={**fields, "email": tenant.email})
    fields = form_fields(page.get_data(as_text=True))
    response = client.post("/v1/openidc/login/code", data={**fields, "code": latest_code(client, tenant.email)})
    consent = client.get(path_of(response.headers["Location"]))
    assert consent.status_code == 200
    assert "Stay connected while you are away" in consent.get_data(as_text=True)


def test_refresh_rotates_and_the_new_tokens_work(client, tenant):
    first = _tokens(client, tenant)
    assert first["refresh_token"]
    second = _refresh(client, tenant, first["refresh_token"])
    assert second.status_code == 200, second.get_json()
    body = second.get_json()
    assert body["refresh_token"] != first["refresh_token"]
    assert body["id_token"] and body["scope"] == "openid profile offline_access"
    assert _userinfo(client, body["access_token"]).status_code == 200
    third = _refresh(client, tenant, body["refresh_token"], scope="openid")
    assert third.status_code == 200 and third.get_json()["scope"] == "openid"
    wider = _refresh(client, tenant, third.get_json()["refresh_token"], scope="openid email")
    assert wider.status_code == 400 and wider.get_json()["error"] == "invalid_scope"


def test_reuse_of_a_rotated_token_revokes_the_whole_family(client, tenant):
    first = _tokens(client, tenant)
    second = _refresh(client, tenant, first["refresh_token"]).get_json()
    reuse = _refresh(client, tenant, first["refresh_token"])
    assert reuse.status_code == 400 and reuse.get_json()["error"] == "invalid_grant"
    assert "revoked" in reuse.get_json()["error_description"]
    # Every member and every access token of the family is dead now.
    assert _refresh(client, tenant, second["refresh_token"]).status_code == 400
    assert _userinfo(client, second["access_token"]).status_code == 401
    assert _userinfo(client, first["access_token"]).status_code == 401
    assert _introspect(client, tenant, second["refresh_token"]) == {"active": False}


def test_client_setting_issues_refresh_tokens_without_offline_access(app, client, tenant):
    _set_client(app, tenant.client_id, issue_refresh_tokens=True)
    assert _tokens(client, tenant, scope="openid")["refresh_token"]


def test_idle_and_absolute_lifetimes_per_client(app, client, tenant):
    _set_client(app, tenant.client_id, refresh_token_ttl=3600, refresh_token_idle_ttl=600)
    first = _tokens(client, tenant)
    with app.app_context(), transaction():
        row = db.session.query(RefreshToken).order_by(RefreshToken.id.desc()).first()
        assert (
            abs((row.expires_at.replace(tzinfo=None) - row.created_at.replace(tzinfo=None)).total_seconds() - 600) < 5
        )
        assert (
            abs(
                (row.family_expires_at.replace(tzinfo=None) - row.created_at.replace(tzinfo=None)).total_seconds()
                - 3600
            )
            < 5
        )
        # Idle for longer than the idle lifetime.
        db.session.execute(
            update(RefreshToken).where(RefreshToken.id == row.id).values(expires_at=utcnow() - timedelta(seconds=1))
        )
    expired = _refresh(client, tenant, first["refresh_token"])
    assert expired.status_code == 400 and "expired" in expired.get_json()["error_description"]
    assert _introspect(client, tenant, first["refresh_token"]) == {"active": False}

    again = _tokens(client, tenant)
    with app.app_context(), transaction():
        db.session.execute(
            update(RefreshToken)
            .values(family_expires_at=utcnow() - timedelta(seconds=1))
            .where(RefreshToken.client_id == tenant.client_id)
        )
    assert _refresh(client, tenant, again["refresh_token"]).status_code == 400


def test_revocation_and_introspection_cover_refresh_tokens(client, tenant):
    first = _tokens(client, tenant)
    active = _introspect(client, tenant, first["refresh_token"])
    assert active["active"] is True and active["token_type"] == "refresh_token"
    assert active["sub"] == str(tenant.user_id) and active["client_id"] == str(tenant.client_id)
    revoked = client.post(
        "/v1/openidc/revoke",
        data={"token": first["refresh_token"], "token_type_hint": "refresh_token"},
        auth=(str(tenant.client_id), tenant.client_secret),
    )
    assert revoked.status_code == 200
    assert _introspect(client, tenant, first["refresh_token"]) == {"active": False}
    assert _refresh(client, tenant, first["refresh_token"]).status_code == 400
    assert _userinfo(client, first["access_token"]).status_code == 401


def test_another_client_cannot_use_or_see_the_refresh_token(app, client, tenant):
    other = make_tenant(app, client, name="Other University")
    first = _tokens(client, tenant)
    stolen = _refresh(client, other, first["refresh_token"])
    assert stolen.status_code == 400 and stolen.get_json()["error"] == "invalid_grant"
    assert _introspect(client, other, first["refresh_token"]) == {"active": False}
    assert _refresh(client, tenant, first["refresh_token"]).status_code == 200


def test_disabling_the_client_ends_its_refresh_tokens(app, client, tenant):
    first = _tokens(client, tenant)
    _set_client(app, tenant.client_id, disabled_at=utcnow())
    response = _refresh(client, tenant, first["refresh_token"])
    assert response.status_code == 401 and response.get_json()["error"] == "invalid_client"


def test_a_user_gone_from_the_tree_ends_their_refresh_tokens(app, client, tenant):
    from app.users.models import User

    first = _tokens(client, tenant)
    elsewhere = make_tenant(app, client, name="Elsewhere").client_id
    with app.app_context(), transaction():
        db.session.get(User, tenant.user_id).root_client_id = elsewhere
    response = _refresh(client, tenant, first["refresh_token"])
    assert response.status_code == 400 and response.get_json()["error"] == "invalid_grant"
    assert _introspect(client, tenant, first["refresh_token"]) == {"active": False}


def _race(url: str, tenant, refresh_token: str, count: int = 8) -> list[requests.Response]:
    barrier = threading.Barrier(count)
    results: list[requests.Response] = []
    lock = threading.Lock()

    def attempt() -> None:
        barrier.wait()
        response = requests.post(
            url + "/v1/openidc/token",
            timeout=30,
            data={
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "client_id": str(tenant.client_id),
                "client_secret": tenant.client_secret,
            },
        )
        with lock:
            results.append(response)

    threads = [threading.Thread(target=attempt) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.parametrize("grace", [0, 60])
def test_concurrent_refreshes_with_one_token_exactly_one_wins(app, client, live_server, grace):
    set_settings(live_server.app, OIDC_REFRESH_REUSE_GRACE=grace)
    try:
        tenant = make_tenant(app, client)
        first = _tokens(client, tenant)
        results = _race(live_server.url, tenant, first["refresh_token"])
    finally:
        set_settings(live_server.app, OIDC_REFRESH_REUSE_GRACE=0)
    winners = [response for response in results if response.status_code == 200]
    losers = [response for response in results if response.status_code != 200]
    assert len(winners) == 1, [response.text for response in results]
    assert all(response.status_code == 400 and response.json()["error"] == "invalid_grant" for response in losers)
    winner = winners[0].json()
    follow_up = _refresh(client, tenant, winner["refresh_token"])
    if grace:
        # Within the grace period a losing retry does not punish the winner.
        assert follow_up.status_code == 200
    else:
        # Without it, concurrent use is indistinguishable from theft: the family is revoked.
        assert follow_up.status_code == 400


def test_purge_keeps_rotated_tokens_until_their_family_ends(app, client, tenant):
    from app.oidc.tasks import purge_expired

    first = _tokens(client, tenant)
    second = _refresh(client, tenant, first["refresh_token"]).get_json()
    with app.app_context(), transaction():
        db.session.execute(
            update(RefreshToken)
            .where(RefreshToken.client_id == tenant.client_id)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    purge_expired()
    # Idle-expired but the family lives: the rotated token is still recognised as a reuse.
    reuse = _refresh(client, tenant, first["refresh_token"])
    assert "already used" in reuse.get_json()["error_description"]
    with app.app_context(), transaction():
        db.session.execute(
            update(RefreshToken)
            .where(RefreshToken.client_id == tenant.client_id)
            .values(family_expires_at=utcnow() - timedelta(seconds=1))
        )
    purge_expired()
    with app.app_context():
        remaining = db.session.query(RefreshToken).filter_by(client_id=tenant.client_id).count()
        db.session.rollback()
    assert remaining == 0
    assert _refresh(client, tenant, second["refresh_token"]).status_code == 400
