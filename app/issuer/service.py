"""Use cases of the VC API issuer and holder: issue a credential, derive a disclosure, sign a presentation.

`issue_credential` signs with one of the acting client's keys and, when the subject is a user
of the caller's subtree, stores the result exactly as `POST /v1/vc/issuer/store` would (same
record, verified by the same job), so it reaches the user's list. Which user: `options.userId`
(its DID becomes `credentialSubject.id`, or must equal it), else the user whose DID is
`credentialSubject.id`, if any; otherwise nothing is stored. Only VC 2.0 credentials are stored
(the store's shape rules). The holder's routes take a credential in full or name one stored for
the holder (`{"id": <cid>}`, `cid` an alias). Functions flush, never commit.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from app.credentials import service as credentials_service
from app.credentials import status_lists
from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.engine import current_engine
from app.credentials.models import StoredCredential
from app.credentials.schemas import vc_shape_errors
from app.credentials.service import presentable_credential
from app.db import isoformat, utcnow
from app.errors import NotFound
from app.issuer import keys, proofs
from app.issuer.errors import CredentialNotDerivable, CredentialNotIssuable, NoIssuerKey, PresentationNotSignable
from app.issuer.models import KEY_ACTIVE, ClientIssuerKey
from app.tenancy.caller import Caller
from app.tenancy.service import subtree_client_ids
from app.users.service import find_user_by_did, require_user_visible

CREDENTIALS_V1 = "https://www.w3.org/2018/credentials/v1"
CREDENTIALS_V2 = "https://www.w3.org/ns/credentials/v2"
DATA_INTEGRITY_V2 = "https://w3id.org/security/data-integrity/v2"
STATUS_ENTRY_TYPE = "BitstringStatusListEntry"
# What a holder may never leave out of a selective disclosure, unless the issuer names the pointers:
# without the issuer no verifier accepts it, and without its dates none can tell when it is valid.
DEFAULT_MANDATORY_MEMBERS = {2: ("issuer", "validFrom", "validUntil"), 1: ("issuer", "issuanceDate", "expirationDate")}
_REFERENCE_MEMBERS = ("id", "cid")


@dataclass(frozen=True)
class IssuedCredential:
    """A signed credential, its JSON text, and the stored record when it was stored for a user."""

    credential: dict
    text: str
    record: StoredCredential | None
    status_entry_id: str | None = None


def suite_context() -> SuiteContext:
    """JSON-LD processing as the verifier does it (same loader, same limits)."""
    engine = current_engine()
    return SuiteContext(loader=engine.loader, limits=engine.limits)


def _refuse(member: str, message: str) -> CredentialNotIssuable:
    return CredentialNotIssuable(message, errors={member: [message]})


def _version(credential: dict) -> int:
    context = credential.get("@context")
    first = context[0] if isinstance(context, list) and context else context
    if first == CREDENTIALS_V2:
        return 2
    if first == CREDENTIALS_V1:
        return 1
    raise _refuse("credential.@context", f"Must start with {CREDENTIALS_V2} or {CREDENTIALS_V1}.")


def _choose_key(caller: Caller, options: dict) -> tuple[ClientIssuerKey, str]:
    """(key, cryptosuite) from `options.keyId` / `options.cryptosuite`.

    Without a key: the newest active key the suite can use. Without a suite: the key's type's
    default suite (`proofs.DEFAULT_SUITE`). With neither: the client's newest active key.
    """
    suite = options.get("cryptosuite")
    key_id = options.get("keyId")
    if key_id is not None:
        key = keys.get_key(caller.acting_client_id, key_id)
        if key is None:
            raise NoIssuerKey("keyId is not a key of this client.", errors={"options.keyId": ["Unknown key."]})
        if key.state != KEY_ACTIVE:
            raise NoIssuerKey("The key is retired.", errors={"options.keyId": ["The key is retired."]})
        suite = suite or proofs.DEFAULT_SUITE[key.key_type]
        if key.key_type not in proofs.SUITE_KEY_TYPES[suite]:
            raise NoIssuerKey(
                f"{suite} cannot sign with a {key.key_type} key.",
                errors={"options.keyId": [f"A {key.key_type} key cannot sign {suite} proofs."]},
            )
        return key, suite
    types = proofs.SUITE_KEY_TYPES[suite] if suite else proofs.KEY_TYPES
    key = keys.newest_active_key(caller.acting_client_id, types)
    if key is None:
        wanted = " or ".join(types)
        raise NoIssuerKey(
            f"This client has no active {wanted} key; create one with POST /v1/issuer/keys.",
            errors={"options.cryptosuite": [f"No active {wanted} key."]},
        )
    return key, suite or proofs.DEFAULT_SUITE[key.key_type]


def _set_issuer(credential: dict, key: ClientIssuerKey) -> str:
    """Fill in or check `issuer`; returns the verification method matching it."""
    methods = keys.verification_method_ids(key)
    controllers = {keys.client_did(key.client_id): methods["did:web"], keys.did_key_of(key): methods["did:key"]}
    issuer = credential.get("issuer")
    if issuer is None:
        credential["issuer"] = keys.client_did(key.client_id)
        return methods["did:web"]
    issuer_id = issuer.get("id") if isinstance(issuer, dict) else issuer
    if issuer_id not in controllers:
        raise _refuse(
            "credential.issuer",
            f"Must be this client's DID {keys.client_did(key.client_id)} or the key's did:key (or be left out).",
        )
    return controllers[issuer_id]


def _status_entry(caller: Caller, credential: dict, request: Any, version: int) -> str:
    if not isinstance(request, dict) or request.get("type", STATUS_ENTRY_TYPE) != STATUS_ENTRY_TYPE:
        raise _refuse("options.credentialStatus", f'Must be {{"type": "{STATUS_ENTRY_TYPE}", "statusPurpose"}}.')
    purpose = request.get("statusPurpose", "revocation")
    if purpose not in ("revocation", "suspension"):
        raise _refuse("options.credentialStatus.statusPurpose", "Must be revocation or suspension.")
    if version != 2:
        raise _refuse("options.credentialStatus", "Bitstring Status List entries need a VC 2.0 credential.")
    entry = status_lists.allocate_status_entry(caller.acting_client_id, purpose)
    status = status_lists.credential_status_of(entry)
    existing = credential.get("credentialStatus")
    if existing is None:
        credential["credentialStatus"] = status
    else:
        credential["credentialStatus"] = [*(existing if isinstance(existing, list) else [existing]), status]
    return entry.id


def _subject_user(caller: Caller, credential: dict, user_id: Any):
    """The user to store for (setting `credentialSubject.id` from `options.userId`), or None."""
    subject = credential.get("credentialSubject")
    single = subject if isinstance(subject, dict) else None
    if user_id is not None:
        try:
            user = require_user_visible(user_id, caller.acting_path)
        except NotFound:
            raise _refuse("options.userId", "Not a user of this client.") from None
        if single is None:
            raise _refuse("credential.credentialSubject", "Must be one object to be stored for a user.")
        single.setdefault("id", user.did)
        if single["id"] != user.did:
            raise _refuse("credential.credentialSubject.id", "Must be the DID of options.userId (or be left out).")
        return user
    did = single.get("id") if single is not None else None
    user = find_user_by_did(did) if isinstance(did, str) and did.startswith("did:") else None
    if user is None or user.client_id not in subtree_client_ids(caller.acting_path):
        return None
    return user


def issue_credential(caller: Caller, credential: dict, options: dict) -> IssuedCredential:
    """Sign `credential` for the acting client (VC API issue); stores it for its subject user.

    `options`: `cryptosuite`, `keyId`, `mandatoryPointers` (bbs-2023, ecdsa-sd-2023; by default
    `default_mandatory_pointers`),
    `credentialStatus` (`{"type": "BitstringStatusListEntry", "statusPurpose"}` allocates an
    entry of the service's lists; for the selective-disclosure suites `/credentialStatus` is
    then always mandatory), `credentialId` (becomes `id`), `userId`.
    Raises `CredentialNotIssuable` / `NoIssuerKey` (422).
    """
    if "proof" in credential:
        raise _refuse("credential.proof", "Send the credential without a proof.")
    credential = copy.deepcopy(credential)
    version = _version(credential)
    if options.get("credentialId") is not None:
        credential["id"] = options["credentialId"]
    types = credential.get("type")
    if not (types == "VerifiableCredential" or (isinstance(types, list) and "VerifiableCredential" in types)):
        raise _refuse("credential.type", "Must include VerifiableCredential.")
    if not isinstance(credential.get("credentialSubject"), dict | list) or not credential["credentialSubject"]:
        raise _refuse("credential.credentialSubject", "Must be an object or an array of objects.")
    key, suite = _choose_key(caller, options)
    pointers = options.get("mandatoryPointers")
    if pointers and suite not in proofs.SELECTIVE_DISCLOSURE_SUITES:
        raise _refuse("options.mandatoryPointers", "Only bbs-2023 and ecdsa-sd-2023 take mandatory pointers.")
    verification_method = _set_issuer(credential, key)
    if version == 1:
        context = credential["@context"] if isinstance(credential["@context"], list) else [credential["@context"]]
        if DATA_INTEGRITY_V2 not in context:
            credential["@context"] = [*context, DATA_INTEGRITY_V2]
        credential.setdefault("issuanceDate", isoformat(utcnow().replace(microsecond=0)))
    if pointers is None:
        pointers = default_mandatory_pointers(credential) if suite in proofs.SELECTIVE_DISCLOSURE_SUITES else []
    user = _subject_user(caller, credential, options.get("userId"))
    if user is not None and version != 2:
        if options.get("userId") is not None:
            raise _refuse("options.userId", "Only VC 2.0 credentials can be stored for a user.")
        user = None
    entry_id = None
    if options.get("credentialStatus") is not None:
        entry_id = _status_entry(caller, credential, options["credentialStatus"], version)
    if suite in proofs.SELECTIVE_DISCLOSURE_SUITES and "credentialStatus" in credential:
        # A holder must not be able to hide that a credential can be revoked.
        pointers = [*pointers, "/credentialStatus"] if "/credentialStatus" not in pointers else pointers
    try:
        signed = proofs.add_proof(
            credential,
            cryptosuite=suite,
            key_type=key.key_type,
            private_key=keys.private_key_of(key),
            verification_method=verification_method,
            ctx=suite_context(),
            mandatory_pointers=pointers,
        )
    except ProofCheckFailed as error:
        raise CredentialNotIssuable(
            f"The credential cannot be signed: {error.detail}", errors={"credential": [error.detail]}, reason=error.code
        ) from None
    text = json.dumps(signed, separators=(",", ":"), ensure_ascii=False)
    record = None
    if user is not None:
        problems = vc_shape_errors(signed)
        if problems:
            if options.get("userId") is not None:
                raise CredentialNotIssuable("The credential cannot be stored for the user.", errors=problems)
        else:
            record, _ = credentials_service.store_credential(caller, signed, text)
    return IssuedCredential(signed, text, record, entry_id)


def default_mandatory_pointers(credential: dict) -> list[str]:
    """The pointers a selective-disclosure base proof keeps disclosed when the issuer names none:
    `/issuer` and the validity dates the credential has (`DEFAULT_MANDATORY_MEMBERS`)."""
    names = DEFAULT_MANDATORY_MEMBERS[_version(credential)]
    return [f"/{name}" for name in names if name in credential]


def names_stored_credential(value: dict) -> bool:
    """Whether `value` names a stored credential (`{"id": <cid>}` or `{"cid": <cid>}`) instead of being one."""
    return len(value) == 1 and next(iter(value)) in _REFERENCE_MEMBERS


def stored_or_given(value: dict, member: str, *, caller: Caller | None = None, user_id: int | None = None) -> dict:
    """`value` itself, or the stored credential it names (`names_stored_credential`) for the holder:
    the caller's subtree, or the user `user_id`. Raises `CredentialNotPresentable` (422)."""
    if names_stored_credential(value):
        name, cid = next(iter(value.items()))
        return presentable_credential(cid, f"{member}.{name}", caller=caller, user_id=user_id)
    return value


