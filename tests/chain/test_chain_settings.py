"""The chain settings: the relayer key is never shown, and bad values stop the service at start."""

from __future__ import annotations

import pytest

from app.chain.settings import ChainSettings
from app.settings import load
from tests.chain.conftest import RELAYER_KEY


def test_the_relayer_key_is_never_part_of_a_repr_or_an_error():
    settings = load(ChainSettings, {"CHAIN_RELAYER_KEY": RELAYER_KEY}, environ={})
    assert settings.relayer_key.secret == bytes.fromhex(RELAYER_KEY[2:])
    assert RELAYER_KEY[2:] not in repr(settings) and RELAYER_KEY[2:].upper() not in repr(settings)
    almost = RELAYER_KEY[:-1] + "g"
    with pytest.raises(ValueError) as raised:
        load(ChainSettings, {"CHAIN_RELAYER_KEY": almost}, environ={})
    assert "CHAIN_RELAYER_KEY" in str(raised.value) and almost[2:20] not in str(raised.value)
    with pytest.raises(ValueError):
        load(ChainSettings, {"CHAIN_RELAYER_KEY": "0x" + "00" * 32}, environ={})  # outside secp256k1


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AGENT_REGISTRY_BACKEND", "ipfs"),
        ("CHAIN_TESTNET_REGISTRY_ADDRESS", "0x1234"),
        ("CHAIN_PRODUCTION_IDENTITY_REGISTRY_ADDRESS", "not an address"),
        ("CHAIN_TESTNET_CHAIN_ID", "one"),
    ],
)
def test_a_bad_chain_setting_is_refused_by_name(name, value):
    with pytest.raises(ValueError, match=name):
        load(ChainSettings, {name: value}, environ={})


def test_the_network_picks_its_chain():
    settings = load(
        ChainSettings,
        {
            "CHAIN_TESTNET_CHAIN_ID": "31337",
            "CHAIN_PRODUCTION_CHAIN_ID": "8453",
            "CHAIN_TESTNET_RPC_URL": "http://n:8545",
        },
        environ={},
    )
    assert settings.registry_backend == "database"
    assert settings.chain("testnet").chain_id == 31337 and settings.chain("testnet").rpc_url == "http://n:8545"
    assert settings.chain("production").chain_id == 8453 and settings.chain("production").rpc_url is None
