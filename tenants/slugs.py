"""The one rule for a tenant's slug: the model, the API, the dashboard's form, the demo
loader and the docs all use :data:`validate_tenant_slug` and show :data:`SLUG_HELP`, which
is also its error message, so what a refused slug is told is what the field said."""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.utils.deconstruct import deconstructible

# Names that belong to Kubernetes itself: its ``default`` namespace and every ``kube-*``
# one (kube-system, kube-public, kube-node-lease; Kubernetes reserves the prefix). The
# slug stands bare in the tenant label, the URLs, the CLI's ``--tenant`` and the audit
# log, where ``kube-system`` or ``default`` would read as Kubernetes' own namespace.
KUBERNETES_NAMESPACE_PREFIX = "kube-"
KUBERNETES_DEFAULT_NAMESPACE = "default"

# The slug names the tenant's namespace, ``TENANT_NAMESPACE_PREFIX`` + slug, a DNS label
# of at most 63 characters; the prefix may be up to 23 (controlplane/settings/k8s.py), so
# 40 holds under every prefix. Everything else built from the slug is looser (the tenant
# label value, the Kueue and KAI queues, the head Service's DNS name, the audit column).
SLUG_MAX_LENGTH = 40

SLUG_HELP = (
    f"1-{SLUG_MAX_LENGTH} lowercase letters, digits and hyphens, starting with a letter "
    'and not ending with a hyphen; not "default" and not starting with "kube-".'
)

# A DNS label (RFC 1123) that starts with a letter, at most SLUG_MAX_LENGTH long, and is
# none of Kubernetes' own names. One expression, so the OpenAPI schema carries it as the
# field's pattern (ECMAScript reads the lookaheads too).
SLUG_PATTERN = (
    rf"^(?!{KUBERNETES_DEFAULT_NAMESPACE}$)(?!{KUBERNETES_NAMESPACE_PREFIX})"
    rf"[a-z](?:[-a-z0-9]{{0,{SLUG_MAX_LENGTH - 2}}}[a-z0-9])?$"
)


@deconstructible(path="tenants.slugs.TenantSlugValidator")
class TenantSlugValidator(RegexValidator):
    """Whether a string may be a new tenant's slug (:data:`SLUG_HELP` says the rule);
    checked only at creation, so an existing tenant's slug keeps working."""

    regex = SLUG_PATTERN
    message = SLUG_HELP
    code = "invalid_slug"


validate_tenant_slug = TenantSlugValidator()
