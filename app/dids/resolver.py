"""`DidResolver`: DID documents from did:key, did:web and the network's own DIDs, and the
verification-method lookup the verifier uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.cache import Cache
from app.dids.did_key import resolve_did_key
from app.dids.did_web import DidWebResolver
from app.dids.errors import DidResolutionFailed
from app.dids.verification_methods import (
    VERIFICATION_RELATIONSHIPS,
    VerificationKey,
    find_verification_method,
    is_authorized,
    key_from_verification_method,
    split_did_url,
)

DocumentSource = Callable[[str], dict | None]
MethodResolver = Callable[[str], dict]


@dataclass
class DidResolver:
    """Resolves DIDs by method; `local_documents(did)` (the network's own DIDs) is asked first.

    `web` resolves did:web (see `DidWebResolver` for the SSRF guard); `methods` adds or replaces
    resolvers by method name. did:web documents are cached for `cache_ttl` seconds.
    Every failure raises `DidResolutionFailed`.
    """

    local_documents: DocumentSource | None = None
    web: DidWebResolver = field(default_factory=DidWebResolver)
    methods: dict[str, MethodResolver] = field(default_factory=dict)
    cache_ttl: float = 300.0
    cache_size: int = 1024
    _documents: Cache[dict] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._documents = Cache("did_documents", maxsize=self.cache_size, ttl=self.cache_ttl)

    def resolve(self, did: str) -> dict:
        """The DID document of `did`; raises `DidResolutionFailed("did_resolution_failed")`."""
        did, _ = split_did_url(did)
        if self.local_documents is not None:
            document = self.local_documents(did)
            if document is not None:
                return self._checked(did, document)
        method = did.split(":", 2)[1]
        resolver = self.methods.get(method) or {"key": resolve_did_key, "web": self.web}.get(method)
        if resolver is None:
            raise DidResolutionFailed("did_resolution_failed", f"DID method {method!r} is not supported")
        if method == "key":
            return self._checked(did, resolver(did))
        return self._checked(did, self._cached(did, resolver))

    def resolve_verification_method(
        self, vm_url: str, purpose: str, *, controller: str | None = None
    ) -> VerificationKey:
        """The key of verification method `vm_url`, checked to be authorised for `purpose`.

        The method must be listed under the `purpose` relationship of its DID's document and be
        controlled by that DID; when `controller` (the issuer) is given, that DID must be it.
        Raises `DidResolutionFailed`: `did_resolution_failed`, `verification_method_not_found`,
        `verification_method_not_authorized`.
        """
        did, fragment = split_did_url(vm_url)
        if fragment is None:
            raise DidResolutionFailed(
                "verification_method_not_found", "verificationMethod must be a DID URL with a fragment"
            )
        if purpose not in VERIFICATION_RELATIONSHIPS:
            raise DidResolutionFailed("verification_method_not_authorized", f"unknown proof purpose {purpose!r}")
        if controller is not None and controller != did:
            raise DidResolutionFailed(
                "verification_method_not_authorized", f"verification method belongs to {did}, not to {controller}"
            )
        document = self.resolve(did)
        method = find_verification_method(document, vm_url)
        if method is None:
            raise DidResolutionFailed("verification_method_not_found", f"{vm_url} is not in the DID document")
        if not is_authorized(document, vm_url, purpose):
            raise DidResolutionFailed("verification_method_not_authorized", f"{vm_url} is not authorised for {purpose}")
        key = key_from_verification_method(method, vm_url)
        if key.controller != did:
            raise DidResolutionFailed(
                "verification_method_not_authorized", f"{vm_url} is controlled by {key.controller}, not {did}"
            )
        return key

    def _checked(self, did: str, document: object) -> dict:
        if not isinstance(document, dict) or document.get("id") != did:
            raise DidResolutionFailed("did_resolution_failed", f"the DID document of {did} has another id")
        return document

    def _cached(self, did: str, resolver: MethodResolver) -> dict:
        return self._documents.get_or_build(did, lambda: resolver(did))


def resolve_verification_method(
    vm_url: str, purpose: str, *, resolver: DidResolver | None = None, controller: str | None = None
) -> VerificationKey:
    """`DidResolver.resolve_verification_method` with a default resolver (did:key, did:web)."""
    return (resolver or DidResolver()).resolve_verification_method(vm_url, purpose, controller=controller)
