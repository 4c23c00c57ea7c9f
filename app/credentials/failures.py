"""`ProofCheckFailed`, the one failure of verification, below every verification module (pure).

The JSON-LD processor, DID resolution and the cryptosuites all raise it; it lives apart from
`cryptosuites.base` so that those modules do not import each other in a circle.
"""

from __future__ import annotations


class ProofCheckFailed(Exception):
    """A proof (or the credential around it) did not verify; `code` is a stable snake_case reason.

    Codes used across the engine include `invalid_signature`, `unknown_cryptosuite`,
    `malformed_proof_value`, `malformed_proof`, `verification_method_not_authorized`,
    `context_not_allowed`, `undefined_term`, `canonicalization_limit`, `did_resolution_failed`,
    `unsupported_key_type`, `invalid_proof_configuration`, `pointer_not_found`, and the budget of one credential:
    `too_many_proofs`, `verification_size_limit`, `verification_time_limit`.
    """

    code: str = "proof_check_failed"

    def __init__(self, code: str | None = None, detail: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.detail = detail or self.code.replace("_", " ")
        super().__init__(f"{self.code}: {self.detail}")

    def as_dict(self) -> dict[str, str]:
        """The `{code, detail}` pair reported in verification results."""
        return {"code": self.code, "detail": self.detail}
