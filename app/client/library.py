"""Python client of the Tessera agent network: the operations behind the ``tessera`` CLI.

``TesseraClient`` talks HTTP (httpx) to ``{network_url}/api/...``. Signing operations need the
agent key (``api_key``: a secp256k1 private key as 0x-prefixed hex); the client signs the
network's EIP-4361 challenge with it on first use and keeps the session token. Failures raise
the typed errors below; every error carries a message fit for a person.

Operations that start a job on the network (host, publish, set-card, deregister, consent
approval) wait for it by default and return the finished job; pass ``wait=False`` to get the
queued job at once, and ``progress=callable`` to be told of each poll.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import httpx

from app.agents import ethereum
from app.agents.consent_message import (
    InvalidConsentMessage,
    OwnerRevocation,
    format_revocation_message,
    parse_consent_message,
)
from app.agents.siwe import InvalidSiweMessage, SiweMessage, format_date_time, parse_message
from app.client.cards import MAX_CARD_BYTES, find_placeholders_in_bytes

REGISTRY_CONTRACT = "agent-registry"
MINIMUM_DEREGISTER_VERSION = (1, 7, 0)
FINAL_JOB_STATES = frozenset({"succeeded", "failed"})
DEFAULT_CHAIN_ID = 1
# A sign-in challenge is made for this moment: its times may differ from the local clock by at
# most CLOCK_SKEW, and a signature over it may stay usable for at most MAX_CHALLENGE_LIFETIME.
CLOCK_SKEW = timedelta(minutes=5)
MAX_CHALLENGE_LIFETIME = timedelta(hours=1)

ProgressCallback = Callable[[dict[str, Any]], None]


class TesseraError(Exception):
    """Base of every error the client raises."""


class ApiError(TesseraError):
    """The network answered with an error status; ``problem`` is its RFC 9457 body (or ``{}``)."""

    def __init__(self, status: int, problem: dict[str, Any] | None = None, message: str | None = None):
        self.status = status
        self.problem = problem or {}
        self.code = self.problem.get("code")
        detail = self.problem.get("detail") or self.problem.get("title")
        super().__init__(message or (f"HTTP {status}: {detail}" if detail else f"HTTP {status}"))


class AuthenticationFailed(TesseraError):
    """No agent key, a malformed key, or the network refused the signature or session (401)."""


class AccountDeactivated(AuthenticationFailed):
    """The key's DID was deregistered: it can no longer sign in. ``did`` names it."""

    def __init__(self, message: str, did: str | None = None):
        super().__init__(message)
        self.did = did


class ChallengeRefused(AuthenticationFailed):
    """The network's sign-in challenge is not one for this network, key and moment; nothing was signed."""


class InsufficientCredits(ApiError):
    """The paying account has fewer credits than the operation costs (402); nothing was written."""

    def __init__(self, required: int, available: int, problem: dict[str, Any] | None = None):
        self.required = required
        self.available = available
        super().__init__(
            402,
            problem,
            f"insufficient credits: this operation costs {required} credits, {available} available",
        )


class OwnerNamedDeregistration(ApiError):
    """The registry record names an owner organisation, so self-service deregistration is refused."""

    def __init__(self, owner: str | None, problem: dict[str, Any] | None = None):
        self.owner = owner
        super().__init__(
            409,
            problem,
            f"the registry record names the owner {owner}; an organisation-owned agent cannot be "
            "deregistered through self-service",
        )


class RegistryTooOld(TesseraError):
    """The network's agent-registry contract is older than 1.7.0, which deregistration needs."""

    def __init__(self, version: str):
        self.version = version
        super().__init__(
            f"the network's agent-registry contract is version {version}; deregistration needs 1.7.0 or higher"
        )


class CardHasPlaceholders(TesseraError):
    """The card still holds scaffold placeholders; ``pointers`` are their JSON pointers."""

    def __init__(self, pointers: list[str]):
        self.pointers = pointers
        where = ", ".join(p or "(body)" for p in pointers)
        super().__init__(f"the card still contains scaffold placeholders at {where}; replace or remove them")


class ConsentRefused(TesseraError):
    """The consent does not say exactly that this agent accepts the expected owner; nothing was signed."""


