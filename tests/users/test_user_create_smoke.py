def test_create_user_minimal(client, master):
    response = client.post(
        "/v1/user/create", json={"profile": {"email_address": "A@Example.org"}}, headers=master.headers
    )
    assert response.status_code == 201, response.get_json()
    data = response.get_json()["data"]
    assert data["profile"] == {"email_address": "a@example.org"}
    assert data["did"].startswith("did:tessera:")
