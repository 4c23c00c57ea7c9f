"""Scheduled tasks of the provider: key rotation and housekeeping, and their beat schedule."""

from __future__ import annotations

from datetime import timedelta

from app.db import as_utc, transaction, utcnow
from app.extensions import celery, db
from app.oidc import keys
from app.oidc.models import KEY_ACTIVE, KEY_RETIRED, AuthorizationCode, SigningKey
from app.oidc.tasks import purge_expired, rotate_keys
from app.security import hash_secret
from tests.support.config import setting_of
from tests.support.oidc import exchange, sign_in


def test_beat_schedule_includes_key_rotation_and_purge(app):
    tasks = {entry["task"] for entry in celery.conf.beat_schedule.values()}
    assert {"oidc.rotate_keys", "oidc.purge_expired"} <= tasks


def test_rotate_keys_task_rotates_due_keys_and_drops_dead_ones(app):
    with app.app_context(), transaction():
        keys.ensure_keys()
        row = db.session.query(SigningKey).filter_by(alg="RS256", state=KEY_ACTIVE).one()
        due_kid = row.kid
        row.activated_at = utcnow() - timedelta(seconds=setting_of(app, "OIDC_KEY_ROTATION_INTERVAL") + 60)
        for retired in db.session.query(SigningKey).filter_by(state=KEY_RETIRED).all():
            retired.publish_until = utcnow() - timedelta(seconds=1)
    rotate_keys()
    with app.app_context():
        assert db.session.get(SigningKey, due_kid).state == KEY_RETIRED
        states = {(key.alg, key.state) for key in db.session.query(SigningKey).all()}
        assert {("RS256", "active"), ("RS256", "next"), ("ES256", "active"), ("ES256", "next")} <= states
        assert all(
            as_utc(key.publish_until) > utcnow() for key in db.session.query(SigningKey).filter_by(state=KEY_RETIRED)
        )
        db.session.rollback()


def test_purge_keeps_used_codes_until_their_token_expires(app, client, tenant):
    used = sign_in(client, tenant)["code"]
    assert exchange(client, tenant, used).status_code == 200
    unused = sign_in(client, tenant)["code"]
    with app.app_context(), transaction():
        for code in (used, unused):
            db.session.get(AuthorizationCode, hash_secret(code)).expires_at = utcnow() - timedelta(seconds=1)
    purge_expired()
    with app.app_context():
        assert db.session.get(AuthorizationCode, hash_secret(unused)) is None
        assert db.session.get(AuthorizationCode, hash_secret(used)) is not None
        db.session.rollback()
    # A late replay still finds the used code and revokes its token.
    replay = exchange(client, tenant, used)
    assert replay.status_code == 400 and "already used" in replay.get_json()["error_description"]
