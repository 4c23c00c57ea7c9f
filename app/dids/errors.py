"""`DidResolutionFailed`, the one failure of DID resolution and verification-method lookup (pure)."""

from __future__ import annotations


class DidResolutionFailed(Exception):
    """A DID or one of its verification methods cannot be used; `code` is a stable snake_case reason.

    Codes: `did_resolution_failed` (the DID or its document cannot be had or read),
    `verification_method_not_found`, `verification_method_not_authorized`. Credential verification
    reports them as the failure of the proof that named the method.
    """

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}")
