"""Problems raised by the tenancy feature."""

from __future__ import annotations

from app.errors import Conflict, Forbidden


class MasterClientRequired(Forbidden):
    status, code, title = 403, "master_client_required", "Only a master client may do this"


class SubdomainTaken(Conflict):
    status, code, title = 409, "subdomain_taken", "Subdomain and domain already in use"


class ClientTreeTooDeep(Conflict):
    status, code, title = 409, "client_tree_too_deep", "Client tree too deep"


class TooManyApiTokens(Conflict):
    status, code, title = 409, "too_many_api_tokens", "Too many active API tokens"
