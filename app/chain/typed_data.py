"""The EIP-712 messages TesseraRegistry accepts, and signing them with an agent's key.

Pure module (no Flask): the agent's side (the command line, tests) and the relayer build the same
typed data; the contract recomputes the digest and recovers the signer.
"""

from __future__ import annotations

from typing import Any

from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak

DOMAIN_NAME = "TesseraRegistry"
DOMAIN_VERSION = "1"
ZERO_ADDRESS = "0x" + "00" * 20

TYPES: dict[str, list[dict[str, str]]] = {
    "Register": [
        {"name": "did", "type": "string"},
        {"name": "agent", "type": "address"},
        {"name": "owner", "type": "address"},
        {"name": "cardURI", "type": "string"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint256"},
    ],
    "SetCard": [
        {"name": "did", "type": "string"},
        {"name": "cardURI", "type": "string"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint256"},
    ],
    "SetOwner": [
        {"name": "did", "type": "string"},
        {"name": "owner", "type": "address"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint256"},
    ],
    "Deregister": [
        {"name": "did", "type": "string"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint256"},
    ],
}


def registry_message(
    primary_type: str, message: dict[str, Any], *, chain_id: int, registry_address: str
) -> dict[str, Any]:
    """The full EIP-712 typed data of one registry write (`primary_type` one of `TYPES`)."""
    return {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            primary_type: TYPES[primary_type],
        },
        "primaryType": primary_type,
        "domain": {
            "name": DOMAIN_NAME,
            "version": DOMAIN_VERSION,
            "chainId": chain_id,
            "verifyingContract": registry_address,
        },
        "message": message,
    }


def sign_typed_data(typed_data: dict[str, Any], private_key: str | bytes) -> bytes:
    """The 65-byte signature (r || s || v, v in {27, 28}) of `typed_data` by `private_key`."""
    signed = Account.sign_message(encode_typed_data(full_message=typed_data), private_key)
    return bytes(signed.signature)


def typed_data_digest(typed_data: dict[str, Any]) -> bytes:
    """The 32-byte EIP-712 digest of `typed_data`: what the agent signs and the contract recovers from."""
    signable = encode_typed_data(full_message=typed_data)
    return keccak(b"\x19" + signable.version + signable.header + signable.body)
