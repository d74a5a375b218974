"""Single sign-on with an OpenID Connect provider, beside local accounts and API tokens.

``rules`` maps groups to roles (pure); ``provider`` holds the provider's metadata and the
dashboard's client; ``tokens`` checks bearer access tokens; ``identity`` is the service
that turns a signed-in identity into a user and its memberships. ``authentication`` (API
bearer tokens), the dashboard's views and ``middleware`` (a session asks the provider
again now and then) are the ways in. Off unless ``OIDC_ISSUER`` is set (docs/sso.md).
"""
