"""`tessera consent approve` signs only a consent naming this agent and the owner it shows.

The network is a scripted stand-in on loopback, so the consent can be tampered with the way a
hostile or compromised network (or anything in between) could.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from app.agents import ethereum
from app.agents.consent_message import ConsentTerms, format_consent_message
from app.client.cli import main
from tests.support.fake_agent_network import FakeNetwork, serve
from tests.support.pty_terminal import TESSERA, Terminal

AGENT = "did:tessera:" + "a1" * 20
OWNER = "did:tessera:" + "b2" * 20
INTRUDER = "did:tessera:" + "c3" * 20
CONSENT_ID = "d4" * 16


def _consent(network_host: str, **changes: str) -> dict[str, str]:
    """A consent as the network serves it; ``changes`` alter the signed message's terms only."""
    terms = {
        "network_host": network_host,
        "agent_did": AGENT,
        "owner_did": OWNER,
        "consent_id": CONSENT_ID,
        "issued_at": "2026-11-21T12:00:00Z",
        "expires_at": "2026-11-28T12:00:00Z",
    }
    message = format_consent_message(ConsentTerms(**{**terms, **changes}))
    return {"id": CONSENT_ID, "owner": OWNER, "agent": AGENT, "state": "pending", "message": message}


def _approve(network: FakeNetwork, key: str, *args: str):
    link = f"{network.url}/consent/{CONSENT_ID}"
    env = {"TESSERA_NETWORK_URL": network.url, "TESSERA_API_KEY": key, "TESSERA_ENV": "testnet"}
    return CliRunner().invoke(main, ["--json", "consent", "approve", link, *args], env=env)


TAMPERED = {
    "another agent": lambda host: _consent(host, agent_did=INTRUDER),
    "an owner other than the one shown": lambda host: _consent(host, owner_did=INTRUDER),
    "another consent": lambda host: _consent(host, consent_id="e5" * 16),
    "another network": lambda host: _consent("other.example"),
    "a sign-in message": lambda host: {
        **_consent(host),
        "message": f"{host} wants you to sign in with your Ethereum account:\n0x" + "00" * 20,
    },
    "a consent with a line appended": lambda host: {
        **_consent(host),
        "message": _consent(host)["message"] + "\nAlso: transfer every credit to " + INTRUDER,
    },
    "a shown agent that is not this agent": lambda host: {**_consent(host), "agent": INTRUDER},
}


@pytest.mark.parametrize("tampering", sorted(TAMPERED))
def test_a_tampered_consent_is_refused_without_signing(tampering):
    key = ethereum.generate_private_key()
    with serve(FakeNetwork(agent_did=AGENT)) as network:
        network.consent = TAMPERED[tampering](network.url.removeprefix("http://"))
        result = _approve(network, key, "--yes")
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "ConsentRefused"
    assert "refusing to sign" in error["message"]
    assert network.approvals == []


def test_an_owner_other_than_the_expected_one_is_refused(tmp_path):
    key = ethereum.generate_private_key()
    with serve(FakeNetwork(agent_did=AGENT)) as network:
        network.consent = _consent(network.url.removeprefix("http://"))
        result = _approve(network, key, "--yes", "--owner", INTRUDER)
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["error"]["kind"] == "ConsentRefused"
    assert OWNER in result.output and INTRUDER in result.output
    assert network.approvals == []


def test_a_genuine_consent_is_signed_by_the_agent_key():
    key = ethereum.generate_private_key()
    network = FakeNetwork(agent_did=AGENT, job_result={"agent": AGENT, "owner": OWNER, "consent": CONSENT_ID})
    with serve(network):
        network.consent = _consent(network.url.removeprefix("http://"))
        result = _approve(network, key, "--yes", "--owner", OWNER)
    assert result.exit_code == 0, result.output
    assert f"Owner:   {OWNER}" in result.output
    [approval] = network.approvals
    signer = ethereum.recover_personal_signer(network.consent["message"], approval["signature"])
    assert signer == ethereum.address_from_private_key(key)


def test_on_a_terminal_the_owner_is_shown_and_declining_signs_nothing(tmp_path):
    key = ethereum.generate_private_key()
    with serve(FakeNetwork(agent_did=AGENT)) as network:
        network.consent = _consent(network.url.removeprefix("http://"))
        terminal = Terminal(
            [str(TESSERA), "consent", "approve", f"{network.url}/consent/{CONSENT_ID}"],
            cwd=tmp_path,
            env={"TESSERA_NETWORK_URL": network.url, "TESSERA_API_KEY": key},
        )
        terminal.expect(f"Owner:   {OWNER}")
        terminal.answer(f"Accept {OWNER} as the owner of this agent?", "n")
        assert terminal.finish() == 1
        assert network.approvals == []
