"""TesseraRegistry on a real node: each write authorised by an EIP-712 signature, sent by a relayer
that pays the gas; the state read back with eth_call after every step."""

from __future__ import annotations

import pytest
from eth_account import Account
from web3 import Web3
from web3.exceptions import ContractCustomError
from web3.logs import DISCARD

from app.chain.transactions import send_transaction, wait_for_receipt
from app.chain.typed_data import ZERO_ADDRESS, registry_message, sign_typed_data
from tests.chain.conftest import CHAIN_ID, RELAYER_KEY


def relay(w3: Web3, call) -> dict:
    """Send `call` from the relayer and return its receipt (a revert raises before sending)."""
    receipt = wait_for_receipt(
        w3,
        send_transaction(
            w3, Account.from_key(RELAYER_KEY).key, {"to": call.address, "data": call._encode_transaction_data()}
        ),
    )
    assert receipt["status"] == 1
    return receipt


def selector(signature: str) -> str:
    return Web3.keccak(text=signature)[:4].hex().removeprefix("0x")


def assert_reverts(w3: Web3, call, error_signature: str) -> None:
    nonce_before = w3.eth.get_transaction_count(Account.from_key(RELAYER_KEY).address)
    with pytest.raises(ContractCustomError) as raised:
        relay(w3, call)
    assert selector(error_signature) in str(raised.value.data)
    assert w3.eth.get_transaction_count(Account.from_key(RELAYER_KEY).address) == nonce_before  # nothing sent


def deadline(w3: Web3, seconds: int = 3600) -> int:
    return w3.eth.get_block("latest")["timestamp"] + seconds


def sign(contracts, primary_type: str, message: dict, key) -> bytes:
    typed = registry_message(primary_type, message, chain_id=CHAIN_ID, registry_address=contracts.registry.address)
    return sign_typed_data(typed, key)


class Agent:
    """A fresh agent key and a DID of its own."""

    def __init__(self) -> None:
        self.account = Account.create()
        self.did = f"did:tessera:{self.account.address[2:].lower()}"

    @property
    def key(self) -> bytes:
        return self.account.key


def register(w3: Web3, contracts, agent: Agent, *, card_uri: str = "", owner: Agent | None = None):
    registry = contracts.registry
    ends = deadline(w3)
    message = {
        "did": agent.did,
        "agent": agent.account.address,
        "owner": owner.account.address if owner else ZERO_ADDRESS,
        "cardURI": card_uri,
        "nonce": registry.functions.nonce(agent.did).call(),
        "deadline": ends,
    }
    return registry.functions.register(
        agent.did,
        message["agent"],
        message["owner"],
        card_uri,
        ends,
        sign(contracts, "Register", message, agent.key),
        sign(contracts, "Register", message, owner.key) if owner else b"",
    )


def set_card(w3: Web3, contracts, did: str, card_uri: str, signer: Agent, *, ends: int | None = None):
    registry = contracts.registry
    ends = deadline(w3) if ends is None else ends
    message = {"did": did, "cardURI": card_uri, "nonce": registry.functions.nonce(did).call(), "deadline": ends}
    return registry.functions.setCard(did, card_uri, ends, sign(contracts, "SetCard", message, signer.key))


def deregister(w3: Web3, contracts, did: str, signer: Agent):
    registry = contracts.registry
    ends = deadline(w3)
    message = {"did": did, "nonce": registry.functions.nonce(did).call(), "deadline": ends}
    return registry.functions.deregister(did, ends, sign(contracts, "Deregister", message, signer.key))


def record(contracts, did: str) -> tuple:
    return tuple(contracts.registry.functions.getRecord(did).call())


def test_the_registry_answers_its_version(contracts):
    assert contracts.registry.functions.version().call() == "1.7.0"


