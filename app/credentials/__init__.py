"""Verifiable credentials: store, status lists, and the pure verification engine."""
