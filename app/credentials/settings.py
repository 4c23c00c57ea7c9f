"""Settings of verifiable credentials: contexts, outbound guards, status lists, verification budget.

Built once by `create_app` (see `app.settings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.credentials.jsonld.loader import make_document_loader
from app.settings import env, feature_settings

MIN_STATUS_LIST_BITS = 131_072


def host_list(value: Any) -> frozenset[str]:
    """`host:port` pairs from a comma-separated text or a list, lower-cased."""
    if isinstance(value, list | tuple | set | frozenset):
        return frozenset(str(item).strip().lower() for item in value if str(item).strip())
    return frozenset(item.strip().lower() for item in str(value or "").split(",") if item.strip())


def contexts_dir(value: str) -> str:
    """`value` once the contexts directory it names is read whole: its `urlmap.json` and every file it maps.

    Raises `ValueError` naming what is wrong, so start-up refuses a directory that would fail every
    verification.
    """
    if not value.strip():
        return ""
    try:
        make_document_loader(Path(value))
    except (OSError, ValueError) as error:
        raise ValueError(f"{value} is not a readable JSON-LD contexts directory ({error})") from None
    return value


@feature_settings
@dataclass(frozen=True)
class CredentialSettings:
    jsonld_contexts_dir: str = env(
        "JSONLD_CONTEXTS_DIR",
        "",
        "directory of extra allow-listed JSON-LD contexts (`urlmap.json` maps URL → file), added to the built-in "
        "ones (the standard contexts shipped in `app/credentials/jsonld/contexts/`, each pinned by SHA-256); "
        "start-up refuses one it cannot read whole",
        parse=contexts_dir,
    )
    canonicalization_time_limit: float = env(
        "CANONICALIZATION_TIME_LIMIT", 2.0, "seconds one RDF canonicalisation may take"
    )
    did_web_allow_hosts: frozenset[str] = env(
        "DID_WEB_ALLOW_HOSTS",
        frozenset(),
        "host:port pairs did:web resolution may reach despite the private-address guard (tests only)",
        parse=host_list,
    )
    status_list_allow_hosts: frozenset[str] = env(
        "STATUS_LIST_ALLOW_HOSTS",
        frozenset(),
        "host:port pairs status-list fetches may reach despite the private-address guard (tests only)",
        parse=host_list,
    )
    status_list_size: int = env("STATUS_LIST_SIZE", MIN_STATUS_LIST_BITS, "bits per status list (never fewer)")
    status_list_ttl_seconds: int = env("STATUS_LIST_TTL_SECONDS", 300, "how long verifiers may cache a list")
    status_list_cache_max_seconds: float = env(
        "STATUS_LIST_CACHE_MAX_SECONDS", 3600.0, "longest time a fetched foreign status list is cached"
    )
    status_recheck_seconds: float = env(
        "STATUS_RECHECK_SECONDS", 3600.0, "how often foreign status lists of stored credentials are checked again"
    )
    verify_open: bool = env("VC_VERIFY_OPEN", False, "open `/credentials/verify` without a token")
    max_proofs: int = env(
        "VC_MAX_PROOFS", 8, "proofs of one credential; over it, verify and store answer 422 `too_many_proofs`"
    )
    verify_max_values: int = env(
        "VC_VERIFY_MAX_VALUES",
        60_000,
        "JSON values transformed by all proofs of a credential together, estimated up front; over it, 422 "
        "`verification_size_limit`",
    )
    verify_time_limit: float = env(
        "VC_VERIFY_TIME_LIMIT",
        10.0,
        "seconds the verification of one credential may take (a verification job uses at most half of "
        "`JOB_LEASE_SECONDS`)",
    )

    presentation_max_credentials: int = env(
        "VP_MAX_CREDENTIALS",
        32,
        "credentials one presentation may hold; over it, `POST /presentations/verify` answers 422 "
        "`too_many_credentials`",
    )
    presentation_inline_max_proofs: int = env(
        "VP_INLINE_MAX_PROOFS",
        8,
        "proofs (the presentation's and its credentials') a presentation verified in the request may have; "
        "one with more is verified by a job (202, the result in the job)",
    )

    def __post_init__(self) -> None:
        # A list given to `create_app(config=...)` is accepted as well as the environment's text.
        for name in ("did_web_allow_hosts", "status_list_allow_hosts"):
            object.__setattr__(self, name, host_list(getattr(self, name)))