def test_an_agent_registers_sets_its_card_and_deregisters_its_own_did(anvil, contracts):
    agent = Agent()
    receipt = relay(anvil.w3, register(anvil.w3, contracts, agent, card_uri="https://net.example/card/1"))
    assert record(contracts, agent.did) == (agent.account.address, ZERO_ADDRESS, "https://net.example/card/1")
    (event,) = contracts.registry.events.Registered().process_receipt(receipt, errors=DISCARD)
    assert event.args.did == agent.did and event.args.agent == agent.account.address
    assert event.args.didHash == Web3.keccak(text=agent.did)

    receipt = relay(anvil.w3, set_card(anvil.w3, contracts, agent.did, "https://agent.example/card.json", agent))
    assert record(contracts, agent.did)[2] == "https://agent.example/card.json"
    assert (
        contracts.registry.events.CardSet().process_receipt(receipt, errors=DISCARD)[0].args.cardURI
        == "https://agent.example/card.json"
    )

    receipt = relay(anvil.w3, deregister(anvil.w3, contracts, agent.did, agent))
    assert record(contracts, agent.did) == (ZERO_ADDRESS, ZERO_ADDRESS, "")
    assert contracts.registry.functions.isRegistered(agent.did).call() is False
    assert contracts.registry.events.Deregistered().process_receipt(receipt, errors=DISCARD)[0].args.did == agent.did


def test_another_key_cannot_register_or_write_a_did(anvil, contracts):
    agent, stranger = Agent(), Agent()
    forged = register(anvil.w3, contracts, agent)
    # The stranger signs a registration naming the agent's address: the recovered signer differs.
    message = {
        "did": agent.did, "agent": agent.account.address, "owner": ZERO_ADDRESS, "cardURI": "",
        "nonce": 0, "deadline": forged.args[4],
    }  # fmt: skip
    stolen = contracts.registry.functions.register(
        agent.did, agent.account.address, ZERO_ADDRESS, "", forged.args[4],
        sign(contracts, "Register", message, stranger.key), b"",
    )  # fmt: skip
    assert_reverts(anvil.w3, stolen, "NotAuthorised(address,address)")
    assert record(contracts, agent.did)[0] == ZERO_ADDRESS

    relay(anvil.w3, forged)
    assert_reverts(anvil.w3, register(anvil.w3, contracts, agent), "AlreadyRegistered(string)")
    assert_reverts(
        anvil.w3,
        set_card(anvil.w3, contracts, agent.did, "https://x.example/", stranger),
        "NotAuthorised(address,address)",
    )
    assert_reverts(anvil.w3, deregister(anvil.w3, contracts, agent.did, stranger), "NotAuthorised(address,address)")
    assert record(contracts, agent.did) == (agent.account.address, ZERO_ADDRESS, "")