class RegistryWriteRefused(TesseraError):
    """The registry write the network asked this key to sign is not the one requested; nothing was signed."""


class JobFailed(TesseraError):
    """A job finished in state ``failed``; ``job`` is its final JSON."""

    def __init__(self, job: dict[str, Any]):
        self.job = job
        error = job.get("error") or {}
        self.code = error.get("code")
        super().__init__(f"job {job.get('id')} failed: {error.get('detail') or error.get('code') or 'unknown'}")


class JobTimeout(TesseraError):
    """A job did not finish within the wait time; it may still complete later.

    ``queue`` is the network's queue state (``queue_status()``) when the caller looked it up.
    """

    def __init__(self, job: dict[str, Any]):
        self.job = job
        self.queue: dict[str, Any] | None = None
        super().__init__(f"job {job.get('id')} is still {job.get('state')}; check it later")


def parse_version(text: str) -> tuple[int, ...]:
    """Return a comparable tuple for a dotted version (``"1.7.0"`` -> ``(1, 7, 0)``); ValueError if not."""
    core = text.strip().lstrip("v").split("-", 1)[0].split("+", 1)[0]
    parts = tuple(int(part) for part in core.split("."))
    if not parts:
        raise ValueError(f"not a version: {text!r}")
    return parts


def consent_id_from_link(link_or_id: str) -> str:
    """Return the consent id from a consent link (its last path segment) or from a bare id."""
    parsed = urlparse(link_or_id)
    if parsed.scheme and parsed.netloc:
        return parsed.path.rstrip("/").rsplit("/", 1)[-1]
    return link_or_id.strip()


def check_sign_in_challenge(
    text: Any,
    *,
    network_url: str,
    address: str,
    chain_id: int,
    nonce: Any = None,
    now: datetime | None = None,
) -> SiweMessage:
    """Return the EIP-4361 challenge ``text`` once every field is what this client expects.

    The domain (and scheme, when given) and the URI must be those of ``network_url``, the
    address the key's, the chain ``chain_id``; the nonce must be present (and equal ``nonce``
    when the network also sent it apart); it must be issued now (within ``CLOCK_SKEW``), expire
    in the future but within ``MAX_CHALLENGE_LIFETIME`` of issue, and carry no resources (which
    would delegate more than a sign-in). Anything else raises ``ChallengeRefused``.
    """
    base = network_url.rstrip("/")
    where = urlparse(base)
    prefix = f"refusing to sign the sign-in challenge from {base}"
    if not isinstance(text, str):
        raise ChallengeRefused(f"{prefix}: the network sent no message")
    try:
        message = parse_message(text)
    except InvalidSiweMessage as exc:
        raise ChallengeRefused(f"{prefix}: it is not an EIP-4361 message ({exc})") from exc
    now = now or datetime.now(UTC)
    problems: list[str] = []
    if message.domain.lower() != where.netloc.lower():
        problems.append(f"domain {message.domain} (expected {where.netloc})")
    if message.scheme is not None and message.scheme.lower() != where.scheme.lower():
        problems.append(f"scheme {message.scheme} (expected {where.scheme})")
    if message.uri != base and not message.uri.startswith(base + "/"):
        problems.append(f"URI {message.uri} (expected one under {base})")
    if message.address != address:
        problems.append(f"address {message.address} (expected {address})")
    if message.chain_id != chain_id:
        problems.append(f"chain id {message.chain_id} (expected {chain_id})")
    if nonce is not None and nonce != message.nonce:
        problems.append(f"nonce {message.nonce} (the network sent {nonce} beside it)")
    if abs(message.issued_at - now) > CLOCK_SKEW:
        problems.append(f"issued at {message.issued_at.isoformat()} (now is {now.replace(microsecond=0).isoformat()})")
    if message.expiration_time is None:
        problems.append("no expiration time")
    elif message.expiration_time <= now:
        problems.append(f"expired at {message.expiration_time.isoformat()}")
    elif message.expiration_time - message.issued_at > MAX_CHALLENGE_LIFETIME:
        problems.append(f"an expiration time of {message.expiration_time.isoformat()}, too far ahead")
    if message.not_before is not None and message.not_before - now > CLOCK_SKEW:
        problems.append(f"not valid before {message.not_before.isoformat()}")
    if message.resources:
        problems.append("resources (" + ", ".join(message.resources) + ")")
    if problems:
        raise ChallengeRefused(f"{prefix}: it names " + "; ".join(problems))
    return message


