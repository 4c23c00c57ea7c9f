"""Wire shapes of the agent network API: request schemas (``*In``, ``*Args``) and the views
routes and tasks dump from the services' models and dataclasses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import marshmallow as ma

from app.agents.consents import consent_url
from app.db import isoformat


class Timestamp(ma.fields.String):
    """A datetime written as ISO 8601 UTC with `Z` (documented as a plain string)."""

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return isoformat(value)


class ComputedString(ma.fields.String):
    """A string computed from the whole object being dumped (output only)."""

    def __init__(self, compute: Callable[[Any], str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.compute = compute

    def get_value(self, obj: Any, attr: str, accessor: Any = None, default: Any = ma.missing) -> str:
        return self.compute(obj)


class ChallengeIn(ma.Schema):
    address = ma.fields.String(required=True, metadata={"description": "0x-prefixed 20-byte address."})


class Challenge(ma.Schema):
    message = ma.fields.String(required=True, metadata={"description": "EIP-4361 message to sign."})
    nonce = ma.fields.String(required=True)
    chain_id = ma.fields.Integer(
        required=True,
        metadata={"description": "The network's EIP-155 chain id (`AGENT_CHAIN_ID`), the message's `Chain ID`."},
    )
    expires_at = Timestamp(required=True)


class ChallengeEnvelope(ma.Schema):
    data = ma.fields.Nested(Challenge, required=True)


class VerifyIn(ma.Schema):
    message = ma.fields.String(required=True, validate=ma.validate.Length(max=4096))
    signature = ma.fields.String(
        required=True, metadata={"description": "EIP-191 personal_sign signature, 65 bytes hex (low s)."}
    )


class Session(ma.Schema):
    token = ma.fields.String(required=True, metadata={"description": "Bearer token for /api calls."})
    token_type = ma.fields.String(required=True)
    expires_at = Timestamp(required=True)
    did = ma.fields.String(
        required=True, attribute="account.did", metadata={"description": "The DID bound to the key."}
    )
    address = ma.fields.String(required=True, attribute="account.address")
    kind = ma.fields.String(required=True, attribute="account.kind")


class SessionEnvelope(ma.Schema):
    data = ma.fields.Nested(Session, required=True)


class Account(ma.Schema):
    did = ma.fields.String(required=True)
    address = ma.fields.String(required=True)
    kind = ma.fields.String(required=True, validate=ma.validate.OneOf(["agent", "organisation"]))
    balance = ma.fields.Integer(required=True)
    created_at = Timestamp(required=True)
    deactivated = ma.fields.Boolean(required=True)


class AccountEnvelope(ma.Schema):
    data = ma.fields.Nested(Account, required=True)


class Pricing(ma.Schema):
    unit = ma.fields.String(required=True)
    prices = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer(), required=True)


class PricingEnvelope(ma.Schema):
    data = ma.fields.Nested(Pricing, required=True)


class LedgerEntry(ma.Schema):
    amount = ma.fields.Integer(required=True)
    reason = ma.fields.String(required=True)
    subject_did = ma.fields.String(allow_none=True)
    job_id = ma.fields.String(allow_none=True)
    balance_after = ma.fields.Integer(required=True)
    created_at = Timestamp(required=True)


class Ledger(ma.Schema):
    did = ma.fields.String(required=True, attribute="account.did")
    balance = ma.fields.Integer(required=True, attribute="account.balance")
    entries = ma.fields.List(ma.fields.Nested(LedgerEntry), required=True)


class LedgerEnvelope(ma.Schema):
    data = ma.fields.Nested(Ledger, required=True)


class CardView(ma.Schema):
    did = ma.fields.String(required=True)
    published = ma.fields.Boolean(required=True)
    card = ma.fields.Dict(required=True)
    size = ma.fields.Integer(required=True)
    etag = ma.fields.String(required=True)
    public_url = ma.fields.String(allow_none=True)
    updated_at = Timestamp(required=True)


class CardViewEnvelope(ma.Schema):
    data = ma.fields.Nested(CardView, required=True)


_SIGNATURE = {
    "description": "With AGENT_REGISTRY_BACKEND=evm: the agent's EIP-712 signature (0x + 65 bytes hex) of the "
    "typed data from POST .../registry/typed-data."
}
_DEADLINE = {"description": "With AGENT_REGISTRY_BACKEND=evm: the deadline (Unix seconds) of that typed data."}
# Fits the JSON payload of a job and the contract's uint256.
_MAX_DEADLINE = 2**53


def _deadline() -> ma.fields.Integer:
    """The `deadline` of the typed data a chain signature covers (each schema holds its own field)."""
    return ma.fields.Integer(
        load_default=None, strict=True, validate=ma.validate.Range(0, _MAX_DEADLINE), metadata=_DEADLINE
    )


class CardUriIn(ma.Schema):
    uri = ma.fields.String(required=True, metadata={"description": "Absolute URI, at most 2048 bytes."})
    signature = ma.fields.String(load_default=None, metadata=_SIGNATURE)
    deadline = _deadline()


class DeregisterIn(ma.Schema):
    signature = ma.fields.String(load_default=None, metadata=_SIGNATURE)
    deadline = _deadline()


class TypedDataIn(ma.Schema):
    operation = ma.fields.String(
        required=True,
        validate=ma.validate.OneOf(["set-card", "deregister", "set-owner", "approve-consent", "revoke-owner"]),
        metadata={
            "description": "set-card, deregister; set-owner (the organisation asking to own the agent, before "
            "POST /api/consents), approve-consent (the agent, before approving), revoke-owner (the agent)."
        },
    )
    uri = ma.fields.String(load_default=None, metadata={"description": "The card URI (set-card only)."})
    owner = ma.fields.String(
        load_default=None, metadata={"description": "The owner organisation's DID (set-owner, revoke-owner)."}
    )
    consent = ma.fields.String(load_default=None, metadata={"description": "The consent's id (approve-consent)."})


class TypedDataOut(ma.Schema):
    operation = ma.fields.String(required=True)
    typed_data = ma.fields.Dict(
        required=True,
        allow_none=True,
        metadata={
            "description": "EIP-712 typed data (eth_signTypedData_v4) to sign with the key named by signer: "
            "Register, SetCard, SetOwner or Deregister of TesseraRegistry, with the DID's nonce and a deadline. "
            "null: the write needs no signature (the database registry, a deregistration of a DID with no record "
            "on chain, a revocation of an owner the chain does not name)."
        },
    )
    signer = ma.fields.String(
        required=True,
        allow_none=True,
        metadata={"description": "The address whose signature the registry accepts for this write."},
    )


class TypedDataEnvelope(ma.Schema):
    data = ma.fields.Nested(TypedDataOut, required=True)


class RegistryArgs(ma.Schema):
    full = ma.fields.Boolean(load_default=False)


class ContractArgs(ma.Schema):
    name = ma.fields.String(required=True)


class Contract(ma.Schema):
    name = ma.fields.String(required=True)
    version = ma.fields.String(required=True)


class RegistryCard(ma.Schema):
    hosted = ma.fields.Boolean(required=True, metadata={"description": "Whether a card is hosted here."})
    published = ma.fields.Boolean(required=True, metadata={"description": "Whether its public copy is served."})
    size = ma.fields.Integer(allow_none=True, required=True)
    etag = ma.fields.String(allow_none=True, required=True)
    hosted_by = ma.fields.String(allow_none=True, required=True, metadata={"description": "DID that hosted it."})
    public_url = ma.fields.String(allow_none=True, required=True)


class RegistryIdentity(ma.Schema):
    agent_id = ma.fields.Integer(required=True, data_key="agentId", metadata={"description": "ERC-8004 `agentId`."})
    agent_registry = ma.fields.String(
        required=True, data_key="agentRegistry", metadata={"description": "`eip155:<chainId>:<IdentityRegistry>`."}
    )


class RegistryTransaction(ma.Schema):
    step = ma.fields.String(required=True)
    tx_hash = ma.fields.String(required=True, data_key="txHash", allow_none=True)


class RegistryHistoryEntry(ma.Schema):
    operation = ma.fields.String(
        required=True,
        validate=ma.validate.OneOf(["host-card", "set-card", "card-unpublish", "approve-consent"]),
    )
    at = Timestamp(required=True)
    by = ma.fields.String(required=True, allow_none=True, metadata={"description": "The DID that asked (and paid)."})
    job = ma.fields.String(required=True, allow_none=True)
    charged = ma.fields.Integer(required=True, allow_none=True)
    owner = ma.fields.String(required=True, allow_none=True, metadata={"description": "The owner an approval named."})
    transactions = ma.fields.List(ma.fields.Nested(RegistryTransaction), required=True)


class RegistryRecordOut(ma.Schema):
    """A registry record; the fields after ``updated_at`` only with ``full=true``."""

    FULL_ONLY = ("address", "blockchain_account_id", "kind", "created_at", "did_bound_at", "card", "contract",
                 "identity", "history")  # fmt: skip

    did = ma.fields.String(required=True, attribute="record.did")
    owner = ma.fields.String(
        required=True,
        allow_none=True,
        attribute="record.owner_did",
        metadata={"description": "Owner organisation's DID."},
    )
    card_uri = ma.fields.String(required=True, allow_none=True, attribute="record.card_uri")
    updated_at = Timestamp(required=True, attribute="record.updated_at")
    address = ma.fields.String(attribute="record.address")
    blockchain_account_id = ma.fields.String(metadata={"description": "CAIP-10 id of the agent key."})
    kind = ma.fields.String(attribute="account.kind", validate=ma.validate.OneOf(["agent", "organisation"]))
    created_at = Timestamp(attribute="record.created_at")
    did_bound_at = Timestamp(attribute="account.did_bound_at")
    card = ma.fields.Nested(RegistryCard)
    contract = ma.fields.Nested(Contract)
    identity = ma.fields.Nested(
        RegistryIdentity,
        allow_none=True,
        metadata={"description": "The agent's ERC-8004 identity (AGENT_REGISTRY_BACKEND=evm, once a card was hosted)."},
    )
    history = ma.fields.List(
        ma.fields.Nested(RegistryHistoryEntry),
        metadata={"description": "The record's newest writes (at most 20), newest first."},
    )

    @ma.post_dump(pass_original=True)
    def _omit_details(self, data: dict[str, Any], original: Any, **kwargs: Any) -> dict[str, Any]:
        if not original.full:
            for name in self.FULL_ONLY:
                data.pop(name, None)
        return data


class RegistryEnvelope(ma.Schema):
    data = ma.fields.Nested(RegistryRecordOut, required=True, metadata={"description": "The registry record."})


class ContractEnvelope(ma.Schema):
    data = ma.fields.Nested(Contract, required=True)


class ConsentIn(ma.Schema):
    owner = ma.fields.String(required=True, metadata={"description": "The organisation's DID (the caller)."})
    agent = ma.fields.String(required=True, metadata={"description": "The agent's DID."})
    signature = ma.fields.String(
        load_default=None,
        metadata={
            "description": "With AGENT_REGISTRY_BACKEND=evm: the organisation's EIP-712 signature of the typed data "
            "from POST /api/agents/{agent}/registry/typed-data (operation set-owner)."
        },
    )
    deadline = _deadline()


class ConsentOut(ma.Schema):
    id = ma.fields.String(required=True)
    owner = ma.fields.String(required=True, attribute="owner_did")
    agent = ma.fields.String(required=True, attribute="agent_did")
    state = ma.fields.String(required=True, validate=ma.validate.OneOf(["pending", "approved", "revoked"]))
    message = ma.fields.String(required=True, metadata={"description": "Text the agent signs to approve."})
    consent_url = ComputedString(consent_url, required=True)
    created_at = Timestamp(required=True)
    expires_at = Timestamp(required=True)
    approved_at = Timestamp(allow_none=True)


class ConsentEnvelope(ma.Schema):
    data = ma.fields.Nested(ConsentOut, required=True)


class RevokeOwnerIn(ma.Schema):
    owner = ma.fields.String(required=True, metadata={"description": "The owner organisation's DID."})
    registry_signature = ma.fields.String(
        load_default=None,
        metadata={
            "description": "With AGENT_REGISTRY_BACKEND=evm and a record on chain naming the owner: the agent's "
            "EIP-712 signature of the typed data from POST .../registry/typed-data (operation revoke-owner)."
        },
    )
    deadline = _deadline()
    issued_at = ma.fields.String(
        required=True, metadata={"description": "RFC 3339 UTC time written in the message, within minutes of now."}
    )
    signature = ma.fields.String(
        required=True,
        metadata={
            "description": "personal_sign by the agent key of the revocation message: "
            "'<network host>: revoke the owner of your agent:\\n<agent DID>\\n\\nOwner: <owner DID>\\n"
            "Issued At: <issued_at>'."
        },
    )


class ApproveIn(ma.Schema):
    signature = ma.fields.String(required=True, metadata={"description": "personal_sign of the message."})
    registry_signature = ma.fields.String(
        load_default=None,
        metadata={
            "description": "With AGENT_REGISTRY_BACKEND=evm: the agent's EIP-712 signature of the typed data from "
            "POST /api/agents/{agent}/registry/typed-data (operation approve-consent)."
        },
    )


# -- job results (stored as the job's ``result``) ----------------------------------------------


class HostedCardOut(ma.Schema):
    did = ma.fields.String()
    size = ma.fields.Integer()
    etag = ma.fields.String()
    public_url = ma.fields.String()
    charged = ma.fields.Integer()
    balance = ma.fields.Integer()


class UnpublishedCardOut(ma.Schema):
    did = ma.fields.String()
    published = ma.fields.Boolean()
    charged = ma.fields.Integer()
    balance = ma.fields.Integer()


class RegisteredCardUriOut(ma.Schema):
    did = ma.fields.String()
    card_uri = ma.fields.String()
    charged = ma.fields.Integer()
    balance = ma.fields.Integer()


class DeregistrationOut(ma.Schema):
    did = ma.fields.String()
    deactivated = ma.fields.Boolean()
    charged = ma.fields.Integer()
    released_agents = ma.fields.Integer()


class ApprovedConsentOut(ma.Schema):
    agent = ma.fields.String()
    owner = ma.fields.String()
    consent = ma.fields.String()


class RevokedOwnerOut(ma.Schema):
    agent = ma.fields.String()
    revoked_owner = ma.fields.String()
