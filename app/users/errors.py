"""Problems raised by the users feature."""

from __future__ import annotations

from app.errors import Conflict


class EmailAddressTaken(Conflict):
    status, code, title = 409, "email_address_taken", "E-mail address already registered"


class UserReferenceAmbiguous(Conflict):
    status, code, title = 409, "user_reference_ambiguous", "More than one user has this e-mail address"