def _retry_after_seconds(response: httpx.Response, attempt: int) -> float:
    try:
        hinted = float(response.headers.get("Retry-After", ""))
    except ValueError:
        hinted = 0.0
    return min(max(hinted, 0.1 * 2**attempt), 5.0)


def _problem_of(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _registry_fields(signed: dict[str, Any]) -> dict[str, Any]:
    """A request's fields for an EIP-712 registry signature beside its own (personal_sign) ``signature``."""
    return {"registry_signature": signed["signature"], "deadline": signed["deadline"]} if signed else {}


def _raise_for_problem(status: int, problem: dict[str, Any]) -> None:
    code = problem.get("code")
    if code == "account_deactivated":
        raise AccountDeactivated(problem.get("detail") or "the account was deregistered", problem.get("did"))
    if status == 401 or code in ("authentication_failed", "unauthorized"):
        raise AuthenticationFailed(problem.get("detail") or problem.get("title") or "authentication failed")
    if status == 402 or code == "insufficient_credits":
        raise InsufficientCredits(int(problem.get("required", 0)), int(problem.get("available", 0)), problem)
    if code == "owner_named_record":
        raise OwnerNamedDeregistration(problem.get("owner"), problem)
    raise ApiError(status, problem)


class TesseraClient:
    """A session with one Tessera network as one agent (or organisation) key.

    ``base_url`` is the network URL (``{network_url}``); ``api_key`` the agent key or ``None`` for
    public reads only. ``chain_id`` is the EIP-155 chain a sign-in challenge must name; ``None``
    takes the chain the network announces beside each challenge (``DEFAULT_CHAIN_ID`` when it
    announces none), so a message naming another chain than announced is refused either way.
    ``transport`` lets tests plug an httpx transport.
    Not thread-safe.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 10.0,
        *,
        poll_interval: float = 0.25,
        job_timeout: float = 120.0,
        unavailable_retries: int = 3,
        chain_id: int | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.chain_id = chain_id
        self._api_key = api_key
        self.poll_interval = poll_interval
        self.job_timeout = job_timeout
        self.unavailable_retries = unavailable_retries
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            headers={"Accept": "application/json", "User-Agent": "tessera-cli"},
        )
        self._session_token: str | None = None
        self.did: str | None = None
        self.address: str | None = ethereum.address_from_private_key(api_key) if api_key else None

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def __enter__(self) -> TesseraClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        authenticated: bool = False,
        json_body: Any = None,
        content: bytes | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        request_headers = dict(headers or {})
        if authenticated:
            if self._session_token is None:
                self.authenticate()
            request_headers["Authorization"] = f"Bearer {self._session_token}"
        if content is not None:
            request_headers.setdefault("Content-Type", "application/json")
        if method in ("POST", "PUT"):
            # One key per logical write: a retried request can never start a second job.
            request_headers.setdefault("Idempotency-Key", uuid.uuid4().hex)
        attempt = 0
        reauthenticated = False
        while True:
            try:
                response = self._http.request(
                    method, path, json=json_body, content=content, params=params, headers=request_headers
                )
            except httpx.HTTPError as exc:
                raise TesseraError(f"cannot reach the network at {self.base_url}: {exc}") from exc
            if response.status_code == 401 and authenticated and not reauthenticated:
                # The session expired: sign a fresh challenge once and repeat the request.
                reauthenticated = True
                self.authenticate()
                request_headers["Authorization"] = f"Bearer {self._session_token}"
                continue
            # 503 means the network wrote nothing and asks to come back after Retry-After.
            if response.status_code != 503 or attempt >= self.unavailable_retries:
                break
            attempt += 1
            time.sleep(_retry_after_seconds(response, attempt))
        if response.status_code >= 400:
            _raise_for_problem(response.status_code, _problem_of(response))
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._request(method, path, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise ApiError(response.status_code, {}, f"the network answered {path} with non-JSON") from exc

    def _data(self, method: str, path: str, **kwargs: Any) -> Any:
        body = self._json(method, path, **kwargs)
        if not isinstance(body, dict) or "data" not in body:
            raise ApiError(200, {}, f"the network answered {path} without a data member")
        return body["data"]

    def _job(
        self, method: str, path: str, *, wait: bool, progress: ProgressCallback | None, **kwargs: Any
    ) -> dict[str, Any]:
        job = self._data(method, path, authenticated=True, **kwargs)
        if progress is not None:
            progress(job)
        return self.wait_for_job(job["id"], progress=progress) if wait else job

    def _target(self, agent: str | None) -> str:
        if self.did is None:
            self.authenticate()
        assert self.did is not None
        return agent or self.did

    # -- authentication -------------------------------------------------------------------

    def authenticate(self) -> dict[str, Any]:
        """Sign the network's EIP-4361 challenge with the key; return ``{did, address, token, ...}``.

        The network binds a DID to the key on its first authentication; ``self.did`` holds it.
        Raises ``AuthenticationFailed`` without a usable key or when the network refuses, and
        ``ChallengeRefused`` (signing nothing) when the challenge fails ``check_sign_in_challenge``.
        """
        if not self._api_key:
            raise AuthenticationFailed(
                "no agent key: run `tessera login` to store one (it asks without echoing), "
                "or pass --api-key or set TESSERA_API_KEY"
            )
        try:
            secret = ethereum.parse_private_key(self._api_key)
        except ethereum.InvalidKey as exc:
            raise AuthenticationFailed(str(exc)) from exc
        challenge = self._data("POST", "/api/auth/challenge", json_body={"address": self.address})
        if not isinstance(challenge, dict):
            raise ChallengeRefused(f"refusing to sign the sign-in challenge from {self.base_url}: it is not an object")
        assert self.address is not None
        check_sign_in_challenge(
            challenge.get("message"),
            network_url=self.base_url,
            address=self.address,
            chain_id=self._expected_chain_id(challenge.get("chain_id")),
            nonce=challenge.get("nonce"),
        )
        signature = ethereum.sign_personal_message(challenge["message"], secret)
        session = self._data(
            "POST", "/api/auth/verify", json_body={"message": challenge["message"], "signature": signature}
        )
        self._session_token = session["token"]
        self.did = session["did"]
        return session

    def _expected_chain_id(self, announced: Any) -> int:
        """The chain a challenge must name: the one this client was given, else the one the network
        announced beside it, else ``DEFAULT_CHAIN_ID``."""
        if self.chain_id is not None:
            return self.chain_id
        if isinstance(announced, int) and not isinstance(announced, bool) and announced > 0:
            return announced
        return DEFAULT_CHAIN_ID

    def whoami(self) -> dict[str, Any]:
        """Return the authenticated account: ``{did, address, kind, balance, created_at}``.

        A deregistered account cannot sign in any more; it is answered as ``{did, address, deactivated: True}``.
        """
        try:
            return self._data("GET", "/api/account", authenticated=True)
        except AccountDeactivated as refused:
            return {"did": refused.did, "address": self.address, "deactivated": True}

    def credits(self) -> dict[str, Any]:
        """Return the balance and ledger entries of the authenticated account."""
        return self._data("GET", "/api/credits", authenticated=True)

    def pricing(self) -> dict[str, Any]:
        """Return the network's price list (public)."""
        return self._data("GET", "/api/pricing")

    # -- cards ----------------------------------------------------------------------------

    def host_card(
        self,
        path_or_bytes: str | Path | bytes,
        owner: str | None = None,
        agent: str | None = None,
        *,
        wait: bool = True,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Store the card privately under the DID and publish its public copy (exact bytes).

        Without ``agent`` the card is the caller's own. An organisation hosting for an agent it
        owns passes ``owner`` (its own DID) and ``agent``. Refuses cards with scaffold
        placeholders (``CardHasPlaceholders``) before contacting the network.
        """
        if (owner is None) != (agent is None):
            raise TesseraError("--owner and --agent go together")
        body = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
        pointers = find_placeholders_in_bytes(body)
        if pointers:
            raise CardHasPlaceholders(pointers)
        if len(body) > MAX_CARD_BYTES:
            raise TesseraError(f"the card is {len(body)} bytes; the network accepts at most {MAX_CARD_BYTES}")
        target = self._target(agent)
        if owner is not None and owner != self.did:
            raise TesseraError(f"--owner {owner} is not the authenticated account {self.did}")
        return self._job("PUT", f"/api/agents/{quote(target)}/card", content=body, wait=wait, progress=progress)

    def get_card(self, agent: str | None = None) -> dict[str, Any]:
        """Return the private view of a hosted card: ``{did, published, card, etag, ...}``."""
        return self._data("GET", f"/api/agents/{quote(self._target(agent))}/card", authenticated=True)

    def card_unpublish(
        self, agent: str | None = None, *, wait: bool = True, progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """Stop serving the public copy; the private card stays (``published: false``)."""
        return self._job(
            "DELETE", f"/api/agents/{quote(self._target(agent))}/card/public", wait=wait, progress=progress
        )

    def set_card(
        self,
        uri: str,
        agent: str | None = None,
        *,
        wait: bool = True,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Register a card URI in the registry; it then appears as the DID document's AgentService.

        On a network whose registry is on a chain, the key signs the write (``sign_registry_write``).
        """
        target = self._target(agent)
        return self._signed_write(
            "set-card",
            target,
            lambda signed: self._job(
                "PUT",
                f"/api/agents/{quote(target)}/registry/card-uri",
                json_body={"uri": uri, **signed},
                wait=wait,
                progress=progress,
            ),
            uri=uri,
        )

    # -- public reads ---------------------------------------------------------------------

    def get_agent_card(self, did: str) -> bytes:
        """Return the public card's exact bytes (public, no key needed)."""
        return self._request("GET", f"/api/agent-card/{quote(did)}").content

    def get_did(self, did: str, full: bool = False) -> dict[str, Any]:
        """Resolve a DID: its document, or with ``full`` the DID resolution result with metadata.

        A deactivated DID answers 410; with ``full`` that result (``deactivated: true``) is
        returned rather than raised.
        """
        accept = "application/did-resolution" if full else "application/did+json"
        try:
            response = self._http.get(f"/api/did/{quote(did)}", headers={"Accept": accept})
        except httpx.HTTPError as exc:
            raise TesseraError(f"cannot reach the network at {self.base_url}: {exc}") from exc
        body = _problem_of(response)
        if response.status_code == 410 and full and body:
            return body
        if response.status_code == 410:
            raise ApiError(
                410,
                {"code": "did_deactivated", "title": "DID deactivated", "detail": f"{did} was deregistered"},
            )
        if response.status_code >= 400:
            # A resolution error, else the problem document a proxy or the service itself answered.
            error = (body.get("didResolutionMetadata") or {}).get("error") or body
            problem = error if isinstance(error, dict) else {"title": str(error)}
            raise ApiError(response.status_code, problem)
        if not body:
            raise ApiError(response.status_code, {}, f"the network answered the DID {did} without a DID document")
        return body

    def registry(self, did: str | None = None, full: bool = False) -> dict[str, Any]:
        """Read a registry record (authenticated; ``did`` defaults to the caller's own).

        ``full`` adds the cards, the contract, the ERC-8004 identity (``{agentId, agentRegistry}``
        on a chain, else ``None``) and ``history``: the record's newest writes, newest first.
        """
        params = {"full": "true"} if full else None
        return self._data("GET", f"/api/agents/{quote(self._target(did))}/registry", authenticated=True, params=params)

    def contract_version(self, name: str = REGISTRY_CONTRACT) -> str:
        """Return the version of a network contract (``GET /api/contracts/current``)."""
        return str(self._data("GET", "/api/contracts/current", params={"name": name})["version"])

    # -- deregistration -------------------------------------------------------------------

    def deregister_agent(
        self,
        agent_did: str | None = None,
        *,
        wait: bool = True,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Remove the agent's registry record and both cards (self-service; ``agent_did`` defaults to self).

        Checks the registry contract is 1.7.0 or newer first (``RegistryTooOld``). A record naming
        an owner raises ``OwnerNamedDeregistration``.
        """
        version = self.contract_version(REGISTRY_CONTRACT)
        try:
            too_old = parse_version(version) < MINIMUM_DEREGISTER_VERSION
        except ValueError:
            too_old = True
        if too_old:
            raise RegistryTooOld(version)
        target = self._target(agent_did)
        return self._signed_write(
            "deregister",
            target,
            lambda signed: self._job(
                "DELETE", f"/api/agents/{quote(target)}", json_body=signed or None, wait=wait, progress=progress
            ),
        )

    # -- registry writes on a chain -------------------------------------------------------

    def _signed_write(
        self,
        operation: str,
        did: str,
        send: Callable[[dict[str, Any]], dict[str, Any]],
        uri: str | None = None,
        *,
        owner_did: str | None = None,
        consent: str | None = None,
    ) -> dict[str, Any]:
        """``send({})``; when the network's registry is on a chain and answers that the write needs an
        EIP-712 signature, ``send`` again with ``{"signature", "deadline"}`` of the typed data the network
        hands out for ``operation`` of ``did`` (``sign_registry_write`` checks it first)."""
        try:
            return send({})
        except ApiError as refused:
            if refused.code != "registry_signature_required":
                raise
        typed = self._data(
            "POST",
            f"/api/agents/{quote(did)}/registry/typed-data",
            authenticated=True,
            json_body={"operation": operation, "uri": uri, "owner": owner_did, "consent": consent},
        )["typed_data"]
        if typed is None:
            raise RegistryWriteRefused(f"the network asks for a signature of {operation} but gives nothing to sign")
        signature = self.sign_registry_write(typed, operation, did, uri, owner_did=owner_did)
        return send({"signature": signature, "deadline": typed["message"]["deadline"]})

    def _address_of(self, did: str) -> str:
        """The address of the key of account ``did``, from its public DID document."""
        for method in self.get_did(did).get("verificationMethod", []):
            account = method.get("blockchainAccountId") if isinstance(method, dict) else None
            if isinstance(account, str) and account.startswith("eip155:"):
                return account.rsplit(":", 1)[-1]
        raise TesseraError(f"the DID document of {did} names no key address")

    def _expected_write(self, operation: str, primary: str, did: str, uri: str | None, owner_did: str | None) -> dict:
        """The members of the message of ``primary`` that say exactly this write (addresses lower-cased)."""
        from app.chain.typed_data import ZERO_ADDRESS

        expected: dict[str, Any] = {"did": did}
        if operation == "set-card":
            expected["cardURI"] = uri
            if primary == "Register":
                expected.update(agent=self.address, owner=ZERO_ADDRESS)
        elif operation == "revoke-owner":
            expected["owner"] = ZERO_ADDRESS
        elif operation in ("set-owner", "approve-consent"):
            if owner_did is None:
                raise RegistryWriteRefused(f"refusing to sign {operation} of {did}: no owner was named")
            # The organisation names itself (the agent's address from its DID document); the agent names
            # the organisation of the consent it reviewed.
            owner = self.address if operation == "set-owner" else self._address_of(owner_did)
            expected["owner"] = owner
            if primary == "Register":
                agent = self._address_of(did) if operation == "set-owner" else self.address
                expected.update(agent=agent, cardURI="")
        return {name: value.lower() if name in ("agent", "owner") else value for name, value in expected.items()}

    def sign_registry_write(
        self, typed_data: Any, operation: str, did: str, uri: str | None = None, *, owner_did: str | None = None
    ) -> str:
        """Sign the network's EIP-712 typed data of ``operation`` of ``did`` with this key; the 0x-hex signature.

        ``operation`` is ``set-card`` (of ``uri``), ``deregister``, ``set-owner`` (this organisation
        asking to own agent ``did``: ``owner_did`` is its own DID), ``approve-consent`` (this agent
        accepting ``owner_did``) or ``revoke-owner``. The typed data is rebuilt from its domain and the
        members of its message that the registry's type names, after checking they say exactly this
        write of this DID (its URI, its owner, its agent); anything else raises ``RegistryWriteRefused``
        and nothing is signed.
        """
        # eth-account is loaded only by a network whose registry is on a chain.
        from app.chain.typed_data import DOMAIN_NAME, TYPES, registry_message, typed_data_digest

        allowed = {
            "set-card": ("Register", "SetCard"),
            "deregister": ("Deregister",),
            "set-owner": ("Register", "SetOwner"),
            "approve-consent": ("Register", "SetOwner"),
            "revoke-owner": ("SetOwner",),
        }[operation]
        refusal = f"refusing to sign the registry write the network sent for {operation} of {did}"
        if not isinstance(typed_data, dict):
            raise RegistryWriteRefused(f"{refusal}: it is not an object")
        primary, message, domain = (typed_data.get(key) for key in ("primaryType", "message", "domain"))
        if primary not in allowed or not isinstance(message, dict) or not isinstance(domain, dict):
            raise RegistryWriteRefused(f"{refusal}: it is a {primary!r}, not one of {', '.join(allowed)}")
        expected = self._expected_write(operation, primary, did, uri, owner_did)
        wrong = []
        for name, value in expected.items():
            found = message.get(name)
            if (found.lower() if name in ("agent", "owner") and isinstance(found, str) else found) != value:
                wrong.append(f"{name} {found!r} (expected {value!r})")
        if domain.get("name") != DOMAIN_NAME:
            wrong.append(f"domain {domain.get('name')!r} (expected {DOMAIN_NAME!r})")
        if wrong:
            raise RegistryWriteRefused(f"{refusal}: it names " + ", ".join(wrong))
        try:
            rebuilt = registry_message(
                primary,
                {field["name"]: message[field["name"]] for field in TYPES[primary]},
                chain_id=int(domain["chainId"]),
                registry_address=str(domain["verifyingContract"]),
            )
            digest = typed_data_digest(rebuilt)
        except (KeyError, TypeError, ValueError) as exc:
            raise RegistryWriteRefused(f"{refusal}: {exc!r}") from exc
        assert self._api_key is not None
        return ethereum.sign_digest(digest, self._api_key)

    # -- organisation consent -------------------------------------------------------------

    def consent_request(self, owner: str, agent: str) -> dict[str, Any]:
        """As organisation ``owner``, ask ``agent`` for consent; return ``{id, consent_url, ...}``."""
        if self.did is None:
            self.authenticate()
        if owner != self.did:
            raise TesseraError(f"--owner {owner} is not the authenticated account {self.did}")
        # On a chain registry the organisation also signs the write naming itself owner (``set-owner``).
        return self._signed_write(
            "set-owner",
            agent,
            lambda signed: self._data(
                "POST", "/api/consents", authenticated=True, json_body={"owner": owner, "agent": agent, **signed}
            ),
            owner_did=owner,
        )

    def get_consent(self, link_or_id: str) -> dict[str, Any]:
        """Return a consent this account is party to: ``{id, owner, agent, state, message, ...}``."""
        return self._data("GET", f"/api/consents/{quote(consent_id_from_link(link_or_id))}", authenticated=True)

    def review_consent(self, link_or_id: str, owner: str | None = None) -> dict[str, Any]:
        """Return the consent behind a link once it is checked to be safe for this agent to sign.

        Its message must be exactly the network's consent text naming this network, this agent's
        DID, this consent and the owner the consent names — ``owner`` too when given. Anything
        else raises ``ConsentRefused``.
        """
        consent_id = consent_id_from_link(link_or_id)
        consent = self.get_consent(consent_id)
        agent_did = self._target(None)
        expected_owner = owner if owner is not None else consent.get("owner")
        message = consent.get("message")
        try:
            terms = parse_consent_message(message if isinstance(message, str) else "")
        except InvalidConsentMessage as exc:
            raise ConsentRefused(f"refusing to sign consent {consent_id}: {exc}") from exc
        expectations = [
            ("network", terms.network_host, urlparse(self.base_url).netloc),
            ("agent", terms.agent_did, agent_did),
            ("agent", consent.get("agent"), agent_did),
            ("owner", terms.owner_did, expected_owner),
            ("owner", consent.get("owner"), expected_owner),
            ("consent", terms.consent_id, consent_id),
            ("consent", consent.get("id"), consent_id),
        ]
        mismatches = [f"{name} {found} (expected {wanted})" for name, found, wanted in expectations if found != wanted]
        if mismatches:
            raise ConsentRefused(f"refusing to sign consent {consent_id}: it names " + ", ".join(mismatches))
        return consent

    def consent_approve(
        self, link_or_id: str, owner: str, *, wait: bool = True, progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """As the agent, accept ``owner`` by signing the consent behind a link; the record then names it.

        Signs only after ``review_consent`` accepts the consent for ``owner``; otherwise
        ``ConsentRefused`` is raised and nothing is signed or sent.
        """
        consent = self.review_consent(link_or_id, owner)
        consent_id = consent_id_from_link(link_or_id)
        assert self._api_key is not None
        signature = ethereum.sign_personal_message(consent["message"], self._api_key)
        # On a chain registry the agent also signs the write naming the owner (``approve-consent``).
        return self._signed_write(
            "approve-consent",
            self._target(None),
            lambda signed: self._job(
                "POST",
                f"/api/consents/{quote(consent_id)}/approve",
                json_body={"signature": signature, **({"registry_signature": signed["signature"]} if signed else {})},
                wait=wait,
                progress=progress,
            ),
            owner_did=consent["owner"],
            consent=consent_id,
        )

    def owner_of(self, agent_did: str | None = None) -> str | None:
        """Return the owner organisation the agent's registry record names (``None``: no owner or no record)."""
        try:
            return self.registry(self._target(agent_did)).get("owner")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def revoke_owner(
        self, owner: str | None = None, *, wait: bool = True, progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """As the agent, revoke the owner organisation its registry record names; return the job.

        ``owner`` defaults to the owner the record names now. The agent key signs a revocation
        this client writes itself (network host, agent DID, owner DID, the current time). A
        record naming another owner, or none, raises ``ApiError`` (409 ``owner_not_named``).
        """
        agent_did = self._target(None)
        owner = owner or self.owner_of(agent_did)
        if not owner:
            raise TesseraError(f"the registry record of {agent_did} names no owner")
        issued_at = format_date_time(datetime.now(UTC))
        message = format_revocation_message(
            OwnerRevocation(
                network_host=urlparse(self.base_url).netloc, agent_did=agent_did, owner_did=owner, issued_at=issued_at
            )
        )
        assert self._api_key is not None
        signature = ethereum.sign_personal_message(message, self._api_key)
        # On a chain registry naming the owner, the agent also signs its release (``revoke-owner``).
        return self._signed_write(
            "revoke-owner",
            agent_did,
            lambda signed: self._job(
                "POST",
                f"/api/agents/{quote(agent_did)}/owner/revoke",
                json_body={"owner": owner, "issued_at": issued_at, "signature": signature, **_registry_fields(signed)},
                wait=wait,
                progress=progress,
            ),
            owner_did=owner,
        )

    # -- jobs -----------------------------------------------------------------------------

    def get_job(self, job_id: str) -> dict[str, Any]:
        """Return a job started by this account."""
        return self._data("GET", f"/api/jobs/{quote(job_id)}", authenticated=True)

    def queue_status(self) -> dict[str, Any] | None:
        """The network's job queue as ``/readyz`` reports it (``consuming``, oldest queued age), or None."""
        try:
            response = self._http.get("/readyz")
        except httpx.HTTPError:
            return None
        queue = _problem_of(response).get("queue")
        return queue if isinstance(queue, dict) else None

    def wait_for_job(
        self, job_id: str, progress: ProgressCallback | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Poll a job until it is final and return it; ``progress(job)`` is called after each poll.

        A failed job raises ``JobFailed`` (or the matching typed error, e.g. ``InsufficientCredits``
        when credits ran out before the job ran); ``JobTimeout`` after ``timeout`` seconds.
        """
        deadline = time.monotonic() + (self.job_timeout if timeout is None else timeout)
        while True:
            job = self.get_job(job_id)
            if progress is not None:
                progress(job)
            if job.get("state") in FINAL_JOB_STATES:
                break
            if time.monotonic() >= deadline:
                raise JobTimeout(job)
            time.sleep(self.poll_interval)
        if job["state"] == "failed":
            error = job.get("error") or {}
            if error.get("code") == "insufficient_credits" and "required" in error:
                raise InsufficientCredits(int(error["required"]), int(error.get("available", 0)), error)
            if error.get("code") == "owner_named_record" and "owner" in error:
                raise OwnerNamedDeregistration(error["owner"], error)
            raise JobFailed(job)
        return job


def dumps(document: Any) -> str:
    """Serialise a result for ``--json`` output (one JSON document)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
