"""Built-in caller identity: JWT access tokens and API keys, both sent as ``Bearer``.

PauseMesh is not an identity provider; these resolvers check credentials someone else issued
(an OIDC provider's access tokens, verified against its JWKS) or that ``pausemesh keys create``
issued (API keys, of which only hashes are kept). ``bearer.BearerAuth`` picks between them by
the credential's shape and turns it into an ``Identity`` (principal and roles), or refuses it
with a ``WWW-Authenticate: Bearer`` challenge.
"""
