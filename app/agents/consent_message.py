"""The texts an agent signs to accept an owner organisation and to revoke it (no Flask imports).

The network writes the consent with ``format_consent_message``; the client reads it back with
``parse_consent_message`` and compares every term with what it expects before signing, so a
network (or anything in between) cannot get the agent key to sign other text. A revocation
(``format_revocation_message``) is written by the agent and rebuilt by the network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.dids.syntax import NETWORK_DID

_TIME = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{3})?Z"
_MESSAGE = re.compile(
    r"(?P<network_host>[A-Za-z0-9.\-]+(?::\d{1,5})?) asks you to accept an owner for your agent:\n"
    rf"(?P<agent_did>{NETWORK_DID})\n"
    r"\n"
    rf"Owner: (?P<owner_did>{NETWORK_DID})\n"
    r"Consent: (?P<consent_id>[0-9a-f]{32})\n"
    rf"Issued At: (?P<issued_at>{_TIME})\n"
    rf"Expiration Time: (?P<expires_at>{_TIME})"
)


class InvalidConsentMessage(ValueError):
    """The text is not a consent message in exactly the network's format."""


@dataclass(frozen=True)
class ConsentTerms:
    """What a consent message says: on which network, which agent accepts which owner, and when.

    ``issued_at`` and ``expires_at`` are RFC 3339 UTC texts as they appear in the message.
    """

    network_host: str
    agent_did: str
    owner_did: str
    consent_id: str
    issued_at: str
    expires_at: str


def format_consent_message(terms: ConsentTerms) -> str:
    """The exact text the agent signs (EIP-191 personal_sign) to accept ``terms.owner_did``."""
    return "\n".join(
        [
            f"{terms.network_host} asks you to accept an owner for your agent:",
            terms.agent_did,
            "",
            f"Owner: {terms.owner_did}",
            f"Consent: {terms.consent_id}",
            f"Issued At: {terms.issued_at}",
            f"Expiration Time: {terms.expires_at}",
        ]
    )


def parse_consent_message(text: str) -> ConsentTerms:
    """Read the terms of a consent message; ``InvalidConsentMessage`` unless it is exactly that format."""
    match = _MESSAGE.fullmatch(text)
    if match is None:
        raise InvalidConsentMessage("not a consent message of the Tessera network")
    return ConsentTerms(**match.groupdict())


@dataclass(frozen=True)
class OwnerRevocation:
    """What an owner revocation says: on which network, which agent drops which owner, and when.

    ``issued_at`` is an RFC 3339 UTC text as it appears in the message.
    """

    network_host: str
    agent_did: str
    owner_did: str
    issued_at: str


def format_revocation_message(terms: OwnerRevocation) -> str:
    """The exact text the agent signs (EIP-191 personal_sign) to revoke ``terms.owner_did``.

    The agent writes it itself, so there is nothing of the network's to check before signing;
    the network rebuilds it from the request and checks the signature.
    """
    return "\n".join(
        [
            f"{terms.network_host}: revoke the owner of your agent:",
            terms.agent_did,
            "",
            f"Owner: {terms.owner_did}",
            f"Issued At: {terms.issued_at}",
        ]
    )
