"""OpenID Connect provider: hosted login, authorization codes, tokens, userinfo and signing keys."""
