"""The one exception the BBS primitives raise for input they cannot even evaluate."""


class BbsInputError(ValueError):
    """Malformed BBS input: wrong length, bad point encoding, point off the curve or outside the
    subgroup, scalar out of range, index out of range or unsorted, messages/indexes mismatch.

    A well-formed signature or proof that simply does not verify is not an error: `verify` and
    `proof_verify` return False for it.
    """
