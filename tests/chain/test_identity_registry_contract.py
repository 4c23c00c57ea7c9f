"""The ERC-8004 IdentityRegistry on a real node: agents as ERC-721 tokens whose URI is the registration file."""

from __future__ import annotations

import pytest
from eth_abi import decode
from eth_account import Account
from eth_account.messages import encode_typed_data
from web3 import Web3
from web3.exceptions import ContractCustomError
from web3.logs import DISCARD

from app.chain.transactions import send_transaction, wait_for_receipt
from tests.chain.conftest import CHAIN_ID, RELAYER_KEY
from tests.chain.test_registry_contract import assert_reverts, relay, selector

# anvil's second development account: someone other than the relayer.
STRANGER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"


def register_agent(anvil, contracts, uri: str) -> int:
    receipt = relay(anvil.w3, contracts.identity.functions.register(uri))
    (event,) = contracts.identity.events.Registered().process_receipt(receipt, errors=DISCARD)
    assert event.args.agentURI == uri and event.args.owner == Account.from_key(RELAYER_KEY).address
    return event.args.agentId


def test_registering_mints_a_token_whose_uri_is_the_card(anvil, contracts):
    identity = contracts.identity
    relayer = Account.from_key(RELAYER_KEY).address
    agent_id = register_agent(anvil, contracts, "https://net.example/api/agent-card/did:tessera:1")
    assert identity.functions.ownerOf(agent_id).call() == relayer
    assert identity.functions.tokenURI(agent_id).call() == "https://net.example/api/agent-card/did:tessera:1"
    assert identity.functions.getAgentWallet(agent_id).call() == relayer
    assert register_agent(anvil, contracts, "https://net.example/other") == agent_id + 1

    receipt = relay(anvil.w3, identity.functions.setAgentURI(agent_id, "https://agent.example/card.json"))
    (event,) = identity.events.URIUpdated().process_receipt(receipt, errors=DISCARD)
    assert (event.args.agentId, event.args.newURI, event.args.updatedBy) == (
        agent_id,
        "https://agent.example/card.json",
        relayer,
    )
    assert identity.functions.tokenURI(agent_id).call() == "https://agent.example/card.json"
    assert identity.functions.supportsInterface(bytes.fromhex("80ac58cd")).call()  # ERC-721


def test_registration_with_metadata_and_the_reserved_wallet_key(anvil, contracts):
    identity = contracts.identity
    receipt = relay(anvil.w3, identity.functions.register("https://a.example/", [("did", b"did:tessera:abc")]))
    agent_id = identity.events.Registered().process_receipt(receipt, errors=DISCARD)[0].args.agentId
    assert identity.functions.getMetadata(agent_id, "did").call() == b"did:tessera:abc"
    assert_reverts(
        anvil.w3, identity.functions.setMetadata(agent_id, "agentWallet", b"x"), "ReservedMetadataKey(string)"
    )
    assert_reverts(
        anvil.w3,
        identity.functions.register("https://b.example/", [("agentWallet", b"x")]),
        "ReservedMetadataKey(string)",
    )
    relay(anvil.w3, identity.functions.setMetadata(agent_id, "did", b"did:tessera:def"))
    assert identity.functions.getMetadata(agent_id, "did").call() == b"did:tessera:def"
    relay(anvil.w3, identity.functions.unsetAgentWallet(agent_id))
    assert identity.functions.getAgentWallet(agent_id).call() == "0x" + "00" * 20


def test_only_the_owner_writes_and_a_new_wallet_proves_itself(anvil, contracts):
    identity = contracts.identity
    agent_id = register_agent(anvil, contracts, "https://c.example/")
    stranger = Account.from_key(STRANGER_KEY)
    with pytest.raises(ContractCustomError) as raised:
        send_transaction(
            anvil.w3,
            stranger.key,
            {
                "to": identity.address,
                "data": identity.functions.setAgentURI(agent_id, "https://evil.example/")._encode_transaction_data(),
            },
        )
    assert selector("ERC721InsufficientApproval(address,uint256)") in str(raised.value.data)

    wallet = Account.create()
    ends = anvil.w3.eth.get_block("latest")["timestamp"] + 600
    relayer = Account.from_key(RELAYER_KEY).address
    typed = {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            "AgentWalletSet": [
                {"name": "agentId", "type": "uint256"},
                {"name": "newWallet", "type": "address"},
                {"name": "owner", "type": "address"},
                {"name": "deadline", "type": "uint256"},
            ],
        },
        "primaryType": "AgentWalletSet",
        "domain": {
            "name": "ERC8004IdentityRegistry",
            "version": "1",
            "chainId": CHAIN_ID,
            "verifyingContract": identity.address,
        },
        "message": {"agentId": agent_id, "newWallet": wallet.address, "owner": relayer, "deadline": ends},
    }
    by_stranger = Account.sign_message(encode_typed_data(full_message=typed), stranger.key).signature
    assert_reverts(
        anvil.w3,
        identity.functions.setAgentWallet(agent_id, wallet.address, ends, by_stranger),
        "WalletSignatureInvalid(address,address)",
    )
    signature = Account.sign_message(encode_typed_data(full_message=typed), wallet.key).signature
    relay(anvil.w3, identity.functions.setAgentWallet(agent_id, wallet.address, ends, signature))
    assert identity.functions.getAgentWallet(agent_id).call() == wallet.address
    (stored,) = decode(["address"], identity.functions.getMetadata(agent_id, "agentWallet").call())
    assert Web3.to_checksum_address(stored) == wallet.address

    # A transfer hands the token on without the wallet the previous owner proved.
    relay(anvil.w3, identity.functions.transferFrom(relayer, stranger.address, agent_id))
    assert identity.functions.ownerOf(agent_id).call() == stranger.address
    assert identity.functions.getAgentWallet(agent_id).call() == "0x" + "00" * 20
    receipt = wait_for_receipt(
        anvil.w3,
        send_transaction(
            anvil.w3,
            stranger.key,
            {
                "to": identity.address,
                "data": identity.functions.setAgentURI(
                    agent_id, "https://new-owner.example/"
                )._encode_transaction_data(),
            },
        ),
    )
    assert receipt["status"] == 1 and identity.functions.tokenURI(agent_id).call() == "https://new-owner.example/"
