"""DIDs of this network: the method name, the documents of users, and the lookup of the DIDs this
service answers for itself (network DIDs of agents and users, the issuer's did:web), which the
features that own them register at `create_app`.
"""
