"""Users: profiles created by clients, each with a DID of the network's method."""
