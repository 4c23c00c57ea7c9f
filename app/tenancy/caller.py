"""The acting caller of a request, as services see it (no Flask: services and tasks take it as a value)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    """Who is calling (the token's client) and where in its tree the request acts.

    `path` and `acting_path` are materialised paths ("/1/5/") used for subtree filters;
    `is_master` describes the token's own client, whatever node the request acts in.
    """

    client_id: int
    token_id: int
    is_master: bool
    root_id: int
    path: str
    acting_client_id: int
    acting_path: str
