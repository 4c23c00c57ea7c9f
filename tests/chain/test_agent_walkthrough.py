"""The agent walkthrough (README "First agent", the spec's §4.12) through the `tessera` command line,
for one freshly claimed key, on both registry backends: login, whoami, create-card, host-card, the
public card and DID document, set-card, did get, agent registry --full, card-unpublish, deregister;
and an organisation acting for its agent: consent request and approval, host-card and set-card with
--owner/--agent, the agent's deregistration refused while an owner is named, revoke-owner.

With `evm`, after every step the chain is read back independently (eth_call through a plain web3
client: TesseraRegistry's getRecord and isRegistered, the IdentityRegistry's ownerOf and tokenURI)
and compared with what the command printed, and with Tessera's index (`chain_registry_records`) once
the registry follower has run. On `database` the same steps print the same things, minus the chain.

Jobs run as the session runs them: eagerly after commit in the web process on SQLite (this
process, so the settings a test changes reach them), in the session's worker on PostgreSQL + Redis,
restarted with the evm settings for the `evm` run. `CHAIN_CONFIRMATIONS` is 0 and the node mines
each transaction at once, so no job waits for blocks.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from eth_account import Account

from app.chain.settings import DATABASE, EVM
from app.chain.typed_data import ZERO_ADDRESS
from app.client.cli import main
from tests.chain.conftest import CHAIN_ID, RELAYER, Node, follow_index, indexed_record, worker_started_with
from tests.support.agents import LiveServer, claim_key_over_http
from tests.support.config import change_settings
from tests.support.environment import USING_POSTGRES

CARD_URI = "https://echo.example/.well-known/agent-card.json"
UNREGISTERED = (ZERO_ADDRESS, ZERO_ADDRESS, "")


@dataclass
class Chain:
    """The test node read by a plain web3 client, and what Tessera's index says of it."""

    app: object
    anvil: Node
    registry: object
    identity: object

    def record(self, did: str) -> tuple[str, str, str]:
        """getRecord(did) by eth_call: (agent, owner, cardURI)."""
        return tuple(self.registry.functions.getRecord(did).call())

    def registered(self, did: str) -> bool:
        return self.registry.functions.isRegistered(did).call()

    def events(self, name: str, did: str) -> list:
        """The registry's `name` events of `did`, from the node's logs."""
        return [log for log in getattr(self.registry.events, name)().get_logs(from_block=0) if log.args.did == did]

    def check_index(self, did: str) -> tuple[str, str, str]:
        """Follow the registry into the index, which must then hold the chain's record (none when
        the DID is not registered); the chain's record."""
        follow_index(self.app, self.anvil)
        on_chain = self.record(did)
        assert indexed_record(self.app, did) == (on_chain if self.registered(did) else None)
        return on_chain


@pytest.fixture(params=[DATABASE, EVM])
def chain(request, app, server, real_worker, monkeypatch) -> Iterator[Chain | None]:
    """The backend of this run: None for `database`, else the chain the jobs write (in the worker too)."""
    if request.param == DATABASE:
        change_settings(
            monkeypatch,
            app,
            AGENT_REGISTRY_BACKEND=DATABASE,
            AGENT_NETWORK_URL=server.url,
            AGENT_CLAIM_RATE_LIMIT="10000 per hour",
            AGENT_CHALLENGE_RATE_LIMIT="10000 per minute",
        )
        yield None
        return
    anvil, contracts = request.getfixturevalue("anvil"), request.getfixturevalue("contracts")
    # The database backend's contract version, which the chain's contract (1.7.0) overrides.
    settings = {**request.getfixturevalue("evm_settings"), "CHAIN_CONFIRMATIONS": "0"}
    settings["AGENT_REGISTRY_VERSION"] = "1.6.9"
    change_settings(monkeypatch, app, **settings)
    with worker_started_with(real_worker, settings if USING_POSTGRES else None):
        yield Chain(app, anvil, contracts.registry, request.getfixturevalue("identity"))


