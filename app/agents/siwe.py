"""EIP-4361 (Sign-In with Ethereum) messages: build them and parse them strictly.

Pure module (no Flask). ``SiweMessage`` validates its fields when constructed, so a message that
exists can always be rendered; ``parse_message`` accepts exactly the ABNF of EIP-4361 (fields in
their fixed order, ``\\n`` line ends, no trailing newline) and raises ``InvalidSiweMessage``
otherwise. Checking the nonce, domain and times against expectations is the caller's job
(``SiweMessage.check``), as is verifying the signature over the original text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from app.agents.ethereum import is_checksum_address

_HEADER_SUFFIX = " wants you to sign in with your Ethereum account:"
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")
_AUTHORITY_RE = re.compile(
    r"^(?:[A-Za-z0-9\-._~%!$&'()*+,;=:]+@)?"
    r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~%!$&'()*+,;=]+)"
    r"(?::[0-9]*)?$"
)
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*$")
_STATEMENT_RE = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;= ]+$")
_NONCE_RE = re.compile(r"^[A-Za-z0-9]{8,}$")
_CHAIN_ID_RE = re.compile(r"^[0-9]+$")
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:@%]*$")
_DATE_TIME_RE = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})$"
)


class InvalidSiweMessage(ValueError):
    """The text is not a well-formed EIP-4361 message, or a field breaks its rule."""


def parse_date_time(text: str) -> datetime:
    """Return an aware UTC datetime for an RFC 3339 ``date-time``. Raises ``InvalidSiweMessage``."""
    if not _DATE_TIME_RE.match(text):
        raise InvalidSiweMessage(f"{text!r} is not an RFC 3339 date-time")
    try:
        return datetime.fromisoformat(text.upper().replace("Z", "+00:00")).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidSiweMessage(f"{text!r} is not a valid date-time") from exc


def format_date_time(moment: datetime) -> str:
    """Render an aware datetime as RFC 3339 in UTC with ``Z`` (milliseconds only when non-zero)."""
    moment = moment.astimezone(UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond // 1000:03d}"
    return text + "Z"


@dataclass(frozen=True)
class SiweMessage:
    """One EIP-4361 message. Datetimes must be timezone-aware; they are rendered in UTC."""

    domain: str
    address: str
    uri: str
    chain_id: int
    nonce: str
    issued_at: datetime
    statement: str | None = None
    version: str = "1"
    expiration_time: datetime | None = None
    not_before: datetime | None = None
    request_id: str | None = None
    resources: tuple[str, ...] = field(default_factory=tuple)
    scheme: str | None = None

    def __post_init__(self) -> None:
        if self.scheme is not None and not _SCHEME_RE.match(self.scheme):
            raise InvalidSiweMessage("scheme is not an RFC 3986 scheme")
        if not _AUTHORITY_RE.match(self.domain):
            raise InvalidSiweMessage("domain is not an RFC 3986 authority")
        if not is_checksum_address(self.address):
            raise InvalidSiweMessage("address is not an EIP-55 checksummed address")
        if self.statement is not None and not _STATEMENT_RE.match(self.statement):
            raise InvalidSiweMessage("statement must be non-empty printable text without line breaks")
        if not _URI_RE.match(self.uri):
            raise InvalidSiweMessage("uri is not an RFC 3986 URI")
        if self.version != "1":
            raise InvalidSiweMessage("version must be 1")
        if isinstance(self.chain_id, bool) or not isinstance(self.chain_id, int) or self.chain_id < 0:
            raise InvalidSiweMessage("chain id must be a non-negative integer")
        if not _NONCE_RE.match(self.nonce):
            raise InvalidSiweMessage("nonce must be at least 8 letters or digits")
        for name in ("issued_at", "expiration_time", "not_before"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
                raise InvalidSiweMessage(f"{name} must be a timezone-aware datetime")
        if self.request_id is not None and not _REQUEST_ID_RE.match(self.request_id):
            raise InvalidSiweMessage("request id must consist of URI path characters")
        for resource in self.resources:
            if not _URI_RE.match(resource):
                raise InvalidSiweMessage(f"resource {resource!r} is not an RFC 3986 URI")

    def to_text(self) -> str:
        """Render the message exactly as the signer signs it."""
        origin = f"{self.scheme}://{self.domain}" if self.scheme else self.domain
        lines = [origin + _HEADER_SUFFIX, self.address, ""]
        if self.statement is not None:
            lines += [self.statement, ""]
        else:
            lines.append("")
        lines += [
            f"URI: {self.uri}",
            f"Version: {self.version}",
            f"Chain ID: {self.chain_id}",
            f"Nonce: {self.nonce}",
            f"Issued At: {format_date_time(self.issued_at)}",
        ]
        if self.expiration_time is not None:
            lines.append(f"Expiration Time: {format_date_time(self.expiration_time)}")
        if self.not_before is not None:
            lines.append(f"Not Before: {format_date_time(self.not_before)}")
        if self.request_id is not None:
            lines.append(f"Request ID: {self.request_id}")
        if self.resources:
            lines.append("Resources:")
            lines += [f"- {resource}" for resource in self.resources]
        return "\n".join(lines)

    def check(self, *, domain: str, chain_id: int, now: datetime, uri: str | None = None) -> None:
        """Check the message was made for this relying party and is valid at ``now``.

        Raises ``InvalidSiweMessage`` naming the first mismatch. Nonce and signature are checked
        by the caller, which owns the nonce store.
        """
        if self.domain != domain:
            raise InvalidSiweMessage("the message is for another domain")
        if self.chain_id != chain_id:
            raise InvalidSiweMessage("the message is for another chain")
        if uri is not None and self.uri != uri:
            raise InvalidSiweMessage("the message is for another URI")
        if self.expiration_time is not None and now >= self.expiration_time:
            raise InvalidSiweMessage("the message has expired")
        if self.not_before is not None and now < self.not_before:
            raise InvalidSiweMessage("the message is not valid yet")


def _take_tagged(lines: list[str], index: int, tag: str) -> str:
    if index >= len(lines) or not lines[index].startswith(tag):
        raise InvalidSiweMessage(f"line {index + 1} must start with {tag!r}")
    return lines[index][len(tag) :]


def parse_message(text: str) -> SiweMessage:
    """Parse ``text`` strictly as an EIP-4361 message. Raises ``InvalidSiweMessage``."""
    if not isinstance(text, str) or "\r" in text:
        raise InvalidSiweMessage("a message is text with \\n line ends")
    lines = text.split("\n")
    if len(lines) < 9 or not lines[0].endswith(_HEADER_SUFFIX):
        raise InvalidSiweMessage("the message does not start with the EIP-4361 header")
    origin = lines[0][: -len(_HEADER_SUFFIX)]
    scheme, _, domain = origin.rpartition("://")
    address = lines[1]
    if lines[2] != "":
        raise InvalidSiweMessage("line 3 must be empty")
    statement: str | None = None
    index = 3
    if lines[3] != "":
        statement = lines[3]
        index = 4
    if lines[index] != "":
        raise InvalidSiweMessage(f"line {index + 1} must be empty")
    index += 1
    uri = _take_tagged(lines, index, "URI: ")
    version = _take_tagged(lines, index + 1, "Version: ")
    chain_id_text = _take_tagged(lines, index + 2, "Chain ID: ")
    nonce = _take_tagged(lines, index + 3, "Nonce: ")
    issued_at = parse_date_time(_take_tagged(lines, index + 4, "Issued At: "))
    index += 5
    optional: dict[str, str] = {}
    for key, tag in (
        ("expiration_time", "Expiration Time: "),
        ("not_before", "Not Before: "),
        ("request_id", "Request ID: "),
    ):
        if index < len(lines) and lines[index].startswith(tag):
            optional[key] = lines[index][len(tag) :]
            index += 1
    resources: list[str] = []
    if index < len(lines) and lines[index] == "Resources:":
        index += 1
        while index < len(lines) and lines[index].startswith("- "):
            resources.append(lines[index][2:])
            index += 1
    if index != len(lines):
        raise InvalidSiweMessage(f"unexpected content on line {index + 1}")
    if not _CHAIN_ID_RE.match(chain_id_text):
        raise InvalidSiweMessage("chain id must be decimal digits")
    return SiweMessage(
        scheme=scheme or None,
        domain=domain,
        address=address,
        statement=statement,
        uri=uri,
        version=version,
        chain_id=int(chain_id_text),
        nonce=nonce,
        issued_at=issued_at,
        expiration_time=(parse_date_time(optional["expiration_time"]) if "expiration_time" in optional else None),
        not_before=parse_date_time(optional["not_before"]) if "not_before" in optional else None,
        request_id=optional.get("request_id"),
        resources=tuple(resources),
    )
