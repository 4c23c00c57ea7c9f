"""Operator commands: grant credits to a key made elsewhere, make an account an organisation."""

from __future__ import annotations

from app.agents.ethereum import address_from_private_key, generate_private_key
from app.client.library import TesseraClient
from tests.support.agents import registration_card


def test_granted_credits_let_a_key_made_elsewhere_host(app, live_server):
    key = generate_private_key()
    address = address_from_private_key(key)
    runner = app.test_cli_runner()
    result = runner.invoke(args=["agents", "grant-credits", address.lower(), "25", "--reason", "purchase"])
    assert result.exit_code == 0, result.output
    assert f"{address}: balance 25 credits" in result.output
    with TesseraClient(live_server.url, api_key=key, poll_interval=0.05) as client:
        assert client.whoami()["balance"] == 25
        client.host_card(registration_card("paid for"))
        ledger = client.credits()
    assert ledger["balance"] == 15
    assert [entry["reason"] for entry in ledger["entries"]] == ["host-card", "purchase"]


def test_set_kind_makes_an_organisation(app, live_server):
    key = generate_private_key()
    runner = app.test_cli_runner()
    result = runner.invoke(args=["agents", "set-kind", address_from_private_key(key), "organisation"])
    assert result.exit_code == 0, result.output
    with TesseraClient(live_server.url, api_key=key) as client:
        assert client.whoami()["kind"] == "organisation"


def test_operator_commands_refuse_bad_input(app):
    runner = app.test_cli_runner()
    assert runner.invoke(args=["agents", "grant-credits", "0x1234", "5"]).exit_code == 1
    assert (
        runner.invoke(args=["agents", "grant-credits", address_from_private_key(generate_private_key()), "0"]).exit_code
        == 1
    )
    assert runner.invoke(args=["agents", "set-kind", "0x" + "ab" * 20, "robot"]).exit_code == 2
