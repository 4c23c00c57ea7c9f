"""The verification engine bound to the application's configuration.

`current_engine()` builds (once per process and configuration) the offline JSON-LD loader, the
DID resolver (did:key, SSRF-guarded did:web, the network's own DIDs) and the fetcher of foreign
status lists, and `CredentialEngine.verify` runs `verify_credential` with a Bitstring Status
List checker (`CredentialEngine.verify_presentation` verifies a presentation's credentials with it).
The service's own lists are read through a callback (the database), foreign lists over HTTPS
with the same guard as did:web, verified, and cached for their `ttl`.

Settings (application config, else environment): `JSONLD_CONTEXTS_DIR`, `DID_WEB_ALLOW_HOSTS`
and `STATUS_LIST_ALLOW_HOSTS` (comma-separated `host:port` that may be private; such hosts may
also be reached over plain http, for tests), `OUTBOUND_CA_BUNDLE`, `CANONICALIZATION_TIME_LIMIT`,
`STATUS_LIST_CACHE_MAX_SECONDS`, `DID_METHOD`, and the budget of one credential across all its
proofs: `VC_MAX_PROOFS`, `VC_VERIFY_MAX_VALUES`, `VC_VERIFY_TIME_LIMIT`.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import app.json_text as json_text
import app.outbound as outbound
from app.cache import Cache
from app.config import CoreSettings
from app.credentials.cryptosuites.base import ProofCheckFailed
from app.credentials.jsonld.canon import CanonicalizationLimits
from app.credentials.jsonld.loader import DocumentLoader, make_document_loader
from app.credentials.presentations import HolderExpectations, PresentationResult, verify_presentation
from app.credentials.settings import MIN_STATUS_LIST_BITS, CredentialSettings
from app.credentials.verifier import VerificationBudget, VerificationResult, verify_credential
from app.db import end_reads
from app.dids.did_web import DidWebResolver
from app.dids.local import local_documents
from app.dids.resolver import DidResolver
from app.dids.settings import DidSettings
from app.outbound import OutboundPolicy, no_preparation, system_addresses, unusable_host_detail
from app.settings import current

STATUS_ENTRY_TYPE = "BitstringStatusListEntry"
STATUS_LIST_CREDENTIAL_TYPE = "BitstringStatusListCredential"
STATUS_LIST_TYPE = "BitstringStatusList"
MAX_STATUS_LIST_BITS = 16 * 1024 * 1024 * 8
STATUS_PURPOSES = {"revocation": "revoked", "suspension": "suspended"}

# local_bit(list_url, index, purpose): True/False for a list the service hosts, None otherwise.
LocalStatusBit = Callable[[str, int, str], "bool | None"]


def _parse_status_index(value: Any) -> int:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 10:
        return int(value)
    raise ProofCheckFailed("status_check_failed", "statusListIndex must be a non-negative integer in a string")


def decode_encoded_list(encoded: Any) -> bytes:
    """The bitstring of an `encodedList` (multibase base64url of GZIP); raises `status_check_failed`."""
    if not isinstance(encoded, str) or not encoded.startswith("u") or len(encoded) > 4 * 1024 * 1024:
        raise ProofCheckFailed("status_check_failed", "encodedList must be a multibase base64url (u) string")
    body = encoded[1:]
    try:
        compressed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise ProofCheckFailed("status_check_failed", "encodedList is not base64url") from None
    try:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        bits = inflater.decompress(compressed, MAX_STATUS_LIST_BITS // 8 + 1)
    except zlib.error:
        raise ProofCheckFailed("status_check_failed", "encodedList is not GZIP data") from None
    if len(bits) > MAX_STATUS_LIST_BITS // 8 or inflater.unconsumed_tail:
        raise ProofCheckFailed("status_check_failed", "the status list is too large")
    if len(bits) * 8 < MIN_STATUS_LIST_BITS:
        raise ProofCheckFailed("status_check_failed", f"the status list has fewer than {MIN_STATUS_LIST_BITS} bits")
    return bits


def encode_bitstring(bits: bytes) -> str:
    """`encodedList` of a bitstring: GZIP, then multibase base64url without padding."""
    compressed = gzip.compress(bits, compresslevel=9, mtime=0)
    return "u" + base64.urlsafe_b64encode(compressed).rstrip(b"=").decode("ascii")


def bit_is_set(bits: bytes, index: int) -> bool:
    """Bit `index` of a bitstring, index 0 being the left-most (most significant) bit."""
    if index >= len(bits) * 8:
        raise ProofCheckFailed("status_check_failed", f"statusListIndex {index} is outside the status list")
    return bool(bits[index // 8] & (0x80 >> (index % 8)))


@dataclass
class RemoteStatusLists:
    """Fetches, verifies and caches status list credentials hosted by others.

    Only https URLs (plain http only for allow-listed test hosts); the host's addresses must all
    be public unless `host:port` is allow-listed; the request goes to the checked address; no
    redirects, no proxies, bounded time and size. A list is cached for its `ttl` (milliseconds,
    capped at `max_cache_seconds`; `default_cache_seconds` when it has none).
    """

    allowed_private_hosts: frozenset[str] = field(default_factory=frozenset)
    verify_tls: Any = True
    connect_timeout: float = 3.0
    read_timeout: float = 5.0
    max_bytes: int = 2 * 1024 * 1024
    default_cache_seconds: float = 300.0
    max_cache_seconds: float = 3600.0
    cache_size: int = 256
    resolve_addresses: Callable[[str, int], list[str]] = system_addresses
    # Called before each fetch: the application ends the read transaction a verification may hold.
    before_fetch: Callable[[], None] = no_preparation
    _cache: Cache[dict] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._cache = Cache("remote_status_lists", maxsize=self.cache_size)

    def status_list(self, url: str, verify: Callable[[dict], VerificationResult]) -> dict:
        """The verified credential at `url` (cached); raises `ProofCheckFailed("status_check_failed")`."""
        cached = self._cache.get(url)
        if cached is not None:
            return cached
        credential = self._fetch_json(url)
        result = verify(credential)
        if not result.verified:
            raise ProofCheckFailed(
                "status_check_failed", f"the status list credential does not verify ({result.reason})"
            )
        subject = _status_list_subject(credential, url)
        seconds = self.default_cache_seconds
        ttl = subject.get("ttl")
        if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl >= 0:
            seconds = min(ttl / 1000.0, self.max_cache_seconds)
        self._cache.put(url, credential, ttl=seconds)
        return credential

    def _fetch_json(self, url: str) -> dict:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ProofCheckFailed("status_check_failed", "statusListCredential has an invalid port") from None
        policy = self.policy()
        if parts.scheme != "https" and not (parts.scheme == "http" and policy.is_listed(host, port)):
            raise ProofCheckFailed("status_check_failed", "statusListCredential must be an https URL")
        if not host or parts.username or parts.password:
            raise ProofCheckFailed("status_check_failed", "statusListCredential has no valid host")
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        body = self._download(policy, parts.scheme, host, port, path, url)
        try:
            document = json_text.loads(body)
        except (UnicodeDecodeError, ValueError):
            raise ProofCheckFailed("status_check_failed", "the status list credential is not JSON") from None
        if not isinstance(document, dict):
            raise ProofCheckFailed("status_check_failed", "the status list credential is not a JSON object")
        return document

    def policy(self) -> OutboundPolicy:
        return OutboundPolicy(
            allowed_private_hosts=self.allowed_private_hosts,
            verify=self.verify_tls,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            total_timeout=self.connect_timeout + self.read_timeout,
            max_bytes=self.max_bytes,
            resolve_addresses=self.resolve_addresses,
        )

    def _download(self, policy: OutboundPolicy, scheme: str, host: str, port: int, path: str, url: str) -> bytes:
        headers = {"Accept": "application/vc+ld+json, application/vc, application/json"}
        self.before_fetch()
        try:
            response = outbound.fetch(policy, "GET", scheme, host, port, path, headers=headers, require_status=200)
        except outbound.UnusableHost:
            # The same answer for an unknown and an internal host, and never an address (see did:web).
            raise ProofCheckFailed("status_check_failed", unusable_host_detail("status list", host)) from None
        except outbound.UnexpectedStatus as error:
            raise ProofCheckFailed("status_check_failed", f"{url} answered HTTP {error.status}") from None
        except outbound.TooLarge:
            raise ProofCheckFailed("status_check_failed", f"{url} exceeds {self.max_bytes} bytes") from None
        except outbound.TooSlow:
            raise ProofCheckFailed("status_check_failed", f"{url} took too long") from None
        except (outbound.ConnectFailed, outbound.TransferFailed) as error:
            raise ProofCheckFailed("status_check_failed", f"fetching {url}: {type(error.error).__name__}") from None
        return response.content


def _status_list_subject(credential: dict, url: str) -> dict:
    types = credential.get("type")
    types = types if isinstance(types, list) else [types]
    if STATUS_LIST_CREDENTIAL_TYPE not in types:
        raise ProofCheckFailed("status_check_failed", f"{url} is not a {STATUS_LIST_CREDENTIAL_TYPE}")
    if "id" in credential and credential["id"] != url:
        raise ProofCheckFailed("status_check_failed", f"the status list credential's id is not {url}")
    subject = credential.get("credentialSubject")
    if not isinstance(subject, dict) or subject.get("type") != STATUS_LIST_TYPE:
        raise ProofCheckFailed("status_check_failed", f"the status list's subject is not a {STATUS_LIST_TYPE}")
    size = subject.get("statusSize", 1)
    if size not in (1, "1"):
        raise ProofCheckFailed("status_check_failed", "only statusSize 1 is supported")
    return subject


def _subject_purposes(subject: dict) -> list[str]:
    purpose = subject.get("statusPurpose")
    return purpose if isinstance(purpose, list) else [purpose]


@dataclass
class CredentialEngine:
    """Everything verification needs, shared by every verification in this process."""

    loader: DocumentLoader
    resolver: DidResolver
    remote_lists: RemoteStatusLists
    limits: CanonicalizationLimits
    budget: VerificationBudget = field(default_factory=VerificationBudget)

    def verify(
        self,
        vc: Any,
        *,
        local_bit: LocalStatusBit | None = None,
        check_status: bool = True,
        now: datetime | None = None,
        proof_purpose: str = "assertionMethod",
        bind_issuer: bool = True,
        time_limit: float | None = None,
        challenge: str | None = None,
        domains: tuple[str, ...] = (),
        presentation_header: bytes | None = None,
        header_challenge: str | None = None,
    ) -> VerificationResult:
        """Verify `vc` completely; never raises for bad input (see `verify_credential`).

        By default the issuer must be a DID that authorises the key of at least one proof (an
        issuer that is not a DID cannot authorise keys, so such a credential fails with
        `verification_method_not_authorized`). Only `bind_issuer=False` (the request option
        `issuerMustControlKeys: false`) waives the binding for raw Data Integrity checks: each key
        is then checked against its own DID only, and the result carries `issuer_not_bound`.
        `time_limit` lowers the budget's time for all proofs (a job keeps it within its lease).
        `challenge`, `domains`, `presentation_header` and `header_challenge`: see `ProofExpectations`.
        """
        budget = self.budget
        if time_limit is not None and time_limit < budget.time_limit:
            budget = replace(budget, time_limit=time_limit)
        deadline = time.monotonic() + budget.time_limit

        def checker(credential: dict) -> str | None:
            # A foreign list is verified within what is left of this credential's time.
            return self.credential_status(credential, local_bit, time_limit=max(0.0, deadline - time.monotonic()))

        result = verify_credential(
            vc,
            resolver=self.resolver,
            loader=self.loader,
            status_checker=checker if check_status else None,
            now=now,
            limits=self.limits,
            proof_purpose=proof_purpose,
            issuer_must_control_keys=bind_issuer,
            budget=budget,
            challenge=challenge,
            domains=domains,
            presentation_header=presentation_header,
            header_challenge=header_challenge,
        )
        if not bind_issuer and "proof" in result.checks:
            result.warnings.append(
                {
                    "code": "issuer_not_bound",
                    "detail": "issuerMustControlKeys was false: each proof key was checked against its own DID "
                    "only, not against the issuer, so the proofs do not show who issued the credential",
                }
            )
        return result

    def verify_presentation(
        self,
        vp: Any,
        expectations: HolderExpectations,
        *,
        local_bit: LocalStatusBit | None = None,
        bind_issuer: bool = True,
        time_limit: float | None = None,
        max_credentials: int = 32,
    ) -> PresentationResult:
        """Verify a presentation and each credential in it as `verify` does; never raises for bad input.

        `time_limit` (default the budget's) bounds the whole presentation; `bind_issuer` applies to
        its credentials (see `verify`).
        """
        budget = self.budget
        if time_limit is not None and time_limit < budget.time_limit:
            budget = replace(budget, time_limit=time_limit)

        def verify_embedded(
            vc: Any, *, presentation_header: bytes | None, header_challenge: str | None, time_limit: float
        ) -> VerificationResult:
            return self.verify(
                vc,
                local_bit=local_bit,
                bind_issuer=bind_issuer,
                time_limit=time_limit,
                presentation_header=presentation_header,
                header_challenge=header_challenge,
            )

        return verify_presentation(
            vp,
            resolver=self.resolver,
            loader=self.loader,
            verify_embedded=verify_embedded,
            expectations=expectations,
            limits=self.limits,
            budget=budget,
            max_credentials=max_credentials,
        )

    def credential_status(
        self, vc: dict, local_bit: LocalStatusBit | None, *, time_limit: float | None = None
    ) -> str | None:
        """ "revoked", "suspended" or None for the vc's Bitstring Status List entries.

        `time_limit` bounds the verification of each foreign list credential.

        Raises `ProofCheckFailed("status_check_failed")` when an entry cannot be checked.
        """
        entries = vc.get("credentialStatus")
        entries = entries if isinstance(entries, list) else [entries]
        found: set[str] = set()
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("type") != STATUS_ENTRY_TYPE:
                raise ProofCheckFailed("status_check_failed", f"credentialStatus entries must be {STATUS_ENTRY_TYPE}")
            purpose = entry.get("statusPurpose")
            if purpose not in STATUS_PURPOSES:
                raise ProofCheckFailed("status_check_failed", f"status purpose {str(purpose)[:40]!r} is not supported")
            index = _parse_status_index(entry.get("statusListIndex"))
            url = entry.get("statusListCredential")
            if not isinstance(url, str) or not url:
                raise ProofCheckFailed("status_check_failed", "statusListCredential must be a URL")
            is_set = local_bit(url, index, purpose) if local_bit is not None else None
            if is_set is None:
                is_set = self._remote_bit(url, index, purpose, time_limit)
            if is_set:
                found.add(STATUS_PURPOSES[purpose])
        for status in ("revoked", "suspended"):
            if status in found:
                return status
        return None

    def _remote_bit(self, url: str, index: int, purpose: str, time_limit: float | None = None) -> bool:
        credential = self.remote_lists.status_list(
            url, lambda document: self.verify(document, check_status=False, time_limit=time_limit)
        )
        subject = _status_list_subject(credential, url)
        if purpose not in _subject_purposes(subject):
            raise ProofCheckFailed("status_check_failed", f"the status list at {url} is not for {purpose}")
        return bit_is_set(decode_encoded_list(subject.get("encodedList")), index)


def _end_reads() -> None:
    """End the read transaction of a verification (hosted status lists, the network's DIDs) before a fetch."""
    end_reads("a credential's verification calls another host with no transaction open")


# Engines by what they are built from (`_engine_inputs`): one per process and configuration.
_ENGINES: Cache[CredentialEngine] = Cache("credential_engines", maxsize=8)


def current_engine() -> CredentialEngine:
    """The engine for the current application's settings (built once per process and configuration)."""
    inputs = _engine_inputs()
    return _ENGINES.get_or_build(inputs, lambda: _build_engine(*inputs))


def _engine_inputs() -> tuple[CredentialSettings, CoreSettings, DidSettings]:
    """Everything `_build_engine` reads: the settings objects whole, so a setting added to them is
    part of the engine's key at once (no list of their fields to keep)."""
    return current(CredentialSettings), current(CoreSettings), current(DidSettings)


def _build_engine(settings: CredentialSettings, core: CoreSettings, dids: DidSettings) -> CredentialEngine:
    contexts_dir = settings.jsonld_contexts_dir or None
    did_web_hosts = settings.did_web_allow_hosts
    verify_tls: Any = core.outbound_ca_bundle or True
    return CredentialEngine(
        loader=make_document_loader(Path(contexts_dir) if contexts_dir else None, builtin=True),
        resolver=DidResolver(
            local_documents=local_documents(dids.method),
            web=DidWebResolver(
                OutboundPolicy(allowed_private_hosts=did_web_hosts, verify=verify_tls), before_fetch=_end_reads
            ),
        ),
        remote_lists=RemoteStatusLists(
            allowed_private_hosts=settings.status_list_allow_hosts | did_web_hosts,
            verify_tls=verify_tls,
            max_cache_seconds=settings.status_list_cache_max_seconds,
            before_fetch=_end_reads,
        ),
        limits=CanonicalizationLimits(time_limit=settings.canonicalization_time_limit),
        budget=VerificationBudget(
            max_proofs=settings.max_proofs, max_values=settings.verify_max_values, time_limit=settings.verify_time_limit
        ),
    )
