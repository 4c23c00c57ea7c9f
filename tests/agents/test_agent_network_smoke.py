"""Authentication and reads through the library against the live server."""

from app.agents.ethereum import address_from_private_key


def test_claimed_key_authenticates_and_reads_back_its_did(agent_client, claimed_key, live_server):
    account = agent_client.whoami()
    assert account["address"] == address_from_private_key(claimed_key)
    assert account["did"] == agent_client.did
    assert account["did"].startswith("did:tessera:") and len(account["did"]) == len("did:tessera:") + 40
    assert account["balance"] == 1000
