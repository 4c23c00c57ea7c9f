"""Ethereum account primitives: keccak-256, EIP-55 addresses, EIP-191 personal_sign, signing digests.

Pure module (no Flask). Signatures are the 65-byte ``r || s || v`` form wallets produce;
recovery accepts only canonical low-s signatures so one message has exactly one valid signature.
"""

from __future__ import annotations

import re

import coincurve
from Crypto.Hash import keccak

SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_HALF_ORDER = SECP256K1_ORDER // 2
_ADDRESS_RE = re.compile(r"^0x[0-9a-fA-F]{40}$")
_PRIVATE_KEY_RE = re.compile(r"^(0x)?[0-9a-fA-F]{64}$")


class InvalidSignature(ValueError):
    """The signature is malformed, non-canonical (high s) or does not recover a key."""


class InvalidKey(ValueError):
    """The text is not a secp256k1 private key (32 bytes, 0x-prefixed hex, in range)."""


class InvalidAddress(ValueError):
    """The text is not a 0x-prefixed 20-byte address, or its EIP-55 checksum is wrong."""


def keccak256(data: bytes) -> bytes:
    """Return the Keccak-256 digest (Ethereum's pre-standard SHA-3 padding) of ``data``."""
    return keccak.new(digest_bits=256, data=data).digest()


def to_checksum_address(address: str | bytes) -> str:
    """Return the EIP-55 mixed-case form of a 20-byte address given as bytes or hex text."""
    if isinstance(address, bytes):
        if len(address) != 20:
            raise InvalidAddress("an address is 20 bytes")
        lower = address.hex()
    else:
        if not _ADDRESS_RE.match(address):
            raise InvalidAddress("an address is 0x followed by 40 hex digits")
        lower = address[2:].lower()
    digest = keccak256(lower.encode("ascii")).hex()
    return "0x" + "".join(ch.upper() if ch.isalpha() and int(digest[i], 16) >= 8 else ch for i, ch in enumerate(lower))


def is_checksum_address(address: str) -> bool:
    """Tell whether ``address`` is a well-formed address written exactly in its EIP-55 form."""
    try:
        return to_checksum_address(address) == address
    except InvalidAddress:
        return False


def parse_address(address: str) -> str:
    """Return the checksummed address; all-lower or all-upper hex is accepted, wrong mixed case is not.

    Raises ``InvalidAddress``.
    """
    checksummed = to_checksum_address(address)
    body = address[2:]
    if body not in (body.lower(), body.upper()) and checksummed != address:
        raise InvalidAddress("the address's EIP-55 checksum does not match")
    return checksummed


def address_from_public_key(public_key: bytes) -> str:
    """Return the checksummed address of a secp256k1 public key (compressed or uncompressed SEC1)."""
    try:
        uncompressed = coincurve.PublicKey(public_key).format(compressed=False)
    except ValueError as exc:
        raise InvalidKey("not a secp256k1 public key") from exc
    return to_checksum_address(keccak256(uncompressed[1:])[-20:])


def parse_private_key(text: str) -> bytes:
    """Return the 32 key bytes of a hex private key (``0x`` prefix optional). Raises ``InvalidKey``."""
    if not isinstance(text, str) or not _PRIVATE_KEY_RE.match(text.strip()):
        raise InvalidKey("an agent key is 32 bytes written as 0x-prefixed hex")
    secret = bytes.fromhex(text.strip().removeprefix("0x"))
    if not 0 < int.from_bytes(secret, "big") < SECP256K1_ORDER:
        raise InvalidKey("the agent key is outside the secp256k1 range")
    return secret


def generate_private_key() -> str:
    """Return a fresh random private key as 0x-prefixed hex (used by the network's claim page)."""
    return "0x" + coincurve.PrivateKey().secret.hex()


def address_from_private_key(private_key: str | bytes) -> str:
    """Return the checksummed address that belongs to a private key (hex text or 32 bytes)."""
    secret = parse_private_key(private_key) if isinstance(private_key, str) else private_key
    return address_from_public_key(coincurve.PrivateKey(secret).public_key.format(compressed=False))


def personal_message_hash(message: str | bytes) -> bytes:
    """Return the EIP-191 version 0x45 hash that ``personal_sign`` signs for ``message``."""
    data = message.encode("utf-8") if isinstance(message, str) else message
    prefix = b"\x19Ethereum Signed Message:\n" + str(len(data)).encode("ascii")
    return keccak256(prefix + data)


def sign_personal_message(message: str | bytes, private_key: str | bytes) -> str:
    """Sign ``message`` as ``personal_sign`` does; return 0x-hex of r || s || v with v in {27, 28}.

    The signature is deterministic (RFC 6979) and always low-s.
    """
    return sign_digest(personal_message_hash(message), private_key)


def sign_digest(digest: bytes, private_key: str | bytes) -> str:
    """Sign a 32-byte digest (EIP-191 or EIP-712); return 0x-hex of r || s || v with v in {27, 28}.

    The signature is deterministic (RFC 6979) and always low-s.
    """
    secret = parse_private_key(private_key) if isinstance(private_key, str) else private_key
    raw = coincurve.PrivateKey(secret).sign_recoverable(digest, hasher=None)
    return "0x" + (raw[:64] + bytes([raw[64] + 27])).hex()


def decode_signature(signature: str | bytes) -> bytes:
    """Return the 65 signature bytes from bytes or (0x-prefixed) hex. Raises ``InvalidSignature``."""
    if isinstance(signature, str):
        text = signature.removeprefix("0x")
        try:
            signature = bytes.fromhex(text)
        except ValueError as exc:
            raise InvalidSignature("the signature is not hex") from exc
    if len(signature) != 65:
        raise InvalidSignature("a signature is 65 bytes (r || s || v)")
    return signature


def recover_personal_signer(message: str | bytes, signature: str | bytes) -> str:
    """Return the checksummed address that signed ``message`` with ``personal_sign``.

    ``v`` may be 27/28 or 0/1. Zero or out-of-range ``r``/``s`` and high-s signatures are refused
    with ``InvalidSignature``, as is any signature from which no key can be recovered.
    """
    return recover_digest_signer(personal_message_hash(message), signature)


def recover_digest_signer(digest: bytes, signature: str | bytes) -> str:
    """Return the checksummed address that signed the 32-byte ``digest`` (EIP-191 or EIP-712).

    The same rules as ``recover_personal_signer``: low-s only, ``v`` 27/28 or 0/1.
    """
    raw = decode_signature(signature)
    r = int.from_bytes(raw[:32], "big")
    s = int.from_bytes(raw[32:64], "big")
    v = raw[64]
    if not 0 < r < SECP256K1_ORDER or not 0 < s < SECP256K1_ORDER:
        raise InvalidSignature("r and s must lie in 1..n-1")
    if s > _HALF_ORDER:
        raise InvalidSignature("high-s signatures are not accepted (EIP-2)")
    if v in (27, 28):
        recovery_id = v - 27
    elif v in (0, 1):
        recovery_id = v
    else:
        raise InvalidSignature("v must be 27, 28, 0 or 1")
    try:
        public_key = coincurve.PublicKey.from_signature_and_message(
            raw[:64] + bytes([recovery_id]), digest, hasher=None
        )
    except ValueError as exc:
        raise InvalidSignature("no public key can be recovered from this signature") from exc
    return address_from_public_key(public_key.format(compressed=False))
