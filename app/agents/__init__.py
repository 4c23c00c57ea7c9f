"""The agent network: accounts and sign-in, credits, cards, registry, organisation consents."""
