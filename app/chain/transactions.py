"""Transactions from the relayer: EIP-1559 fees, signed with the relayer key, sent raw.

Pure of Flask: callers pass a connected `Web3` and the key. A transaction the node would revert is
refused at gas estimation (`ContractLogicError`), before anything is sent.
"""

from __future__ import annotations

from typing import Any

from eth_account import Account
from hexbytes import HexBytes
from web3 import Web3
from web3.types import TxReceipt

# A fee cap of twice the base fee stays valid through six full blocks of base-fee rises.
BASE_FEE_HEADROOM = 2


def eip1559_fees(w3: Web3) -> dict[str, int]:
    """`maxFeePerGas` and `maxPriorityFeePerGas` for a transaction sent now."""
    base_fee = int(w3.eth.get_block("latest")["baseFeePerGas"])
    tip = int(w3.eth.max_priority_fee)
    return {"maxFeePerGas": BASE_FEE_HEADROOM * base_fee + tip, "maxPriorityFeePerGas": tip}


def send_transaction(
    w3: Web3, relayer_key: bytes, transaction: dict[str, Any], *, nonce: int | None = None
) -> HexBytes:
    """Sign `transaction` (`to`/`data`, or `data` alone to create a contract) and send it; the hash.

    `nonce` defaults to the relayer's pending transaction count.
    """
    sender = Account.from_key(relayer_key).address
    full = {
        **transaction,
        "from": sender,
        "chainId": w3.eth.chain_id,
        "nonce": w3.eth.get_transaction_count(sender, "pending") if nonce is None else nonce,
        "type": 2,
        **eip1559_fees(w3),
    }
    full["gas"] = w3.eth.estimate_gas(full)
    signed = Account.sign_transaction(full, relayer_key)
    return w3.eth.send_raw_transaction(signed.raw_transaction)


def wait_for_receipt(w3: Web3, tx_hash: HexBytes, *, timeout: float = 120.0) -> TxReceipt:
    """The receipt of `tx_hash` once it is mined (polling the node)."""
    return w3.eth.wait_for_transaction_receipt(tx_hash, timeout=timeout, poll_latency=0.2)