@pytest.fixture
def tessera(server: LiveServer, tmp_path, monkeypatch):
    """`tessera --json ...` run in process as a user runs it: in a directory of its own, the key kept
    by `tessera login` in a config directory of its own; returns the printed JSON."""
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    env = {
        "TESSERA_NETWORK_URL": server.url,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TESSERA_JOB_TIMEOUT": "30",
        "TESSERA_ENV": None,
        "TESSERA_API_KEY": None,
        "TESSERA_PRODUCTION_URL": None,
    }

    def run(*args: str, stdin: str | None = None) -> dict:
        result = runner.invoke(main, ["--json", *args], env=env, input=stdin)
        assert result.exit_code == 0, (args, result.output)
        return json.loads(result.stdout)

    return run


def test_the_agent_walkthrough(server, chain: Chain | None, tessera):
    key = claim_key_over_http(server)
    address = Account.from_key(key).address

    stored = tessera("login", stdin=key + "\n")
    assert stored["env"] == "testnet" and stored["address"] == address
    account = tessera("whoami")
    did = account["did"]
    assert did.startswith("did:tessera:") and account["address"] == address and account["balance"] == 1000
    if chain:
        assert not chain.registered(did) and chain.check_index(did) == UNREGISTERED

    scaffold = tessera("agent", "create-card", "--name", "Echo", "--description", "Echoes what it is sent",
                       "--image", "https://echo.example/echo.png", "--a2a-url", CARD_URI, "--no-mcp")  # fmt: skip
    assert scaffold["placeholders"] == [] and scaffold["card"]["services"][-1]["endpoint"] == did
    written = Path("agent-card.json").read_bytes()

    hosted = tessera("host-card", "--file", "agent-card.json")
    assert hosted["state"] == "succeeded", hosted
    result = hosted["result"]
    assert result["did"] == did and result["charged"] == 10 and result["balance"] == 990
    public_url = f"{server.url}/api/agent-card/{did}"
    assert result["public_url"].endswith(f"/api/agent-card/{did}")  # the worker's own BASE_URL on PostgreSQL
    with server.http() as http:
        card = http.get(public_url)
        assert card.status_code == 200
        document = http.get(f"/api/did/{did}")
        assert document.status_code == 200 and document.json()["id"] == did and "service" not in document.json()
    if chain:
        agent_id = result["transaction"]["agentId"]
        assert isinstance(agent_id, int), "a number, as in the card's registrations and the registry view"
        identities = chain.identity.events.Registered().get_logs(from_block=0)
        assert [log.args.agentId for log in identities] == [agent_id]
        assert identities[0].transactionHash.to_0x_hex() == result["transaction"]["txHash"]
        assert chain.identity.functions.ownerOf(agent_id).call() == RELAYER
        assert chain.identity.functions.tokenURI(agent_id).call() == result["public_url"] == public_url
        agent_registry = f"eip155:{CHAIN_ID}:{chain.identity.address}"
        assert card.json()["registrations"] == [{"agentId": agent_id, "agentRegistry": agent_registry}]
        assert not chain.registered(did) and chain.check_index(did) == UNREGISTERED  # no registry record yet
    else:
        assert card.content == written

    done = tessera("set-card", "--uri", CARD_URI)
    assert done["state"] == "succeeded" and done["result"]["did"] == did, done
    if chain:
        sent = {step["step"]: step for step in done["result"]["transactions"]}
        assert list(sent) == ["record", "identity-uri"] and {step["status"] for step in sent.values()} == {1}
        assert chain.registered(did) and chain.check_index(did) == (address, ZERO_ADDRESS, CARD_URI)
        registered = chain.events("Registered", did)
        assert [log.transactionHash.to_0x_hex() for log in registered] == [sent["record"]["txHash"]]
        assert chain.identity.functions.tokenURI(agent_id).call() == CARD_URI

    document = tessera("did", "get", did)
    assert document["id"] == did
    assert document["service"] == [{"id": f"{did}#agent", "type": "AgentService", "serviceEndpoint": CARD_URI}]
    assert document["verificationMethod"][0]["blockchainAccountId"].endswith(f":{address}")

    record = tessera("agent", "registry", did, "--full")
    assert (record["did"], record["address"], record["owner"], record["card_uri"]) == (did, address, None, CARD_URI)
    assert record["card"]["hosted"] is True and record["card"]["published"] is True
    assert record["contract"]["name"] == "agent-registry"
    # The history --full promises: the record's writes, newest first, who asked and what each cost.
    history = [(entry["operation"], entry["by"], entry["charged"], entry["job"]) for entry in record["history"]]
    assert history == [("set-card", did, 5, done["id"]), ("host-card", did, 10, hosted["id"])]
    if chain:
        assert record["contract"]["version"] == chain.registry.functions.version().call() == "1.7.0"
        assert chain.check_index(did) == (record["address"], ZERO_ADDRESS, record["card_uri"])
        assert record["identity"] == {"agentId": agent_id, "agentRegistry": agent_registry}
        set_card_sent = {(step["step"], step["txHash"]) for step in done["result"]["transactions"]}
        assert {(step["step"], step["txHash"]) for step in record["history"][0]["transactions"]} == set_card_sent
        assert [step["step"] for step in record["history"][1]["transactions"]] == ["identity"]
    else:
        assert record["identity"] is None and all(entry["transactions"] == [] for entry in record["history"])

    unpublished = tessera("card-unpublish", "--yes")
    assert unpublished["state"] == "succeeded" and unpublished["result"]["did"] == did, unpublished
    assert httpx.get(public_url, timeout=10).status_code == 404
    assert tessera("agent", "registry", did, "--full")["card"]["published"] is False
    if chain:  # the chain's record and identity stay as they were: the tokenURI names set-card's card
        assert chain.check_index(did) == (address, ZERO_ADDRESS, CARD_URI)
        assert chain.identity.functions.tokenURI(agent_id).call() == CARD_URI
        assert unpublished["result"]["transactions"] == []

    gone = tessera("agent", "deregister", "--yes")
    assert gone["state"] == "succeeded" and gone["result"]["did"] == did, gone
    assert httpx.get(f"{server.url}/api/did/{did}", timeout=10).status_code == 410
    if chain:
        assert [step["step"] for step in gone["result"]["transactions"]] == ["record", "identity-uri"]
        assert not chain.registered(did) and chain.check_index(did) == UNREGISTERED
        deregistered = [log.transactionHash.to_0x_hex() for log in chain.events("Deregistered", did)]
        assert deregistered == [gone["result"]["transactions"][0]["txHash"]]
        assert len(chain.events("Registered", did)) == 1 and chain.events("CardSet", did) == []
        # The identity stays (an ERC-721 token is not burnt), its registration saying the agent is gone.
        registration = registration_at(chain.identity.functions.tokenURI(agent_id).call())
        assert registration["active"] is False and registration["name"] == "Echo"
        assert registration["description"].startswith("Deregistered from ")
        assert registration["registrations"] == [{"agentId": agent_id, "agentRegistry": agent_registry}]


