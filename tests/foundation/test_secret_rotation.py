"""The secret-hashing key rotates: tokens and client secrets made under the old key keep working."""

from __future__ import annotations

from tests.support.tenancy import make_master


def test_api_token_and_client_secret_survive_hash_key_rotation(app, client):
    from app.security import verify_secret
    from app.tenancy.models import Client

    old_key = app.config["SECRET_HASH_KEY"]
    tenant = make_master(app, "Rotating organisation")
    assert client.get("/v1/jobs/none", headers=tenant.headers).status_code == 404  # authenticated

    app.config["SECRET_HASH_KEY"] = f"a-new-hash-key-for-the-test,{old_key}"
    try:
        assert client.get("/v1/jobs/none", headers=tenant.headers).status_code == 404
        fresh = make_master(app, "Organisation made after rotation")
        assert client.get("/v1/jobs/none", headers=fresh.headers).status_code == 404
        with app.app_context():
            stored = app.extensions["sqlalchemy"].session.get(Client, tenant.client_id)
            assert verify_secret(tenant.client_secret, stored.secret_hash)
            assert not verify_secret("not-the-secret", stored.secret_hash)
    finally:
        app.config["SECRET_HASH_KEY"] = old_key
    assert client.get("/v1/jobs/none", headers=fresh.headers).status_code == 401
