"""Agent card scaffold in the ERC-8004 registration format, and placeholder detection.

Pure module. ``scaffold_card`` builds the card ``tessera agent create-card`` writes; values the
author must still fill in carry ``PLACEHOLDER_MARK`` and ``find_placeholders`` lists them, so the
CLI can refuse to host an unfinished card.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

REGISTRATION_TYPE = "https://eips.ethereum.org/EIPS/eip-8004#registration-v1"
PLACEHOLDER_MARK = "REPLACE-ME"
A2A_PLACEHOLDER = f"https://{PLACEHOLDER_MARK}.example/.well-known/agent-card.json"
MCP_PLACEHOLDER = f"https://{PLACEHOLDER_MARK}.example/mcp"
DID_PLACEHOLDER = f"did:tessera:{PLACEHOLDER_MARK}"
IMAGE_PLACEHOLDER = f"https://{PLACEHOLDER_MARK}.example/agent.png"
NAME_PLACEHOLDER = f"{PLACEHOLDER_MARK}: agent name"
DESCRIPTION_PLACEHOLDER = f"{PLACEHOLDER_MARK}: what the agent does, how to use it"
A2A_PROTOCOL_VERSION = "0.3.0"
MCP_PROTOCOL_VERSION = "2025-06-18"
SERVICE_NAMES = ("A2A", "MCP", "DID")
MAX_CARD_BYTES = 16384


def scaffold_card(
    *,
    name: str | None = None,
    description: str | None = None,
    image: str | None = None,
    did: str | None = None,
    x402: bool = False,
    services: tuple[str, ...] = SERVICE_NAMES,
    a2a_endpoint: str | None = None,
    mcp_endpoint: str | None = None,
) -> dict[str, Any]:
    """Return a new card; every value not given is a placeholder the author must replace.

    ``services`` picks which of A2A, MCP and DID are listed (unknown names raise ``ValueError``).
    The DID service's endpoint is the agent's DID itself.
    """
    unknown = set(services) - set(SERVICE_NAMES)
    if unknown:
        raise ValueError(f"unknown services: {', '.join(sorted(unknown))}")
    entries: list[dict[str, str]] = []
    if "A2A" in services:
        entries.append({"name": "A2A", "endpoint": a2a_endpoint or A2A_PLACEHOLDER, "version": A2A_PROTOCOL_VERSION})
    if "MCP" in services:
        entries.append({"name": "MCP", "endpoint": mcp_endpoint or MCP_PLACEHOLDER, "version": MCP_PROTOCOL_VERSION})
    if "DID" in services:
        entries.append({"name": "DID", "endpoint": did or DID_PLACEHOLDER, "version": "v1"})
    return {
        "type": REGISTRATION_TYPE,
        "name": name or NAME_PLACEHOLDER,
        "description": description or DESCRIPTION_PLACEHOLDER,
        "image": image or IMAGE_PLACEHOLDER,
        "services": entries,
        "x402Support": bool(x402),
        "active": True,
    }


def render_card(card: dict[str, Any]) -> bytes:
    """Serialise a card the way the scaffold writes it: UTF-8, 2-space indent, trailing newline."""
    return (json.dumps(card, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _walk(value: Any, pointer: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, child in value.items():
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            yield from _walk(child, f"{pointer}/{escaped}")
    elif isinstance(value, list):
        for position, child in enumerate(value):
            yield from _walk(child, f"{pointer}/{position}")
    else:
        yield pointer, value


def find_placeholders(card: Any) -> list[str]:
    """Return the JSON pointers of every string value that still holds the scaffold placeholder."""
    return [pointer for pointer, value in _walk(card, "") if isinstance(value, str) and PLACEHOLDER_MARK in value]


def find_placeholders_in_bytes(body: bytes) -> list[str]:
    """Like ``find_placeholders`` for raw card bytes; a body that is not JSON is checked as text."""
    try:
        return find_placeholders(json.loads(body.decode("utf-8")))
    except (UnicodeDecodeError, ValueError):
        return [""] if PLACEHOLDER_MARK.encode() in body else []