def registration_at(token_uri: str) -> dict:
    """The registration file a `data:application/json;base64,` tokenURI holds, as an explorer reads it."""
    prefix = "data:application/json;base64,"
    assert token_uri.startswith(prefix), token_uri
    return json.loads(base64.b64decode(token_uri[len(prefix) :]))


@pytest.mark.parametrize("chain", [EVM], indirect=True)
def test_an_unpublished_card_leaves_its_identity_inactive_until_it_is_hosted_again(server, chain: Chain, tessera):
    """The identity's tokenURI named the hosted card: unpublished, the card's URL would answer 404, so
    the URI says the agent is not active; hosting a card again points it at the card."""
    key = claim_key_over_http(server)
    tessera("login", stdin=key + "\n")
    did = tessera("whoami")["did"]
    tessera("agent", "create-card", "--name", "Lapse", "--description", "Comes and goes",
            "--image", "https://lapse.example/lapse.png", "--a2a-url", CARD_URI, "--no-mcp")  # fmt: skip
    hosted = tessera("host-card", "--file", "agent-card.json")
    agent_id, public_url = hosted["result"]["transaction"]["agentId"], hosted["result"]["public_url"]
    assert chain.identity.functions.tokenURI(agent_id).call() == public_url

    unpublished = tessera("card-unpublish", "--yes")
    assert unpublished["state"] == "succeeded", unpublished
    [step] = unpublished["result"]["transactions"]
    assert step["step"] == "identity-uri" and step["status"] == 1
    registration = registration_at(chain.identity.functions.tokenURI(agent_id).call())
    assert registration["active"] is False and registration["name"] == "Lapse"
    assert registration["description"].startswith("Its card was unpublished from ")
    assert registration["registrations"][0]["agentId"] == agent_id

    again = tessera("host-card", "--file", "agent-card.json")
    assert again["state"] == "succeeded" and again["result"]["transactions"][0]["step"] == "identity-uri", again
    assert chain.identity.functions.tokenURI(agent_id).call() == public_url
    assert not chain.registered(did)  # no registry record on chain: only its identity was written


