"""Kubernetes: credentials, namespaces, the Ray dashboard proxy, images, the queue mode."""

from __future__ import annotations

import re

from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_float, env_int, env_list, env_str
from controlplane.rayorigin import ORIGIN as RAY_ORIGIN_FORM
from controlplane.settings.core import ALLOWED_HOSTS, VAR_DIR

# KUBECONFIG set but empty means in-cluster credentials (the service account of the pod);
# unset means the file kubesim writes for development.
KUBECONFIG = env_str("KUBECONFIG", str(VAR_DIR / "kubeconfig"), allow_empty=True)
KUBE_REQUEST_TIMEOUT_SECONDS = env_float("KUBE_REQUEST_TIMEOUT_SECONDS", 10.0)
# The namespace the control plane itself runs in; tenants' NetworkPolicies let it reach
# the Ray dashboard and client ports.
CONTROL_PLANE_NAMESPACE = env_str("CONTROL_PLANE_NAMESPACE", "gangway-system")
TENANT_NAMESPACE_PREFIX = env_str("TENANT_NAMESPACE_PREFIX", "gw-")
# A tenant's namespace is this prefix plus its slug (at most 40 characters): the prefix
# keeps tenants' namespaces apart from everybody else's and within 63 characters.
if not re.fullmatch(r"[a-z][-a-z0-9]{0,22}", TENANT_NAMESPACE_PREFIX) or (
    TENANT_NAMESPACE_PREFIX.startswith("kube-")
):
    raise ImproperlyConfigured(
        f"TENANT_NAMESPACE_PREFIX={TENANT_NAMESPACE_PREFIX!r} must be 1-23 lowercase letters, "
        "digits and hyphens starting with a letter, and not start with 'kube-'"
    )
# The Ray dashboard proxy (docs/access.md): the largest body it forwards (a working
# directory uploaded by Ray's Jobs SDK, say) and how long it waits for the dashboard.
RAY_PROXY_MAX_BODY_MB = env_int("RAY_PROXY_MAX_BODY_MB", 100, minimum=1)
RAY_PROXY_READ_TIMEOUT_SECONDS = env_float("RAY_PROXY_READ_TIMEOUT_SECONDS", 120.0)
# The Ray dashboards' own origin, never the product's (docs/access.md, "An origin of its
# own"): scheme://host[:port], or scheme://{cluster}.suffix[:port] for one per cluster.
# Unset, the dashboard is relayed on the product's origin in a CSP sandbox.
RAY_PROXY_ORIGIN = env_str("RAY_PROXY_ORIGIN", "", allow_empty=True).strip().rstrip("/")
_ray_origin = RAY_ORIGIN_FORM.fullmatch(RAY_PROXY_ORIGIN.lower())
if RAY_PROXY_ORIGIN and _ray_origin is None:
    raise ImproperlyConfigured(
        f"RAY_PROXY_ORIGIN={RAY_PROXY_ORIGIN!r} must be scheme://host[:port] or "
        "scheme://{cluster}.domain[:port] (http or https, no path)"
    )
if _ray_origin is not None and "*" not in ALLOWED_HOSTS:
    # In place: ALLOWED_HOSTS is core's setting, and this adds the dashboards' host to it.
    ALLOWED_HOSTS.append(("." if _ray_origin["wild"] else "") + _ray_origin["host"])
# How long a link from the product to a dashboard works (once), and how long the
# dashboard's own cookie then lasts.
RAY_PROXY_GRANT_SECONDS = env_int("RAY_PROXY_GRANT_SECONDS", 120, minimum=5)
RAY_PROXY_SESSION_MINUTES = env_int("RAY_PROXY_SESSION_MINUTES", 60, minimum=1)
# Where the API server's service-proxy traffic comes from, for clusters that enforce
# NetworkPolicy: the tenants' policies admit these CIDRs to the Ray dashboard port.
APISERVER_SOURCE_CIDRS = env_list("APISERVER_SOURCE_CIDRS", [])
RAY_IMAGE_DEFAULT = env_str("RAY_IMAGE_DEFAULT", "rayproject/ray:2.49.2-py311-gpu")
RAY_IMAGE_ALLOWLIST = env_list("RAY_IMAGE_ALLOWLIST", [RAY_IMAGE_DEFAULT])
# The Localhost seccomp profile (relative to the kubelet's seccomp directory) that lets
# rootless podman run in a GPU worker: empty turns the container_gpus opt-in off
# (docs/containers.md says what the profile must allow).
CONTAINER_GPUS_SECCOMP_PROFILE = env_str("CONTAINER_GPUS_SECCOMP_PROFILE", "", allow_empty=True)
QUEUE_MODE = env_str("QUEUE_MODE", "builtin")  # "builtin" or "kueue"
if QUEUE_MODE not in {"builtin", "kueue"}:
    raise ImproperlyConfigured(f"QUEUE_MODE={QUEUE_MODE!r} must be 'builtin' or 'kueue'")
KAI_ENABLED = env_bool("KAI_ENABLED", False)
# The fleet's credentials at rest (docs/fleet.md): Fernet keys (or FLEET_CREDENTIAL_KEYS_FILE),
# the first encrypts and every one decrypts, so that a key is rotated by putting the new
# one first. Unset, one key is derived from SECRET_KEY (changing SECRET_KEY then loses the
# stored credentials).
FLEET_CREDENTIAL_KEYS = env_list("FLEET_CREDENTIAL_KEYS")
# How often the beat probes every member of the fleet (reachable, latency, version).
FLEET_HEALTH_INTERVAL_SECONDS = env_float("FLEET_HEALTH_INTERVAL_SECONDS", 30.0)
