"""Known-answer tests for keccak-256, EIP-55 addresses and EIP-191 personal_sign."""

import pytest

from app.agents import ethereum

# web3.js documentation example: eth.accounts.sign("Some data", key).
WEB3_KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
WEB3_ADDRESS = "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23"
WEB3_MESSAGE_HASH = "1da44b586eb0729ff70a73c326926f6ed5a25f5b056e7f47fbc6e58d86871655"
WEB3_SIGNATURE = (
    "0xb91467e570a6466aa9e9876cbcd013baba02900b8979d43fe208a4a4f339f5fd"
    "6007e74cd82e037b800186422fc2da167c747ef045e5d18a5f5d4300f8e1a0291c"
)

# EIP-55 specification test cases.
EIP55_ADDRESSES = [
    "0x52908400098527886E0F7030069857D2E4169EE7",
    "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
    "0xde709f2102306220921060314715629080e2fb77",
    "0x27b1fdb04752bbc536007a920d24acb045561c26",
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
]


def test_keccak256_of_empty_input_is_the_ethereum_value():
    assert ethereum.keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"


@pytest.mark.parametrize("address", EIP55_ADDRESSES)
def test_eip55_checksum_vectors(address):
    assert ethereum.to_checksum_address(address.lower()) == address
    assert ethereum.to_checksum_address(bytes.fromhex(address[2:])) == address
    assert ethereum.is_checksum_address(address)


def test_wrong_mixed_case_is_rejected_but_uniform_case_accepted():
    good = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
    broken = "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
    assert not ethereum.is_checksum_address(broken)
    with pytest.raises(ethereum.InvalidAddress):
        ethereum.parse_address(broken)
    assert ethereum.parse_address(good.lower()) == good
    assert ethereum.parse_address("0x" + good[2:].upper()) == good
    for malformed in ("5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x1234", "0x" + "g" * 40):
        with pytest.raises(ethereum.InvalidAddress):
            ethereum.parse_address(malformed)


def test_address_from_private_key_matches_web3_vector():
    assert ethereum.address_from_private_key(WEB3_KEY) == WEB3_ADDRESS


def test_personal_message_hash_matches_web3_vector():
    assert ethereum.personal_message_hash("Some data").hex() == WEB3_MESSAGE_HASH


def test_signing_is_deterministic_and_matches_web3_vector():
    assert ethereum.sign_personal_message("Some data", WEB3_KEY) == WEB3_SIGNATURE


def test_recovery_finds_the_signer_with_v_27_28_and_0_1():
    assert ethereum.recover_personal_signer("Some data", WEB3_SIGNATURE) == WEB3_ADDRESS
    raw = bytes.fromhex(WEB3_SIGNATURE[2:])
    assert ethereum.recover_personal_signer("Some data", raw[:64] + bytes([raw[64] - 27])) == WEB3_ADDRESS


def test_recovery_of_another_message_gives_another_address():
    assert ethereum.recover_personal_signer("Other data", WEB3_SIGNATURE) != WEB3_ADDRESS


def test_high_s_twin_of_a_valid_signature_is_rejected():
    raw = bytes.fromhex(WEB3_SIGNATURE[2:])
    s = int.from_bytes(raw[32:64], "big")
    twin_v = 28 if raw[64] == 27 else 27
    twin = raw[:32] + (ethereum.SECP256K1_ORDER - s).to_bytes(32, "big") + bytes([twin_v])
    with pytest.raises(ethereum.InvalidSignature, match="high-s"):
        ethereum.recover_personal_signer("Some data", twin)


@pytest.mark.parametrize(
    "signature",
    [
        "0x1234",
        "0x" + "zz" * 65,
        WEB3_SIGNATURE[:-2] + "1d",  # v = 29
        "0x" + "00" * 32 + WEB3_SIGNATURE[66:],  # r = 0
        WEB3_SIGNATURE[:66] + "00" * 32 + "1b",  # s = 0
        "0x" + "ff" * 32 + WEB3_SIGNATURE[66:],  # r >= n
    ],
)
def test_malformed_signatures_are_rejected(signature):
    with pytest.raises(ethereum.InvalidSignature):
        ethereum.recover_personal_signer("Some data", signature)


def test_generated_keys_sign_and_recover():
    key = ethereum.generate_private_key()
    signature = ethereum.sign_personal_message("hello tessera", key)
    raw = bytes.fromhex(signature[2:])
    assert int.from_bytes(raw[32:64], "big") <= ethereum.SECP256K1_ORDER // 2
    assert ethereum.recover_personal_signer("hello tessera", signature) == ethereum.address_from_private_key(key)


@pytest.mark.parametrize("key", ["0x12", "0x" + "00" * 32, "0x" + "ff" * 32, "not a key"])
def test_invalid_private_keys_are_rejected(key):
    with pytest.raises(ethereum.InvalidKey):
        ethereum.parse_private_key(key)