def _as(server: LiveServer, key: str):
    """`tessera --json ...` run with `key` (TESSERA_API_KEY, as scripts pass it); (exit code, printed JSON)."""
    runner = CliRunner()
    env = {"TESSERA_NETWORK_URL": server.url, "TESSERA_API_KEY": key, "TESSERA_JOB_TIMEOUT": "30",
           "TESSERA_ENV": None, "TESSERA_PRODUCTION_URL": None}  # fmt: skip

    def run(*args: str, code: int = 0) -> dict:
        result = runner.invoke(main, ["--json", *args], env=env)
        assert result.exit_code == code, (args, result.output)
        return json.loads(result.stdout)

    return run


def test_the_organisation_walkthrough(server, chain: Chain | None, tmp_path, monkeypatch):
    """An organisation acting for its agent (the spec's step 4: host-card with --owner and --agent
    and a consent link): consent, the agent's approval, the organisation's host-card and set-card
    for it, the agent's deregistration refused while an owner is named, then the agent's revocation."""
    monkeypatch.chdir(tmp_path)
    agent_key, org_key = claim_key_over_http(server), claim_key_over_http(server, "organisation")
    agent, org = _as(server, agent_key), _as(server, org_key)
    did, org_did = agent("whoami")["did"], org("whoami")["did"]
    agent_address, org_address = Account.from_key(agent_key).address, Account.from_key(org_key).address

    link = org("consent", "request", "--owner", org_did, "--agent", did)["consent_url"]
    approved = agent("consent", "approve", link, "--owner", org_did, "--yes")
    assert approved["state"] == "succeeded", approved
    if chain:
        assert chain.check_index(did) == (agent_address, org_address, "")  # the approval registered it, owned

    org("agent", "create-card", "--name", "Echo", "--description", "Echoes what it is sent", "--image",
        "https://echo.example/echo.png", "--did", did, "--a2a-url", CARD_URI, "--no-mcp")  # fmt: skip
    hosted = org("host-card", "--file", "agent-card.json", "--owner", org_did, "--agent", did)
    assert hosted["state"] == "succeeded" and hosted["result"]["did"] == did, hosted
    public_url = f"{server.url}/api/agent-card/{did}"
    assert httpx.get(public_url, timeout=10).status_code == 200
    if chain:
        agent_id = int(hosted["result"]["transaction"]["agentId"])
        assert chain.identity.functions.tokenURI(agent_id).call() == public_url
        assert chain.check_index(did) == (agent_address, org_address, "")

    done = org("set-card", "--uri", CARD_URI, "--agent", did)
    assert done["state"] == "succeeded", done
    if chain:  # signed by the owner; the registry view is the index's once the follower has read it
        assert chain.check_index(did) == (agent_address, org_address, CARD_URI)
        assert chain.identity.functions.tokenURI(agent_id).call() == CARD_URI
    record = agent("agent", "registry", did, "--full")
    assert (record["owner"], record["card_uri"]) == (org_did, CARD_URI)

    refused = agent("agent", "deregister", "--yes", code=1)  # the spec's one stated refusal
    assert org_did in refused["error"]["message"]
    if chain:
        assert chain.events("Deregistered", did) == [] and chain.registered(did)

    revoked = agent("agent", "revoke-owner", "--yes")
    assert revoked["state"] == "succeeded", revoked
    if chain:
        assert chain.check_index(did) == (agent_address, ZERO_ADDRESS, CARD_URI)
    assert agent("agent", "registry", did, "--full")["owner"] is None
