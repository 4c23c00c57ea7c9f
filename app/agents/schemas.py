"""Wire shapes of the agent network API."""

from __future__ import annotations

import marshmallow as ma


class ChallengeIn(ma.Schema):
    address = ma.fields.String(required=True, metadata={"description": "0x-prefixed 20-byte address."})


class Challenge(ma.Schema):
    message = ma.fields.String(required=True, metadata={"description": "EIP-4361 message to sign."})
    nonce = ma.fields.String(required=True)
    expires_at = ma.fields.String(required=True)


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
    expires_at = ma.fields.String(required=True)
    did = ma.fields.String(required=True, metadata={"description": "The DID bound to the key."})
    address = ma.fields.String(required=True)
    kind = ma.fields.String(required=True)


class SessionEnvelope(ma.Schema):
    data = ma.fields.Nested(Session, required=True)


class Account(ma.Schema):
    did = ma.fields.String(required=True)
    address = ma.fields.String(required=True)
    kind = ma.fields.String(required=True, validate=ma.validate.OneOf(["agent", "organisation"]))
    balance = ma.fields.Integer(required=True)
    created_at = ma.fields.String(required=True)
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
    created_at = ma.fields.String(required=True)


class Ledger(ma.Schema):
    did = ma.fields.String(required=True)
    balance = ma.fields.Integer(required=True)
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
    updated_at = ma.fields.String(required=True)


class CardViewEnvelope(ma.Schema):
    data = ma.fields.Nested(CardView, required=True)


class CardUriIn(ma.Schema):
    uri = ma.fields.String(required=True, metadata={"description": "Absolute URI, at most 2048 bytes."})


class RegistryArgs(ma.Schema):
    full = ma.fields.Boolean(load_default=False)


class RegistryEnvelope(ma.Schema):
    data = ma.fields.Dict(required=True, metadata={"description": "The registry record."})


class ContractArgs(ma.Schema):
    name = ma.fields.String(required=True)


class Contract(ma.Schema):
    name = ma.fields.String(required=True)
    version = ma.fields.String(required=True)


class ContractEnvelope(ma.Schema):
    data = ma.fields.Nested(Contract, required=True)


class ConsentIn(ma.Schema):
    owner = ma.fields.String(required=True, metadata={"description": "The organisation's DID (the caller)."})
    agent = ma.fields.String(required=True, metadata={"description": "The agent's DID."})


class ConsentOut(ma.Schema):
    id = ma.fields.String(required=True)
    owner = ma.fields.String(required=True)
    agent = ma.fields.String(required=True)
    state = ma.fields.String(required=True, validate=ma.validate.OneOf(["pending", "approved", "revoked"]))
    message = ma.fields.String(required=True, metadata={"description": "Text the agent signs to approve."})
    consent_url = ma.fields.String(required=True)
    created_at = ma.fields.String(required=True)
    expires_at = ma.fields.String(required=True)
    approved_at = ma.fields.String(allow_none=True)


class ConsentEnvelope(ma.Schema):
    data = ma.fields.Nested(ConsentOut, required=True)


class RevokeOwnerIn(ma.Schema):
    owner = ma.fields.String(required=True, metadata={"description": "The owner organisation's DID."})
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