def derive_credential(
    credential: dict, options: dict, *, caller: Caller | None = None, user_id: int | None = None
) -> dict:
    """The holder's derived credential disclosing `options.selectivePointers` (VC API derive).

    `credential` is the credential with its base proof, or names one stored for the holder
    (`stored_or_given`). Raises `CredentialNotDerivable` (422) when the credential carries no usable
    base proof or a pointer selects nothing, `CredentialNotPresentable` (422) for a name of nothing.
    """
    credential = stored_or_given(credential, "verifiableCredential", caller=caller, user_id=user_id)
    pointers = options.get("selectivePointers") or []
    header = options.get("presentationHeader")
    try:
        return proofs.derive(
            credential, pointers, suite_context(), presentation_header=header.encode("utf-8") if header else b""
        )
    except ProofCheckFailed as error:
        raise CredentialNotDerivable(
            f"No derived credential can be made: {error.detail}",
            errors={"verifiableCredential": [error.detail]},
            reason=error.code,
        ) from None


def create_presentation(caller: Caller, presentation: dict, options: dict) -> dict:
    """A presentation signed by the acting client as holder (VC API create presentation).

    The proof is an `authentication` proof of a signature suite, with `options.challenge` and
    `options.domain`, made with `options.verificationMethod` (the did:web or did:key method of an
    active key of the client), `options.keyId`, or the client's newest active key a suite can use
    (`options.cryptosuite`, default the key type's). `holder` is the DID of that method (the client's
    did:web, or the key's did:key), filled in or checked. Entries of `verifiableCredential` naming a
    stored credential (`stored_or_given`) are replaced by it. Raises `PresentationNotSignable`,
    `NoIssuerKey`, `CredentialNotPresentable` (422).
    """
    if "proof" in presentation:
        raise _refuse_presentation("presentation.proof", "Send the presentation without a proof.")
    presentation = copy.deepcopy(presentation)
    context = presentation.get("@context")
    first = context[0] if isinstance(context, list) and context else None
    if first not in (CREDENTIALS_V2, CREDENTIALS_V1):
        raise _refuse_presentation("presentation.@context", f"Must be an array starting with {CREDENTIALS_V2}.")
    if first == CREDENTIALS_V1 and DATA_INTEGRITY_V2 not in context:
        presentation["@context"] = [*context, DATA_INTEGRITY_V2]
    types = presentation.get("type")
    if not (types == "VerifiablePresentation" or (isinstance(types, list) and "VerifiablePresentation" in types)):
        raise _refuse_presentation("presentation.type", "Must include VerifiablePresentation.")
    key, suite, method, holder = _presentation_key(caller, options)
    given_holder = presentation.setdefault("holder", holder)
    if (given_holder.get("id") if isinstance(given_holder, dict) else given_holder) != holder:
        message = f"Must be {holder}, the DID of the signing key (or be left out)."
        raise _refuse_presentation("presentation.holder", message)
    if "verifiableCredential" in presentation:
        entries = presentation["verifiableCredential"]
        listed = isinstance(entries, list)
        entries = entries if listed else [entries]
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise _refuse_presentation(f"presentation.verifiableCredential.{index}", "Must be an object.")
        resolved = [
            stored_or_given(entry, f"presentation.verifiableCredential.{index}", caller=caller)
            for index, entry in enumerate(entries)
        ]
        presentation["verifiableCredential"] = resolved if listed else resolved[0]
    domain = options.get("domain")
    try:
        return proofs.add_presentation_proof(
            presentation,
            cryptosuite=suite,
            key_type=key.key_type,
            private_key=keys.private_key_of(key),
            verification_method=method,
            ctx=suite_context(),
            challenge=options.get("challenge"),
            domain=(domain[0] if len(domain) == 1 else list(domain)) if domain else None,
            created=options.get("created"),
        )
    except ProofCheckFailed as error:
        raise PresentationNotSignable(
            f"The presentation cannot be signed: {error.detail}",
            errors={"presentation": [error.detail]},
            reason=error.code,
        ) from None


