"""The shape of an ERC-8004 agent registration file, the card hosted on the network (no Flask).

``registration_file_errors`` names every field that breaks the shape, so a refused card is
answered with all its problems at once. Only the shape is checked: URLs are not fetched and
extra members are allowed (the format is extensible). An agent no longer active is told by a
registration file of its own (`inactive_registration_uri`), which its ERC-8004 `tokenURI` then holds.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

REGISTRATION_TYPE = "https://eips.ethereum.org/EIPS/eip-8004#registration-v1"
SERVICE_LISTS = ("services", "endpoints")
# CAIP-10 account id of the identity registry: eip155:<chain id>:<20-byte address>.
_AGENT_REGISTRY = re.compile(r"eip155:[0-9]{1,32}:0x[0-9a-fA-F]{40}")


def _text_error(value: Any, *, required: bool = True) -> str | None:
    if not isinstance(value, str) or (required and not value.strip()):
        return "Must be a non-empty string." if required else "Must be a string."
    return None


def _service_errors(name: str, services: Any) -> dict[str, list[str]]:
    if not isinstance(services, list):
        return {name: ["Must be an array of {name, endpoint} objects."]}
    errors: dict[str, list[str]] = {}
    for index, service in enumerate(services):
        where = f"{name}.{index}"
        if not isinstance(service, dict):
            errors[where] = ["Must be an object with name and endpoint."]
            continue
        for member in ("name", "endpoint"):
            problem = _text_error(service.get(member))
            if problem:
                errors[f"{where}.{member}"] = [problem]
        if "version" in service and (problem := _text_error(service["version"])):
            errors[f"{where}.version"] = [problem]
    return errors


def _registration_errors(registrations: Any) -> dict[str, list[str]]:
    if not isinstance(registrations, list):
        return {"registrations": ["Must be an array of {agentId, agentRegistry} objects."]}
    errors: dict[str, list[str]] = {}
    for index, registration in enumerate(registrations):
        where = f"registrations.{index}"
        if not isinstance(registration, dict):
            errors[where] = ["Must be an object with agentId and agentRegistry."]
            continue
        agent_id = registration.get("agentId")
        valid_id = (isinstance(agent_id, int) and not isinstance(agent_id, bool) and agent_id >= 0) or (
            isinstance(agent_id, str) and agent_id.isdigit()
        )
        if not valid_id:
            errors[f"{where}.agentId"] = ["Must be a non-negative integer."]
        registry = registration.get("agentRegistry")
        if not isinstance(registry, str) or not _AGENT_REGISTRY.fullmatch(registry):
            errors[f"{where}.agentRegistry"] = ["Must be a CAIP-10 account id, eip155:<chain id>:<address>."]
    return errors


def did_service_errors(card: dict[str, Any], did: str) -> dict[str, list[str]]:
    """The `DID` service entries of ``card`` whose endpoint is not the agent's own ``did`` (spec 2.6:
    the DID service endpoint equals the agent DID)."""
    errors: dict[str, list[str]] = {}
    for name in SERVICE_LISTS:
        services = card.get(name)
        for index, service in enumerate(services if isinstance(services, list) else []):
            if (
                isinstance(service, dict)
                and str(service.get("name", "")).strip().lower() == "did"
                and service.get("endpoint") != did
            ):
                errors[f"{name}.{index}.endpoint"] = [f"The DID service endpoint must be the agent's own DID, {did}."]
    return errors


def registration_file_errors(card: dict[str, Any]) -> dict[str, list[str]]:
    """The fields of ``card`` that break the ERC-8004 registration-file shape (empty when none).

    Required: ``type`` (the registration-v1 type), ``name``, ``description`` and a ``services``
    (or, in the older draft, ``endpoints``) array of ``{name, endpoint, version?}`` objects.
    Optional but checked when present: ``image``, ``registrations`` (``{agentId,
    agentRegistry}`` objects), ``supportedTrust`` (strings), ``active`` and ``x402Support``
    (booleans).
    """
    errors: dict[str, list[str]] = {}
    if card.get("type") != REGISTRATION_TYPE:
        errors["type"] = [f"Must be {REGISTRATION_TYPE!r}."]
    for name in ("name", "description"):
        if problem := _text_error(card.get(name)):
            errors[name] = [problem]
    if not any(name in card for name in SERVICE_LISTS):
        errors["services"] = ["Required: an array of {name, endpoint} objects (or 'endpoints')."]
    for name in SERVICE_LISTS:
        if name in card:
            errors.update(_service_errors(name, card[name]))
    if "image" in card and (problem := _text_error(card["image"])):
        errors["image"] = [problem]
    if "registrations" in card:
        errors.update(_registration_errors(card["registrations"]))
    trust = card.get("supportedTrust")
    if "supportedTrust" in card and not (isinstance(trust, list) and all(isinstance(t, str) for t in trust)):
        errors["supportedTrust"] = ["Must be an array of strings."]
    for name in ("active", "x402Support"):
        if name in card and not isinstance(card[name], bool):
            errors[name] = ["Must be true or false."]
    return errors


# What an inactive agent's `tokenURI` holds: its registration file itself, short (each byte is stored on chain).
_INACTIVE_PREFIX = "data:application/json;base64,"
_NAME_LIMIT = 100


def inactive_registration_uri(name: str, description: str, agent_id: int, agent_registry: str) -> str:
    """A `data:` URI of a registration file saying the agent is no longer active (`active: false`),
    for the `tokenURI` of an agent whose hosted card went away (ERC-8004 lets the URI be updated)."""
    document = {
        "type": REGISTRATION_TYPE,
        "name": name[:_NAME_LIMIT],
        "description": description,
        "active": False,
        "registrations": [{"agentId": agent_id, "agentRegistry": agent_registry}],
    }
    encoded = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return _INACTIVE_PREFIX + base64.b64encode(encoded).decode("ascii")


def is_inactive_registration_uri(uri: str) -> bool:
    """Whether `uri` is a registration file `inactive_registration_uri` made (`active: false`)."""
    if not uri.startswith(_INACTIVE_PREFIX):
        return False
    try:
        document = json.loads(base64.b64decode(uri[len(_INACTIVE_PREFIX) :], validate=True))
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("active") is False
