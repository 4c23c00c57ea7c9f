"""DID resolution for verification: did:key, did:web (SSRF-guarded) and the network's own DIDs."""

from app.credentials.dids.resolver import DidResolver, resolve_verification_method
from app.credentials.dids.web import DidWebResolver

__all__ = ["DidResolver", "DidWebResolver", "resolve_verification_method"]
