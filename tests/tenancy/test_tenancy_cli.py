"""Operator commands: flask clients create-master|list|disable|set-recaptcha|tokens ..."""

from __future__ import annotations

import json

import pytest

from tests.support.tenancy import assert_problem


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()

    def run(*args: str, expect: int = 0):
        result = runner.invoke(args=["clients", *args])
        assert result.exit_code == expect, (result.output, result.exception)
        return result

    return run


def test_create_master_prints_credentials_once_and_they_work(cli, client, app):
    out = json.loads(
        cli("create-master", "--name", "Acme", "--redirect-uri", "https://acme.example/cb",
            "--id-token-claim", "edu_username=user_name", "--json").output
    )  # fmt: skip
    assert set(out) == {"client_id", "client_secret", "api_token"}
    me = client.get(f"/v1/sub_client/{out['client_id']}", headers={"x-api-token": out["api_token"]}).get_json()["data"]
    assert me["redirect_uris"] == ["https://acme.example/cb"]
    assert me["id_token_claims"] == {"edu_username": "user_name"}
    text = cli("create-master", "--name", "Plain").output
    assert "client_secret:" in text and "api_token:" in text


@pytest.mark.parametrize(
    "args",
    [
        ("--name", ""),
        ("--name", "x" * 71),
        ("--name", "ok", "--redirect-uri", "http://evil.example/cb"),
        ("--name", "ok", "--id-token-claim", "edu_username"),
        ("--name", "ok", "--id-token-claim", "sub=user_name"),
        ("--name", "ok", "--id-token-claim", "edu=not_a_field"),
    ],
)
def test_create_master_refuses_bad_options(cli, args):
    before = len(json.loads(cli("list", "--json").output))
    cli("create-master", *args, expect=2)
    assert len(json.loads(cli("list", "--json").output)) == before


def test_list_shows_the_tree(cli, client, master):
    child = client.post("/v1/sub_client", json={"name": "Child"}, headers=master.headers).get_json()["data"]
    rows = {row["client_id"]: row for row in json.loads(cli("list", "--json").output)}
    assert rows[child["client_id"]]["parent_id"] == master.client_id
    assert rows[child["client_id"]]["root_id"] == master.client_id
    assert "Child" in cli("list").output


def test_disable_covers_the_subtree(cli, client, master):
    child = client.post("/v1/sub_client", json={"name": "Child"}, headers=master.headers).get_json()["data"]
    child_token = client.post(
        "/v1/api_tokens", json={}, headers={**master.headers, "x-api-subclient-id": str(child["client_id"])}
    ).get_json()["data"]["token"]
    assert "Disabled 2 client(s)." in cli("disable", str(master.client_id)).output
    assert_problem(client.get("/v1/sub_client", headers=master.headers), 401)
    assert_problem(client.get("/v1/sub_client", headers={"x-api-token": child_token}), 401)
    rows = {row["client_id"]: row for row in json.loads(cli("list", "--json").output)}
    assert rows[master.client_id]["disabled_at"] and rows[child["client_id"]]["disabled_at"]
    active = {row["client_id"] for row in json.loads(cli("list", "--active-only", "--json").output)}
    assert master.client_id not in active
    cli("disable", "2147483000", expect=1)


def test_tokens_create_list_revoke(cli, client, master):
    issued = json.loads(cli("tokens", "create", "--client-id", str(master.client_id), "--name", "ops",
                            "--expires-in-days", "30", "--json").output)  # fmt: skip
    headers = {"x-api-token": issued["api_token"]}
    assert client.get("/v1/sub_client", headers=headers).status_code == 200
    listed = json.loads(cli("tokens", "list", "--client-id", str(master.client_id), "--json").output)
    assert issued["id"] in [row["id"] for row in listed]
    assert all("api_token" not in row for row in listed)
    assert issued["expires_at"].endswith("Z")
    cli("tokens", "revoke", str(issued["id"]))
    assert_problem(client.get("/v1/sub_client", headers=headers), 401)
    cli("tokens", "revoke", "2147483000", expect=1)
    cli("tokens", "create", "--client-id", "2147483000", expect=1)


def test_set_recaptcha_shows_in_the_sub_client(cli, client, master):
    cli("set-recaptcha", str(master.client_id), "--site-key", "site-key-1", "--secret", "s3cret", "--threshold", "0.7")
    data = client.get(f"/v1/sub_client/{master.client_id}", headers=master.headers).get_json()["data"]
    assert (data["recaptcha_key"], data["recaptcha_threshold"], data["recaptcha_enabled"]) == ("site-key-1", 0.7, True)
    cli("set-recaptcha", str(master.client_id), "--site-key", "k", "--threshold", "1.5", expect=2)