def test_only_the_registrar_creates_records(anvil, contracts):
    # anvil's second development account: a relayer other than the one that deployed the registry.
    other_relayer = Account.from_key("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
    assert contracts.registry.functions.registrar().call() == Account.from_key(RELAYER_KEY).address
    agent = Agent()
    call = register(anvil.w3, contracts, agent)  # signed by the agent itself, but not sent by the registrar
    with pytest.raises(ContractCustomError) as raised:
        send_transaction(anvil.w3, other_relayer.key, {"to": call.address, "data": call._encode_transaction_data()})
    assert selector("NotRegistrar(address)") in str(raised.value.data)
    assert record(contracts, agent.did)[0] == ZERO_ADDRESS
    relay(anvil.w3, call)
    assert record(contracts, agent.did)[0] == agent.account.address


def test_a_signature_is_good_once_and_until_its_deadline(anvil, contracts):
    agent = Agent()
    relay(anvil.w3, register(anvil.w3, contracts, agent))
    once = set_card(anvil.w3, contracts, agent.did, "https://agent.example/a", agent)
    relay(anvil.w3, once)
    assert_reverts(
        anvil.w3, once, "NotAuthorised(address,address)"
    )  # the nonce moved on: a replay recovers another digest
    expired = set_card(anvil.w3, contracts, agent.did, "https://agent.example/b", agent, ends=deadline(anvil.w3, -1))
    assert_reverts(anvil.w3, expired, "SignatureExpired(uint256)")
    assert record(contracts, agent.did)[2] == "https://agent.example/a"


def test_a_record_naming_an_owner_refuses_the_agent_and_obeys_the_owner(anvil, contracts):
    agent, owner = Agent(), Agent()
    unsigned_by_owner = register(anvil.w3, contracts, agent, owner=owner)
    bad = contracts.registry.functions.register(*unsigned_by_owner.args[:6], b"")
    with pytest.raises(ContractCustomError):  # OpenZeppelin's ECDSAInvalidSignatureLength(0)
        relay(anvil.w3, bad)
    relay(anvil.w3, unsigned_by_owner)
    assert record(contracts, agent.did) == (agent.account.address, owner.account.address, "")

    assert_reverts(anvil.w3, deregister(anvil.w3, contracts, agent.did, agent), "NotAuthorised(address,address)")
    assert_reverts(
        anvil.w3,
        set_card(anvil.w3, contracts, agent.did, "https://a.example/", agent),
        "NotAuthorised(address,address)",
    )
    relay(anvil.w3, set_card(anvil.w3, contracts, agent.did, "https://org.example/agent.json", owner))
    assert record(contracts, agent.did)[2] == "https://org.example/agent.json"

    # The owner releases the agent (owner zero, the owner's signature alone); then the agent decides again.
    ends = deadline(anvil.w3)
    message = {
        "did": agent.did,
        "owner": ZERO_ADDRESS,
        "nonce": contracts.registry.functions.nonce(agent.did).call(),
        "deadline": ends,
    }
    receipt = relay(
        anvil.w3,
        contracts.registry.functions.setOwner(
            agent.did, ZERO_ADDRESS, ends, sign(contracts, "SetOwner", message, owner.key), b""
        ),
    )
    assert contracts.registry.events.OwnerSet().process_receipt(receipt, errors=DISCARD)[0].args.owner == ZERO_ADDRESS
    relay(anvil.w3, deregister(anvil.w3, contracts, agent.did, agent))
    assert record(contracts, agent.did)[0] == ZERO_ADDRESS


def _release(contracts, w3: Web3, agent: Agent, signer: Agent):
    ends = deadline(w3)
    message = {
        "did": agent.did,
        "owner": ZERO_ADDRESS,
        "nonce": contracts.registry.functions.nonce(agent.did).call(),
        "deadline": ends,
    }
    return contracts.registry.functions.setOwner(
        agent.did, ZERO_ADDRESS, ends, sign(contracts, "SetOwner", message, signer.key), b""
    )


def test_the_agent_may_release_its_owner_alone_but_not_name_another(anvil, contracts):
    w3, agent, owner, stranger = anvil.w3, Agent(), Agent(), Agent()
    relay(w3, register(w3, contracts, agent, owner=owner))

    assert_reverts(w3, _release(contracts, w3, agent, stranger), "NotAuthorised(address,address)")
    # Naming another owner still needs the current owner's signature, not the agent's.
    ends = deadline(w3)
    message = {
        "did": agent.did,
        "owner": stranger.account.address,
        "nonce": contracts.registry.functions.nonce(agent.did).call(),
        "deadline": ends,
    }
    by_agent = contracts.registry.functions.setOwner(
        agent.did,
        stranger.account.address,
        ends,
        sign(contracts, "SetOwner", message, agent.key),
        sign(contracts, "SetOwner", message, stranger.key),
    )
    assert_reverts(w3, by_agent, "NotAuthorised(address,address)")

    relay(w3, _release(contracts, w3, agent, agent))
    assert record(contracts, agent.did) == (agent.account.address, ZERO_ADDRESS, "")
    relay(w3, set_card(w3, contracts, agent.did, "https://agent.example/mine.json", agent))  # the agent decides again
    assert record(contracts, agent.did)[2] == "https://agent.example/mine.json"
