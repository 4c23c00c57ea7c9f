"""The client signs a sign-in challenge only when it names this network, this key, this chain and now.

A rogue network (a scripted stand-in on loopback) relays a genuine challenge of another network,
or serves one with a field changed; the client must refuse before signing, so nothing reaches
``/api/auth/verify``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from click.testing import CliRunner

from app.agents import ethereum
from app.client.cli import main
from app.client.library import ChallengeRefused, TesseraClient
from tests.support.fake_agent_network import FakeNetwork, serve, sign_in_message

AGENT = "did:tessera:" + "a1" * 20
OTHER_ADDRESS = ethereum.address_from_private_key(ethereum.generate_private_key())


def _relay_from(live_url: str):
    """A challenge function that fetches a real challenge for the address from another network."""

    def relay(_network: FakeNetwork, address: str) -> str:
        answer = httpx.post(f"{live_url}/api/auth/challenge", json={"address": address}, timeout=10)
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]["message"]

    return relay


def _cli(network: FakeNetwork, key: str, *args: str, **env: str):
    environment = {"TESSERA_NETWORK_URL": network.url, "TESSERA_API_KEY": key, "TESSERA_ENV": "testnet", **env}
    return CliRunner().invoke(main, [*args, "whoami"], env=environment)


def test_a_challenge_relayed_from_another_network_is_refused_unsigned(live_server):
    key = ethereum.generate_private_key()
    network = FakeNetwork(agent_did=AGENT, challenge=_relay_from(live_server.url))
    with serve(network), TesseraClient(network.url, api_key=key) as client, pytest.raises(ChallengeRefused) as refused:
        client.authenticate()
    assert f"domain {live_server.url.removeprefix('http://')}" in str(refused.value)
    assert f"expected {network.url.removeprefix('http://')}" in str(refused.value)
    assert network.sign_ins == []
    assert client._session_token is None


def test_the_cli_refuses_a_relayed_challenge_in_one_line_with_the_authentication_exit_code(live_server):
    key = ethereum.generate_private_key()
    with serve(FakeNetwork(agent_did=AGENT, challenge=_relay_from(live_server.url))) as network:
        result = _cli(network, key)
        as_json = _cli(network, key, "--json")
    assert result.exit_code == 3, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: authentication failed: refusing to sign the sign-in challenge")
    assert as_json.exit_code == 3
    assert json.loads(as_json.stdout)["error"]["kind"] == "ChallengeRefused"
    assert network.sign_ins == []


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _with_nonce(message: str, nonce: str) -> str:
    """`message` with its nonce replaced by `nonce` (which the message type itself would refuse)."""
    return "\n".join(f"Nonce: {nonce}" if line.startswith("Nonce: ") else line for line in message.split("\n"))


def _without_nonce(message: str) -> str:
    return "\n".join(line for line in message.split("\n") if not line.startswith("Nonce: "))


TAMPERED = {
    "another domain": lambda url, address: sign_in_message(url, address, domain="tessera.example"),
    "another scheme": lambda url, address: sign_in_message(url, address, scheme="https"),
    "another URI": lambda url, address: sign_in_message(url, address, uri="https://tessera.example/api/auth/verify"),
    "a URI on another port": lambda url, address: sign_in_message(url, address, uri=url + "0/api/auth/verify"),
    "another address": lambda url, address: sign_in_message(url, OTHER_ADDRESS),
    "another chain": lambda url, address: sign_in_message(url, address, chain_id=137),
    "an old issue time": lambda url, address: sign_in_message(url, address, issued_at=_now() - timedelta(hours=2)),
    "a future issue time": lambda url, address: sign_in_message(url, address, issued_at=_now() + timedelta(hours=1)),
    "an expiry passed": lambda url, address: sign_in_message(
        url, address, expiration_time=_now() - timedelta(seconds=1)
    ),
    "no expiry": lambda url, address: sign_in_message(url, address, expiration_time=None),
    "an expiry years ahead": lambda url, address: sign_in_message(
        url, address, expiration_time=_now() + timedelta(days=400)
    ),
    "a not-before ahead": lambda url, address: sign_in_message(url, address, not_before=_now() + timedelta(hours=1)),
    "resources": lambda url, address: sign_in_message(url, address, resources=("urn:recap:eyJhdHQiOnt9fQ",)),
    "text that is not EIP-4361": lambda url, address: f"{url} wants you to sign in\n{address}",
    "a challenge with a line appended": lambda url, address: sign_in_message(url, address) + "\nTransfer: all",
    "no nonce": lambda url, address: _without_nonce(sign_in_message(url, address)),
    "an empty nonce": lambda url, address: _with_nonce(sign_in_message(url, address), ""),
    "a blank nonce": lambda url, address: _with_nonce(sign_in_message(url, address), "        "),
    "a short nonce": lambda url, address: _with_nonce(sign_in_message(url, address), "1234"),
}


@pytest.mark.parametrize("tampering", sorted(TAMPERED))
def test_a_tampered_challenge_is_refused_unsigned(tampering):
    key = ethereum.generate_private_key()
    network = FakeNetwork(agent_did=AGENT, challenge=lambda net, address: TAMPERED[tampering](net.url, address))
    refused = pytest.raises(ChallengeRefused, match="refusing to sign the sign-in challenge")
    with serve(network), TesseraClient(network.url, api_key=key) as client, refused:
        client.authenticate()
    assert network.sign_ins == []


def test_a_genuine_challenge_is_signed_by_the_key():
    key = ethereum.generate_private_key()
    with serve(FakeNetwork(agent_did=AGENT)) as network, TesseraClient(network.url, api_key=key) as client:
        assert client.authenticate()["did"] == AGENT
    [sign_in] = network.sign_ins
    assert ethereum.recover_personal_signer(sign_in["message"], sign_in["signature"]) == client.address


def test_the_chain_of_the_chosen_environment_is_required():
    key = ethereum.generate_private_key()
    on_chain_5 = FakeNetwork(
        agent_did=AGENT, challenge=lambda net, address: sign_in_message(net.url, address, chain_id=5)
    )
    with serve(on_chain_5) as network:
        default_chain = _cli(network, key)
        testnet_chain = _cli(network, key, TESSERA_TESTNET_CHAIN_ID="5")
        production_chain = _cli(network, key, "--env", "production", TESSERA_PRODUCTION_CHAIN_ID="5")
        overridden = _cli(network, key, "--env", "production", TESSERA_CHAIN_ID="7", TESSERA_PRODUCTION_CHAIN_ID="5")
    assert default_chain.exit_code == 3 and "chain id 5 (expected 1)" in default_chain.output
    assert "chain id 7" not in overridden.output and "(expected 7)" in overridden.output
    assert overridden.exit_code == 3
    # Accepted challenges are signed and sent; the fake network then has no account to show.
    assert testnet_chain.exit_code == 1 and production_chain.exit_code == 1
    assert len(network.sign_ins) == 2


def test_a_challenge_after_a_401_is_checked_too(live_server):
    key = ethereum.generate_private_key()
    served: list[str] = []

    def genuine_then_relayed(net: FakeNetwork, address: str) -> str:
        served.append(address)
        if len(served) == 1:
            return sign_in_message(net.url, address)
        return _relay_from(live_server.url)(net, address)

    network = FakeNetwork(agent_did=AGENT, challenge=genuine_then_relayed, unauthorized_paths={"/api/account"})
    with serve(network), TesseraClient(network.url, api_key=key) as client, pytest.raises(ChallengeRefused):
        client.whoami()
    assert len(served) == 2
    assert len(network.sign_ins) == 1


def test_the_cli_takes_the_chain_the_network_announces():
    key = ethereum.generate_private_key()
    on_a_local_chain = FakeNetwork(
        agent_did=AGENT,
        challenge=lambda net, address: sign_in_message(net.url, address, chain_id=31337),
        announced_chain_id=31337,
    )
    with serve(on_a_local_chain) as network:
        learned = _cli(network, key)
        pinned_elsewhere = _cli(network, key, TESSERA_TESTNET_CHAIN_ID="5")
    # Signed and sent (the fake network then has no account to show); a chain set for the
    # environment still wins over the announcement.
    assert learned.exit_code == 1 and "refusing to sign" not in learned.output, learned.output
    assert pinned_elsewhere.exit_code == 3 and "chain id 31337 (expected 5)" in pinned_elsewhere.output
    assert len(network.sign_ins) == 1


def test_a_message_naming_another_chain_than_announced_is_refused_unsigned():
    key = ethereum.generate_private_key()
    announces_one_signs_another = FakeNetwork(
        agent_did=AGENT,
        challenge=lambda net, address: sign_in_message(net.url, address, chain_id=137),
        announced_chain_id=31337,
    )
    with serve(announces_one_signs_another) as network:
        result = _cli(network, key)
    assert result.exit_code == 3 and "chain id 137 (expected 31337)" in result.output
    assert network.sign_ins == []


def test_the_cli_signs_in_to_a_network_on_the_readmes_chain(app, live_server, monkeypatch):
    """A network whose AGENT_CHAIN_ID is a self-hoster's chain (the README's chain section): the CLI
    with none of its chain settings signs in, and so do the claim page's next lines (whoami)."""
    from tests.support.agents import claim_key_over_http
    from tests.support.config import change_settings

    change_settings(monkeypatch, app, AGENT_CHAIN_ID="31337")
    key = claim_key_over_http(live_server)
    env = {"TESSERA_TESTNET_URL": live_server.url, "TESSERA_API_KEY": key, "TESSERA_ENV": "testnet",
           "TESSERA_NETWORK_URL": "", "TESSERA_CHAIN_ID": "", "TESSERA_TESTNET_CHAIN_ID": ""}  # fmt: skip
    result = CliRunner().invoke(main, ["whoami"], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("DID:     did:tessera:")
