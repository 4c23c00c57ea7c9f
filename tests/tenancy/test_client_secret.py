"""POST /v1/sub_client/{id}/client_secret and verify_client_secret (used by the token endpoint)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.config import change_settings, setting_of
from tests.support.tenancy import assert_problem, create_sub_client, load_client_row, token_for


def _verify(app, client_id: int, secret: str) -> bool:
    from app.extensions import db
    from app.tenancy import service
    from app.tenancy.models import Client

    with app.app_context():
        result = service.verify_client_secret(db.session.get(Client, client_id), secret)
        db.session.rollback()
        return result


def _rotate(client, headers, client_id: int) -> dict:
    response = client.post(f"/v1/sub_client/{client_id}/client_secret", headers=headers)
    assert response.status_code == 200, response.get_json()
    assert response.headers["Cache-Control"] == "no-store"
    return response.get_json()["data"]


def test_a_new_sub_client_has_no_secret_until_one_is_created(client, app, master):
    sub = create_sub_client(client, master.headers)
    assert load_client_row(app, sub["client_id"])["secret_hash"] is None
    data = _rotate(client, master.headers, sub["client_id"])
    assert data["client_id"] == sub["client_id"] and data["previous_secret_expires_at"] is None
    assert len(data["client_secret"]) >= 43  # 256 bits, base64url
    assert _verify(app, sub["client_id"], data["client_secret"])
    assert not _verify(app, sub["client_id"], data["client_secret"] + "x")
    assert not _verify(app, sub["client_id"], "")
    row = load_client_row(app, sub["client_id"])
    assert data["client_secret"] not in str(row)


def test_rotation_keeps_the_old_secret_for_the_grace_period(client, app, master):
    data = _rotate(client, master.headers, master.client_id)
    expires = datetime.fromisoformat(data["previous_secret_expires_at"].replace("Z", "+00:00"))
    grace = setting_of(app, "CLIENT_SECRET_GRACE_SECONDS")
    assert abs((expires - datetime.now(UTC)).total_seconds() - grace) < 60
    assert _verify(app, master.client_id, data["client_secret"])
    assert _verify(app, master.client_id, master.client_secret)

    from app.db import transaction
    from app.extensions import db
    from app.tenancy.models import Client

    with app.app_context(), transaction():
        db.session.get(Client, master.client_id).previous_secret_expires_at = datetime.now(UTC) - timedelta(seconds=1)
    assert not _verify(app, master.client_id, master.client_secret)
    assert _verify(app, master.client_id, data["client_secret"])


def test_a_second_rotation_retires_the_first_secret(client, app, master):
    first = _rotate(client, master.headers, master.client_id)["client_secret"]
    second = _rotate(client, master.headers, master.client_id)["client_secret"]
    assert _verify(app, master.client_id, first) and _verify(app, master.client_id, second)
    assert not _verify(app, master.client_id, master.client_secret)


def test_zero_grace_retires_the_old_secret_at_once(client, app, master, monkeypatch):
    change_settings(monkeypatch, app, CLIENT_SECRET_GRACE_SECONDS=0)
    data = _rotate(client, master.headers, master.client_id)
    assert data["previous_secret_expires_at"] is None
    assert not _verify(app, master.client_id, master.client_secret)
    assert _verify(app, master.client_id, data["client_secret"])


def test_a_sub_client_may_rotate_secrets_in_its_own_subtree(client, app, master):
    sub = create_sub_client(client, master.headers)
    sibling = create_sub_client(client, master.headers)
    own = {"x-api-token": token_for(client, master.headers, sub["client_id"])}
    assert _verify(app, sub["client_id"], _rotate(client, own, sub["client_id"])["client_secret"])
    before = load_client_row(app, sibling["client_id"])
    assert_problem(client.post(f"/v1/sub_client/{sibling['client_id']}/client_secret", headers=own), 404)
    assert_problem(client.post(f"/v1/sub_client/{master.client_id}/client_secret", headers=own), 404)
    assert load_client_row(app, sibling["client_id"]) == before


def test_a_disabled_client_never_verifies(client, app, master):
    from app.db import transaction
    from app.tenancy import service

    with app.app_context(), transaction():
        service.disable_client(master.client_id)
    assert not _verify(app, master.client_id, master.client_secret)
    assert_problem(client.get("/v1/sub_client", headers=master.headers), 401)
