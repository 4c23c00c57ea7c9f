"""Credentials the service vouches for: a user's verified e-mail address and linked social accounts."""

from __future__ import annotations

from datetime import UTC, datetime

from app.db import transaction
from app.extensions import db
from app.social.models import BROKEN, SocialLink
from tests.support.credentials import access_token
from tests.support.issuer import verify
from tests.support.oidc import make_tenant

LINKED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _link(app, tenant, platform: str, status: str = "linked") -> None:
    with app.app_context(), transaction():
        # A link made straight in the database has no platform behind it: keep the background
        # refresh (beat's refresh_stale, run by other tests against their fakes) away from it.
        db.session.add(
            SocialLink(
                user_id=tenant.user_id,
                client_id=tenant.client_id,
                platform=platform,
                account_id="acct-42",
                account_name="ada",
                status=status,
                linked_at=LINKED_AT,
                next_fetch_at=datetime(9999, 1, 1, tzinfo=UTC),
            )
        )


def _service_did(client) -> str:
    from app.credentials import status_lists

    with client.application.test_request_context():
        did = status_lists.issuer_did()
        db.session.commit()
    return did


def test_the_user_gets_a_credential_for_their_verified_email(app, client):
    tenant = make_tenant(app, client)
    token = access_token(client, tenant, scope="openid email")
    response = client.post(f"/v1/user/{tenant.user_id}/credentials/email", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201, response.get_data(as_text=True)
    vc = response.json["verifiableCredential"]
    assert vc["type"] == ["VerifiableCredential", "VerifiedEmailAddressCredential"]
    assert vc["issuer"] == _service_did(client)
    subject = vc["credentialSubject"]
    assert subject["id"] == tenant.did and subject["email"] == tenant.email
    assert datetime.fromisoformat(subject["verifiedAt"].replace("Z", "+00:00")) <= datetime.now(UTC)
    verifier = make_tenant(app, client, name="Verifier")
    assert verify(client, verifier.headers, vc)["verified"] is True

    other = make_tenant(app, client, name="Other")
    refused = client.post(f"/v1/user/{other.user_id}/credentials/email", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 404 and refused.mimetype == "application/problem+json"
    assert client.post(f"/v1/user/{tenant.user_id}/credentials/email", headers=tenant.headers).status_code == 401


def test_a_linked_social_account_is_vouched_for(app, client):
    tenant = make_tenant(app, client)
    _link(app, tenant, "platform_a")
    _link(app, tenant, "platform_b", status=BROKEN)

    by_client = client.post(f"/v1/user/{tenant.user_id}/credentials/social/platform_a", headers=tenant.headers)
    assert by_client.status_code == 201, by_client.get_data(as_text=True)
    vc = by_client.json["verifiableCredential"]
    assert vc["type"] == ["VerifiableCredential", "LinkedSocialAccountCredential"]
    assert vc["credentialSubject"] == {
        "id": tenant.did,
        "platform": "platform_a",
        "accountId": "acct-42",
        "verifiedAt": "2026-03-01T12:00:00Z",
        "accountName": "ada",
    }
    assert verify(client, tenant.headers, vc)["verified"] is True

    token = access_token(client, tenant)
    by_user = client.post(
        f"/v1/user/{tenant.user_id}/credentials/social/platform_a", headers={"Authorization": f"Bearer {token}"}
    )
    assert by_user.status_code == 201

    for path, headers in [
        (f"/v1/user/{tenant.user_id}/credentials/social/platform_b", tenant.headers),  # broken link
        (f"/v1/user/{tenant.user_id}/credentials/social/platform_c", tenant.headers),  # no link
        (f"/v1/user/{tenant.user_id}/credentials/social/platform_a", make_tenant(app, client, name="X").headers),
    ]:
        response = client.post(path, headers=headers)
        assert response.status_code == 404, response.get_data(as_text=True)
        assert response.mimetype == "application/problem+json"
    unknown = client.post(f"/v1/user/{tenant.user_id}/credentials/social/myspace", headers=tenant.headers)
    assert unknown.status_code in (404, 422) and unknown.mimetype == "application/problem+json"
    assert client.post(f"/v1/user/{tenant.user_id}/credentials/social/platform_a").status_code == 401