def _refuse_presentation(member: str, message: str) -> PresentationNotSignable:
    return PresentationNotSignable(message, errors={member: [message]})


def _presentation_key(caller: Caller, options: dict) -> tuple[ClientIssuerKey, str, str, str]:
    """(key, cryptosuite, verification method, holder DID) of a presentation's proof."""
    method = options.get("verificationMethod")
    if method is not None:
        found = keys.active_key_with_method(caller.acting_client_id, method)
        if found is None:
            raise NoIssuerKey(
                "verificationMethod is not a method of an active key of this client.",
                errors={"options.verificationMethod": ["Not a method of an active key of this client."]},
            )
        options = {**options, "keyId": found.id}
    elif options.get("keyId") is None and options.get("cryptosuite") is None:
        newest = keys.newest_active_key(caller.acting_client_id, proofs.PRESENTATION_KEY_TYPES)
        if newest is None:
            raise NoIssuerKey(
                "This client has no active key that signs presentations (Ed25519, P-256 or P-384); create one "
                "with POST /v1/issuer/keys.",
                errors={"options.keyId": ["No active Ed25519, P-256 or P-384 key."]},
            )
        options = {**options, "keyId": newest.id}
    key, suite = _choose_key(caller, options)
    if suite not in proofs.PRESENTATION_SUITES:
        raise NoIssuerKey(
            f"A {key.key_type} key cannot sign presentations.",
            errors={"options.keyId": [f"A {key.key_type} key signs no presentation suite."]},
        )
    methods = keys.verification_method_ids(key)
    method = method or methods["did:web"]
    holder = keys.did_key_of(key) if method == methods["did:key"] else keys.client_did(key.client_id)
    return key, suite, method, holder
