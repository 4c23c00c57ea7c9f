"""Authentication context classes (acr) and methods (amr, RFC 8176) of a sign-in; pure, no Flask.

Three levels, each stronger than the one before: one first factor (the e-mail code, or a linked
account's sign-in at its platform), a passkey with user verification, and a first factor with a
passkey. What a tree offers is its sign-in policy (`app.tenancy.models`); what a
request asks for is `acr_values` (voluntary, in order of preference) or the `claims` parameter's
id_token `acr` (essential when it says so). A sign-in always claims the class it met, never one
asked for but not met.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.tenancy.models import POLICY_EMAIL_CODE, POLICY_PASSKEY_ALONE, POLICY_PASSKEY_SECOND_FACTOR

ACR_EMAIL_CODE = "urn:tessera:acr:email-code"
ACR_PASSKEY = "urn:tessera:acr:passkey"
ACR_MFA = "urn:tessera:acr:mfa"
ACR_LINKED_ACCOUNT = "urn:tessera:acr:linked-account"
ACR_VALUES = (ACR_EMAIL_CODE, ACR_PASSKEY, ACR_MFA, ACR_LINKED_ACCOUNT)
_LEVELS = {ACR_EMAIL_CODE: 1, ACR_PASSKEY: 2, ACR_MFA: 3, ACR_LINKED_ACCOUNT: 1}

OTP = "otp"
# A sign-in at a linked platform (federated). RFC 8176's registry has no value for it; "fed" is the
# one Microsoft Entra ID and others send, so relying parties already know it.
FED = "fed"
FIRST_FACTORS = frozenset({OTP, FED})
PASSKEY_METHODS = frozenset({"hwk", "swk"})
# The method of every sign-in before methods were recorded: the e-mail code was the only one.
LEGACY_AMR = OTP

_REACHABLE = {POLICY_EMAIL_CODE: (1,), POLICY_PASSKEY_SECOND_FACTOR: (3,), POLICY_PASSKEY_ALONE: (1, 2, 3)}


@dataclass(frozen=True)
class Target:
    """What a request must reach (`required`, else it is refused) and should reach (`wanted`)."""

    wanted: int
    required: int


def combine(*methods: Iterable[str]) -> str:
    """The amr of passing all `methods` (space-separated text), with `mfa` once a first factor and a
    passkey were both passed."""
    seen: list[str] = []
    for group in methods:
        for method in group.split() if isinstance(group, str) else group:
            if method and method != "mfa" and method not in seen:
                seen.append(method)
    if FIRST_FACTORS & set(seen) and PASSKEY_METHODS & set(seen):
        seen.append("mfa")
    return " ".join(seen)


def level_of(amr: str | None) -> int:
    """0 (not signed in), 1 (a first factor), 2 (passkey) or 3 (both)."""
    methods = set((amr or "").split())
    passkey = bool(PASSKEY_METHODS & methods) and "user" in methods
    first = bool(FIRST_FACTORS & methods)
    if passkey and first:
        return 3
    return 2 if passkey else 1 if first else 0


def acr_of(amr: str | None) -> str | None:
    """The class a sign-in met; at the first level, the one naming how (e-mail code or linked account)."""
    level = level_of(amr)
    if level == 1 and OTP not in (amr or "").split():
        return ACR_LINKED_ACCOUNT
    return next((value for value, at in _LEVELS.items() if at == level), None)


def claimed_acr(amr: str | None, requested: Sequence[str]) -> str | None:
    """The acr an id_token claims: the first requested class the sign-in met, else the one it met."""
    level = level_of(amr)
    met = [value for value in requested if value in _LEVELS and _LEVELS[value] <= level]
    return met[0] if met else acr_of(amr)


def sign_in_complete(policy: str, amr: str | None) -> bool:
    """Whether a sign-in that passed `amr` is finished under a tree's `policy`: it reached the least
    the policy accepts. Only a finished sign-in opens a single sign-on session and the account page;
    one still waiting for its next step holds nothing beyond its request."""
    reachable = _REACHABLE.get(policy, _REACHABLE[POLICY_EMAIL_CODE])
    return level_of(amr) >= min(reachable)


def passkeys_allowed(policy: str) -> bool:
    return policy in (POLICY_PASSKEY_SECOND_FACTOR, POLICY_PASSKEY_ALONE)


def passkey_alone_allowed(policy: str) -> bool:
    return policy == POLICY_PASSKEY_ALONE


def target(policy: str, requested: Sequence[str], essential: bool) -> Target | None:
    """The classes a request of a tree with `policy` must and should reach; None when the request's
    essential acr cannot be reached under the policy (it must then be refused)."""
    reachable = _REACHABLE.get(policy, _REACHABLE[POLICY_EMAIL_CODE])
    floor, ceiling = min(reachable), max(reachable)
    meetable = [_LEVELS[value] for value in requested if value in _LEVELS and _LEVELS[value] <= ceiling]
    if essential and requested:
        if not meetable:
            return None
        return Target(wanted=max(floor, meetable[0]), required=max(floor, min(meetable)))
    return Target(wanted=max(floor, meetable[0]) if meetable else floor, required=floor)
