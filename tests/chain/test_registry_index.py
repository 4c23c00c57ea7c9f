"""The index of the registry's events, followed by the `agents.follow_registry` task on a real node:
after every step it holds what eth_call reads from the contract, once the step has its confirmations."""

from __future__ import annotations

from app.agents.tasks import beat_schedule, follow_registry
from app.chain.index import apply_registry_events, get_indexed_record, next_block, read_registry_events
from app.chain.typed_data import ZERO_ADDRESS
from app.db import Mode, transaction, unit_of_work
from tests.chain.conftest import CHAIN_ID
from tests.chain.test_registry_contract import Agent, deregister, record, register, relay, set_card
from tests.support.config import change_settings

CONFIRMATIONS = 2


def _evm(monkeypatch, app, anvil, contracts) -> None:
    change_settings(
        monkeypatch,
        app,
        AGENT_REGISTRY_BACKEND="evm",
        AGENT_NETWORK="testnet",
        CHAIN_TESTNET_RPC_URL=anvil.url,
        CHAIN_TESTNET_CHAIN_ID=str(CHAIN_ID),
        CHAIN_TESTNET_REGISTRY_ADDRESS=contracts.registry.address,
        CHAIN_TESTNET_IDENTITY_REGISTRY_ADDRESS=contracts.identity.address,
        CHAIN_CONFIRMATIONS=str(CONFIRMATIONS),
    )


def _follow(app, anvil) -> None:
    """Confirm what was sent, then run the follower until it has read every confirmed block."""
    anvil.w3.provider.make_request("anvil_mine", [hex(CONFIRMATIONS)])
    with app.app_context():
        while True:
            follow_registry.apply(throw=True)  # a failure raises here; no .get() (a worker in this process forbids it)
            with unit_of_work(Mode.READ):
                caught_up = next_block("testnet") > anvil.w3.eth.block_number - CONFIRMATIONS
            if caught_up:
                return


def _indexed(app, did: str) -> tuple | None:
    with app.app_context(), unit_of_work(Mode.READ):
        row = get_indexed_record("testnet", did)
        return None if row is None else (row.agent_address, row.owner_address or ZERO_ADDRESS, row.card_uri)


def test_the_index_follows_each_write_once_confirmed(app, anvil, contracts, monkeypatch):
    _evm(monkeypatch, app, anvil, contracts)
    agent, owner = Agent(), Agent()
    w3 = anvil.w3

    relay(w3, register(w3, contracts, agent, card_uri="https://net.example/a"))
    assert _indexed(app, agent.did) is None  # not yet confirmed: not yet indexed
    _follow(app, anvil)
    assert (
        _indexed(app, agent.did)
        == record(contracts, agent.did)
        == (agent.account.address, ZERO_ADDRESS, "https://net.example/a")
    )

    relay(w3, set_card(w3, contracts, agent.did, "https://agent.example/card.json", agent))
    _follow(app, anvil)
    assert _indexed(app, agent.did) == record(contracts, agent.did)

    relay(w3, deregister(w3, contracts, agent.did, agent))
    owned = Agent()
    relay(w3, register(w3, contracts, owned, owner=owner))
    _follow(app, anvil)
    assert _indexed(app, agent.did) is None and record(contracts, agent.did)[0] == ZERO_ADDRESS
    assert (
        _indexed(app, owned.did) == record(contracts, owned.did) == (owned.account.address, owner.account.address, "")
    )


def test_a_follower_that_lost_the_race_applies_nothing(app, anvil, contracts, monkeypatch):
    _evm(monkeypatch, app, anvil, contracts)
    agent = Agent()
    relay(anvil.w3, register(anvil.w3, contracts, agent))
    anvil.w3.provider.make_request("anvil_mine", [hex(CONFIRMATIONS)])
    with app.app_context():
        with unit_of_work(Mode.READ):
            start = next_block("testnet")
        batch = read_registry_events("testnet", start)
        assert any(event.args["did"] == agent.did for event in batch.events)
        with transaction():
            assert apply_registry_events(batch) == len(batch.events)
        with transaction():
            assert apply_registry_events(batch) == 0  # the same blocks again: the cursor moved past them
        with unit_of_work(Mode.READ):
            assert next_block("testnet") == batch.to_block + 1
    assert _indexed(app, agent.did) == record(contracts, agent.did)


def test_a_write_lost_in_a_reorganisation_never_reaches_the_index(app, anvil, contracts, monkeypatch):
    _evm(monkeypatch, app, anvil, contracts)
    _follow(app, anvil)
    agent = Agent()
    relay(anvil.w3, register(anvil.w3, contracts, agent))
    assert record(contracts, agent.did)[0] == agent.account.address
    # The block holding the registration is replaced by an empty one before it has its confirmations.
    anvil.w3.provider.make_request("anvil_reorg", [1, []])
    assert record(contracts, agent.did)[0] == ZERO_ADDRESS
    _follow(app, anvil)
    assert _indexed(app, agent.did) is None


def test_beat_follows_the_registry_only_on_a_chain(app, monkeypatch):
    assert "agents-follow-registry" not in beat_schedule(app)
    change_settings(monkeypatch, app, AGENT_REGISTRY_BACKEND="evm")
    assert beat_schedule(app)["agents-follow-registry"]["task"] == "agents.follow_registry"
