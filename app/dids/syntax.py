"""The shape of a DID of this network, whatever its method (no Flask imports: the client library
parses texts that name DIDs too). `app.dids.method.is_network_did` checks the method as well."""

NETWORK_DID = r"did:[a-z0-9]+:[0-9a-f]{40}"
