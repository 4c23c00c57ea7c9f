"""Issuing credentials: issuer keys per client, their did:web documents, issue and derive (VC API)."""
