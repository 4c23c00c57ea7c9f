"""The ERC-8004 card scaffold and its placeholder detection."""

import json

import pytest

from app.client.cards import (
    PLACEHOLDER_MARK,
    REGISTRATION_TYPE,
    find_placeholders,
    find_placeholders_in_bytes,
    render_card,
    scaffold_card,
)

DID = "did:tessera:0123456789abcdef0123456789abcdef01234567"


def test_bare_scaffold_lists_every_service_with_placeholders():
    card = scaffold_card()
    assert card["type"] == REGISTRATION_TYPE
    assert [service["name"] for service in card["services"]] == ["A2A", "MCP", "DID"]
    assert card["x402Support"] is False
    assert find_placeholders(card) == [
        "/name",
        "/description",
        "/image",
        "/services/0/endpoint",
        "/services/1/endpoint",
        "/services/2/endpoint",
    ]


def test_did_service_endpoint_is_the_agent_did():
    card = scaffold_card(name="Echo", description="Echoes", image="https://img.example/e.png", did=DID, x402=True)
    did_service = next(service for service in card["services"] if service["name"] == "DID")
    assert did_service["endpoint"] == DID
    assert card["x402Support"] is True
    assert find_placeholders(card) == ["/services/0/endpoint", "/services/1/endpoint"]


def test_complete_card_has_no_placeholders():
    card = scaffold_card(
        name="Echo",
        description="Echoes",
        image="https://img.example/e.png",
        did=DID,
        services=("A2A", "DID"),
        a2a_endpoint="https://echo.example/.well-known/agent-card.json",
    )
    assert find_placeholders(card) == []
    assert [service["name"] for service in card["services"]] == ["A2A", "DID"]


def test_unknown_service_is_refused():
    with pytest.raises(ValueError):
        scaffold_card(services=("A2A", "SMTP"))


def test_render_is_utf8_json_with_trailing_newline():
    body = render_card(scaffold_card(name="Écho", did=DID))
    assert body.endswith(b"}\n")
    assert json.loads(body.decode("utf-8"))["name"] == "Écho"
    assert "Écho".encode() in body


def test_placeholders_found_in_raw_bytes_and_in_non_json_text():
    assert find_placeholders_in_bytes(render_card(scaffold_card(did=DID)))
    assert find_placeholders_in_bytes(b'{"name": "ok"}') == []
    assert find_placeholders_in_bytes(f"not json {PLACEHOLDER_MARK}".encode()) == [""]
    assert find_placeholders_in_bytes(b"\xff\xfe") == []


def test_json_pointer_escaping_in_keys():
    assert find_placeholders({"a/b": {"c~d": [PLACEHOLDER_MARK]}}) == ["/a~1b/c~0d/0"]
