"""Request and response shapes of the issuer: keys, VC API issue and derive."""

from __future__ import annotations

import marshmallow as ma
from marshmallow import validate

from app.credentials.schemas import Domains
from app.issuer.proofs import KEY_TYPES, PRESENTATION_SUITES, SUITE_KEY_TYPES

MAX_POINTERS = 256
_POINTER = ma.fields.String(
    validate=[validate.Length(max=1024), validate.Regexp(r"^(/.*)?$", error="Must be a JSON pointer.")]
)


class IssuerKeyIn(ma.Schema):
    type = ma.fields.String(required=True, validate=validate.OneOf(KEY_TYPES))

    class Meta:
        unknown = ma.RAISE


class IssuerKeyOut(ma.Schema):
    id = ma.fields.String()
    type = ma.fields.String(metadata={"enum": list(KEY_TYPES)})
    state = ma.fields.String(metadata={"enum": ["active", "retired"]})
    publicKeyMultibase = ma.fields.String()
    controller = ma.fields.String(metadata={"description": "The client's did:web."})
    verificationMethod = ma.fields.String(metadata={"description": "The key's id in the client's did:web document."})
    didKey = ma.fields.String()
    didKeyVerificationMethod = ma.fields.String()
    cryptosuites = ma.fields.List(ma.fields.String())
    replacedBy = ma.fields.String(allow_none=True)
    created_at = ma.fields.String()
    retired_at = ma.fields.String(allow_none=True)


class IssuerKeyEnvelope(ma.Schema):
    data = ma.fields.Nested(IssuerKeyOut)


class IssuerKeyListEnvelope(ma.Schema):
    data = ma.fields.List(ma.fields.Nested(IssuerKeyOut))


class CredentialStatusRequest(ma.Schema):
    type = ma.fields.String(
        load_default="BitstringStatusListEntry", validate=validate.Equal("BitstringStatusListEntry")
    )
    statusPurpose = ma.fields.String(load_default="revocation", validate=validate.OneOf(["revocation", "suspension"]))

    class Meta:
        unknown = ma.RAISE


class IssueOptionsIn(ma.Schema):
    cryptosuite = ma.fields.String(validate=validate.OneOf(sorted(SUITE_KEY_TYPES)))
    keyId = ma.fields.String(validate=validate.Length(max=64), metadata={"description": "An issuer key of the client."})
    mandatoryPointers = ma.fields.List(_POINTER, validate=validate.Length(max=MAX_POINTERS))
    credentialStatus = ma.fields.Nested(CredentialStatusRequest)
    credentialId = ma.fields.String(validate=validate.Length(min=1, max=2048))
    userId = ma.fields.Integer(strict=True, validate=validate.Range(min=1, max=2**31 - 1))

    class Meta:
        unknown = ma.RAISE


class IssueIn(ma.Schema):
    """The W3C VC API issue request: an unsigned credential and how to sign it."""

    credential = ma.fields.Dict(required=True)
    options = ma.fields.Nested(IssueOptionsIn, load_default=dict)

    class Meta:
        unknown = ma.RAISE


class VerifiableCredentialOut(ma.Schema):
    verifiableCredential = ma.fields.Dict()


class DeriveOptionsIn(ma.Schema):
    selectivePointers = ma.fields.List(_POINTER, load_default=list, validate=validate.Length(max=MAX_POINTERS))
    presentationHeader = ma.fields.String(validate=validate.Length(max=1024))

    class Meta:
        unknown = ma.RAISE


_STORED_REFERENCE = (
    ' Or `{"id": <the cid of a verified credential stored for you>}` (`cid` is an alias of `id`): the stored '
    "credential itself."
)


class DeriveIn(ma.Schema):
    """The W3C VC API derive request: a credential with a base proof and what to disclose."""

    verifiableCredential = ma.fields.Dict(
        required=True, metadata={"description": "The credential with its base proof." + _STORED_REFERENCE}
    )
    options = ma.fields.Nested(DeriveOptionsIn, load_default=dict)

    class Meta:
        unknown = ma.RAISE


class PresentOptionsIn(ma.Schema):
    """How a presentation is signed (the VC API's `PresentCredentialOptions`)."""

    type = ma.fields.String(validate=validate.Equal("DataIntegrityProof"))
    cryptosuite = ma.fields.String(validate=validate.OneOf(PRESENTATION_SUITES))
    verificationMethod = ma.fields.String(
        validate=validate.Length(max=2048),
        metadata={"description": "An active key of the client: its did:web or did:key verification method."},
    )
    keyId = ma.fields.String(
        validate=validate.Length(max=64), metadata={"description": "An issuer key of the client (instead of a method)."}
    )
    proofPurpose = ma.fields.String(validate=validate.Equal("authentication"))
    created = ma.fields.DateTime(format="iso", metadata={"description": "The proof's time (default now)."})
    challenge = ma.fields.String(
        validate=validate.Length(min=1, max=1024), metadata={"description": "The verifier's challenge."}
    )
    domain = Domains(
        metadata={
            "description": "The verifier's domain (or domains).",
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}],
        }
    )

    class Meta:
        unknown = ma.RAISE


class PresentIn(ma.Schema):
    """The W3C VC API create-presentation request: an unsigned presentation and how to sign it."""

    presentation = ma.fields.Dict(
        required=True,
        metadata={
            "description": "The presentation without a proof; each entry of `verifiableCredential` is a credential, "
            'or `{"id": <cid>}` naming a verified credential stored in your tree (`cid` is an alias of `id`).'
        },
    )
    options = ma.fields.Nested(PresentOptionsIn, load_default=dict)

    class Meta:
        unknown = ma.RAISE


class VerifiablePresentationOut(ma.Schema):
    verifiablePresentation = ma.fields.Dict()
