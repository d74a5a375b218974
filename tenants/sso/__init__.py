"""Single sign-on with an OpenID Connect provider, beside local accounts and API tokens.

The flow, one module each:

- ``rules``: the group-to-role rules (pure: groups in, roles per tenant out);
- ``provider``: the provider's metadata and the Authlib client of the dashboard;
- ``tokens``: checking a bearer access token against the provider's key set;
- ``identity``: the service that turns a signed-in identity into a user and its
  memberships, audited;
- ``authentication`` (API bearer tokens), ``views`` (the browser's sign-in, callback and
  sign-out) and ``middleware`` (a dashboard session asks the provider again, now and then)
  are the three ways in.

Off unless ``OIDC_ISSUER`` is set; docs/sso.md explains the settings.
"""
