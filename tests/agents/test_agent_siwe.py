"""EIP-4361 messages: round trip, the specification example, and malformed input."""

from datetime import UTC, datetime, timedelta

import pytest

from app.agents.siwe import InvalidSiweMessage, SiweMessage, parse_message

SPEC_EXAMPLE = (
    "service.org wants you to sign in with your Ethereum account:\n"
    "0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2\n"
    "\n"
    "I accept the ServiceOrg Terms of Service: https://service.org/tos\n"
    "\n"
    "URI: https://service.org/login\n"
    "Version: 1\n"
    "Chain ID: 1\n"
    "Nonce: 32891756\n"
    "Issued At: 2021-09-30T16:25:24Z\n"
    "Resources:\n"
    "- ipfs://bafybeiemxf5abjwjbikoz4mc3a3dla6ual3jsgpdr4cjr3oz3evfyavhwq/\n"
    "- https://example.com/my-web2-claim.json"
)
ISSUED = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)


def make_message(**overrides):
    fields = {
        "domain": "127.0.0.1:5000",
        "address": "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23",
        "statement": "Sign in to the Tessera agent network.",
        "uri": "http://127.0.0.1:5000/api/auth/verify",
        "chain_id": 31337,
        "nonce": "a1B2c3D4e5F6g7H8",
        "issued_at": ISSUED,
        "expiration_time": ISSUED + timedelta(minutes=5),
    }
    fields.update(overrides)
    return SiweMessage(**fields)


def test_spec_example_parses_and_renders_identically():
    message = parse_message(SPEC_EXAMPLE)
    assert message.domain == "service.org"
    assert message.address == "0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2"
    assert message.chain_id == 1
    assert message.nonce == "32891756"
    assert message.issued_at == datetime(2021, 9, 30, 16, 25, 24, tzinfo=UTC)
    assert len(message.resources) == 2
    assert message.to_text() == SPEC_EXAMPLE


def test_built_message_round_trips_with_every_optional_field():
    message = make_message(
        not_before=ISSUED,
        request_id="req-1",
        resources=("https://example.com/a",),
        scheme="https",
    )
    text = message.to_text()
    assert text.startswith("https://127.0.0.1:5000 wants you to sign in with your Ethereum account:\n")
    assert "Expiration Time: 2026-11-21T12:05:00Z" in text
    assert parse_message(text) == message


def test_message_without_statement_has_two_blank_lines():
    message = make_message(statement=None)
    text = message.to_text()
    assert "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23\n\n\nURI: " in text
    assert parse_message(text) == message


def test_fractional_seconds_and_offsets_are_normalised_to_utc():
    text = (
        make_message().to_text().replace("Issued At: 2026-11-21T12:00:00Z", "Issued At: 2026-11-21T13:00:00.250+01:00")
    )
    assert parse_message(text).issued_at == ISSUED + timedelta(milliseconds=250)


def _replace_line(text: str, prefix: str, new_line: str | None) -> str:
    lines = text.split("\n")
    out = [new_line if line.startswith(prefix) else line for line in lines]
    return "\n".join(line for line in out if line is not None)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t + "\n",
        lambda t: t.replace("\n", "\r\n"),
        lambda t: t.replace("wants you to sign in", "wants you to log in"),
        lambda t: t.replace("0x2c7536E3605D9C16a7a3D7b1898e529396a65c23", "0x2C7536E3605D9C16a7a3D7b1898e529396a65c23"),
        lambda t: t.replace("0x2c7536E3605D9C16a7a3D7b1898e529396a65c23", "0x2c7536e3605d9c16a7a3d7b1898e529396a65c2"),
        lambda t: _replace_line(t, "Nonce: ", "Nonce: short7x"),
        lambda t: _replace_line(t, "Nonce: ", "Nonce: has-dash-12345"),
        lambda t: _replace_line(t, "Version: ", "Version: 2"),
        lambda t: _replace_line(t, "Chain ID: ", "Chain ID: one"),
        lambda t: _replace_line(t, "Issued At: ", "Issued At: 2026-11-21 12:00:00"),
        lambda t: _replace_line(t, "Issued At: ", None),
        lambda t: _replace_line(t, "Issued At: ", "Issued At: 2026-13-01T00:00:00Z"),
        lambda t: _replace_line(t, "Issued At: ", "Issued At: 9999-12-31T23:59:59-23:59"),
        lambda t: _replace_line(t, "URI: ", "URI: not a uri"),
        lambda t: _replace_line(t, "Expiration Time: ", "Expiration Time: tomorrow"),
        lambda t: t.replace("Version: 1\nChain ID: 31337", "Chain ID: 31337\nVersion: 1"),
        lambda t: t + "\nUnknown: field",
        lambda t: t.replace("Sign in to the Tessera agent network.", "line\nbreak"),
        lambda t: "",
    ],
)
def test_malformed_messages_are_rejected(mutate):
    with pytest.raises(InvalidSiweMessage):
        parse_message(mutate(make_message().to_text()))


def test_constructor_refuses_invalid_fields():
    with pytest.raises(InvalidSiweMessage):
        make_message(nonce="1234567")
    with pytest.raises(InvalidSiweMessage):
        make_message(issued_at=datetime(2026, 1, 1))
    with pytest.raises(InvalidSiweMessage):
        make_message(statement="two\nlines")
    with pytest.raises(InvalidSiweMessage):
        make_message(domain="bad domain")


def test_check_enforces_domain_chain_and_validity_window():
    message = make_message(not_before=ISSUED)
    message.check(domain="127.0.0.1:5000", chain_id=31337, now=ISSUED + timedelta(minutes=1))
    with pytest.raises(InvalidSiweMessage, match="domain"):
        message.check(domain="evil.example", chain_id=31337, now=ISSUED)
    with pytest.raises(InvalidSiweMessage, match="chain"):
        message.check(domain="127.0.0.1:5000", chain_id=1, now=ISSUED)
    with pytest.raises(InvalidSiweMessage, match="expired"):
        message.check(domain="127.0.0.1:5000", chain_id=31337, now=ISSUED + timedelta(minutes=5))
    with pytest.raises(InvalidSiweMessage, match="not valid yet"):
        message.check(domain="127.0.0.1:5000", chain_id=31337, now=ISSUED - timedelta(seconds=1))
