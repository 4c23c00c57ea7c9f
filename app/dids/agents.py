"""DID documents of agents of this network (secp256k1 keys named by their EIP-155 account)."""

from __future__ import annotations

from typing import Any

from app.dids.documents import DID_CORE_CONTEXT

AGENT_DID_CONTEXTS = [DID_CORE_CONTEXT, "https://w3id.org/security/suites/secp256k1recovery-2020/v2"]


def agent_did_document(
    did: str, address: str, chain_id: int, *, owner_did: str | None = None, card_uri: str | None = None
) -> dict[str, Any]:
    """The DID document of an agent: its key as ``#owner``, its owner organisation as a second
    controller, and its card URI as an ``AgentService`` when one is advertised."""
    method_id = f"{did}#owner"
    document: dict[str, Any] = {
        "@context": list(AGENT_DID_CONTEXTS),
        "id": did,
        "verificationMethod": [
            {
                "id": method_id,
                "type": "EcdsaSecp256k1RecoveryMethod2020",
                "controller": did,
                "blockchainAccountId": f"eip155:{chain_id}:{address}",
            }
        ],
        "authentication": [method_id],
        "assertionMethod": [method_id],
    }
    if owner_did:
        document["controller"] = [did, owner_did]
    if card_uri:
        document["service"] = [{"id": f"{did}#agent", "type": "AgentService", "serviceEndpoint": card_uri}]
    return document


def deactivated_agent_document(did: str) -> dict[str, Any]:
    """What resolution shows of a deregistered agent's DID: its id only."""
    return {"@context": list(AGENT_DID_CONTEXTS), "id": did}
