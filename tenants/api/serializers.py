"""Input and output serializers of the tenants API.

Writes have explicit input serializers (strict: unknown keys are a 400) that only
check shape and types; the services own the rules. Output serializers read fields
already loaded by the selectors and never query.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, ClassVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from rest_framework import serializers

from controlplane.api.serializers import (
    JsonIntegerField,
    JsonStringField,
    StrictModelSerializer,
    StrictSerializer,
)
from tenants.models import AuditEvent, Cohort, GpuFlavor, Membership, Role, Tenant
from tenants.services.flavors import FLAVOR_DEVICE_FACTS, FLAVOR_NODE_FACTS
from tenants.slugs import SLUG_HELP, validate_tenant_slug

# --- Auth and users -----------------------------------------------------------------


class TokenInSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)


class TokenOutSerializer(serializers.Serializer[dict[str, Any]]):
    token = serializers.CharField(help_text="Send as `Authorization: Token <token>`.")
    expiry = serializers.DateTimeField(allow_null=True)
    username = serializers.CharField()


# Serializer[Any]: it is only used with many=True, whose list the stubs do not accept.
class TokenItemSerializer(serializers.Serializer[Any]):
    """One of the caller's tokens, as listed: never the key itself."""

    id = serializers.CharField(help_text="Names the token in `DELETE /auth/tokens/{token_id}/`.")
    token_key = serializers.CharField(help_text="The first characters of the token.")
    created = serializers.DateTimeField()
    expiry = serializers.DateTimeField(allow_null=True)
    current = serializers.BooleanField(help_text="Whether this token authenticated the request.")


class TokensRevokedSerializer(serializers.Serializer[dict[str, Any]]):
    revoked = serializers.IntegerField(help_text="How many tokens were revoked.")


class UserInSerializer(StrictSerializer):
    username = serializers.RegexField(r"^[\w.@+-]+\Z", max_length=150)
    email = serializers.EmailField(max_length=254)
    password = serializers.CharField(
        max_length=4096, write_only=True, trim_whitespace=False, style={"input_type": "password"}
    )
    is_staff = serializers.BooleanField(default=False)


def _password_field(help_text: str, *, required: bool = True) -> serializers.CharField:
    return serializers.CharField(
        max_length=4096,
        write_only=True,
        required=required,
        trim_whitespace=False,
        style={"input_type": "password"},
        help_text=help_text,
    )


class PasswordChangeInSerializer(StrictSerializer):
    """Your own password: the old one and the new one (Django's password validators)."""

    old_password = _password_field("Your current password.")
    new_password = _password_field(
        "The new password; it must pass the platform's password validators."
    )


class UserPasswordInSerializer(StrictSerializer):
    """A platform admin's password action on a user: exactly one of the two."""

    temporary_password = _password_field(
        "Set this temporary password: the user must change it at the next sign-in; "
        "their sessions end and their API tokens are revoked.",
        required=False,
    )
    send_reset_link = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Mail the user a link to choose a new password (to their email address).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if bool(attrs.get("temporary_password")) == bool(attrs.get("send_reset_link")):
            raise serializers.ValidationError(
                "Give temporary_password or send_reset_link: true, exactly one of the two."
            )
        return attrs


class UserOutSerializer(serializers.ModelSerializer[AbstractUser]):
    class Meta:
        model = get_user_model()
        fields = ["id", "username", "email", "is_staff", "date_joined"]
        read_only_fields = fields


class MyMembershipSerializer(serializers.ModelSerializer[Membership]):
    tenant = serializers.CharField(source="tenant.slug")
    tenant_name = serializers.CharField(source="tenant.name")

    class Meta:
        model = Membership
        fields = ["tenant", "tenant_name", "role", "source"]
        read_only_fields = fields


class MeSerializer(UserOutSerializer):
    memberships = MyMembershipSerializer(many=True, read_only=True)

    class Meta(UserOutSerializer.Meta):
        fields = [*UserOutSerializer.Meta.fields, "memberships"]
        read_only_fields = fields


class SsoConfigSerializer(serializers.Serializer[dict[str, Any]]):
    """How a client signs in with the identity provider (the command line's device flow)."""

    enabled = serializers.BooleanField()
    issuer = serializers.CharField(required=False)
    provider_name = serializers.CharField(required=False)
    client_id = serializers.CharField(
        required=False, allow_null=True, help_text="The public client of the command line."
    )
    device_authorization_endpoint = serializers.CharField(required=False, allow_null=True)
    token_endpoint = serializers.CharField(required=False, allow_null=True)
    revocation_endpoint = serializers.CharField(
        required=False, allow_null=True, help_text="Where `gangway logout` revokes (RFC 7009)."
    )
    scope = serializers.CharField(required=False)


# --- Flavors ------------------------------------------------------------------------

FLAVOR_FIELDS = ["name", *FLAVOR_NODE_FACTS, *FLAVOR_DEVICE_FACTS]


class FlavorStockOutSerializer(serializers.Serializer[Any]):
    """A flavor's nodes in one Kubernetes cluster of the fleet: listed by the platform
    admin and last seen there. The flavor's own counts are their sums."""

    kube_cluster = serializers.CharField(source="kube_cluster.name", read_only=True)
    node_count = serializers.IntegerField(read_only=True)
    max_node_count = serializers.IntegerField(read_only=True, allow_null=True)
    observed_nodes = serializers.IntegerField(read_only=True, allow_null=True)
    observed_free_gpus = serializers.IntegerField(read_only=True, allow_null=True)
    observed_at = serializers.DateTimeField(read_only=True, allow_null=True)


def topology_field() -> serializers.ListField:
    """A flavor's topology levels: node label keys, coarse to fine (the model checks them)."""
    return serializers.ListField(
        child=serializers.CharField(max_length=316),
        required=False,
        max_length=16,
        help_text="Node label keys of its network levels, coarse to fine, e.g. "
        '["network.topology.kubernetes.io/block", "network.topology.kubernetes.io/rack"].',
    )


class FlavorOutSerializer(serializers.ModelSerializer[GpuFlavor]):
    topology = serializers.ListField(child=serializers.CharField(), read_only=True)
    total_gpus = serializers.IntegerField(read_only=True)
    per_cluster = FlavorStockOutSerializer(
        source="stock",
        many=True,
        read_only=True,
        help_text="Its nodes in each Kubernetes cluster of the fleet, in placement order "
        "(node_count and max_node_count are their sums).",
    )
    observed_nodes = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="Ready nodes of its GPU product the control plane last saw on the "
        "cluster (null: not read yet).",
    )
    missing_nodes = serializers.IntegerField(
        read_only=True,
        help_text="Nodes of node_count the cluster does not have and its autoscaler "
        "cannot add (0: none missing). Requests that need them never start.",
    )
    nodes_warning = serializers.CharField(
        read_only=True, help_text="Says so in words when missing_nodes is not 0, else empty."
    )
    devices_in_words = serializers.CharField(
        read_only=True,
        help_text="How a worker's GPUs are requested: the nvidia.com/gpu extended resource, "
        "a DRA device class, or MIG partitions of one profile (device_mode).",
    )
    observed_free_gpus = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="Its GPUs no pod or claim held when last observed: for a DRA flavor, "
        "devices of its class (and MIG profile) that can still be allocated (null: not "
        "read yet; see observed_at).",
    )
    observed_free_nodes = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="Its nodes with every GPU (every device of its class) free, as last observed.",
    )
    observed_at = serializers.DateTimeField(read_only=True, allow_null=True)

    class Meta:
        model = GpuFlavor
        fields = [
            *FLAVOR_FIELDS,
            "total_gpus",
            "observed_free_gpus",
            "observed_free_nodes",
            "observed_at",
            "observed_nodes",
            "missing_nodes",
            "nodes_warning",
            "devices_in_words",
            "per_cluster",
            "created_at",
        ]
        read_only_fields = fields


class FlavorCreateSerializer(StrictModelSerializer):
    topology = topology_field()

    class Meta:
        model = GpuFlavor
        fields = FLAVOR_FIELDS
        # Uniqueness is the service's concern (it reports it as a field error too).
        extra_kwargs: ClassVar[dict[str, dict[str, Any]]] = {"name": {"validators": []}}


class FlavorUpdateSerializer(StrictModelSerializer):
    topology = topology_field()

    class Meta:
        model = GpuFlavor
        fields = FLAVOR_FIELDS
        extra_kwargs = {"name": {"validators": [], "required": False}}


# --- Cohorts ------------------------------------------------------------------------


class CohortOutSerializer(serializers.Serializer[Any]):
    """A cohort in the cohort tree (``tenants.selectors.CohortNode``).

    Its fields are built in :meth:`get_fields` because two of them are called ``parent``
    and ``root``, names every DRF field already has for its own place in a serializer."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {
            "name": serializers.CharField(read_only=True),
            "parent": serializers.CharField(
                read_only=True, allow_null=True, help_text="The cohort above it (null: a root)."
            ),
            "root": serializers.CharField(
                read_only=True,
                help_text="The root of its tree: tenants of every cohort under one root borrow "
                "each other's unused quota.",
            ),
            "description": serializers.CharField(read_only=True),
            "tenants": serializers.ListField(
                child=serializers.CharField(), read_only=True, help_text="Tenants in this cohort."
            ),
            "defined": serializers.BooleanField(
                read_only=True,
                help_text="Whether the cohort has a row of its own (a parent or a description); "
                "one only named by tenants or as a parent has none.",
            ),
        }


class CohortSetSerializer(StrictModelSerializer):
    """Body of ``PUT /cohorts/{name}/``: the parent (empty or omitted: a root) and a
    description (omitted: unchanged)."""

    class Meta:
        model = Cohort
        fields = ["parent", "description"]
        extra_kwargs: ClassVar[dict[str, dict[str, Any]]] = {
            "parent": {"required": False},
            "description": {"required": False},
        }


# --- Tenants ------------------------------------------------------------------------

PIP_URLS_HELP = str(Tenant._meta.get_field("allow_pip_direct_urls").help_text)
IDLE_GPU_HELP = str(Tenant._meta.get_field("idle_gpu_util_percent").help_text)


class PolicySerializer(StrictSerializer):
    """What one engineer may hold and how long dev clusters live; every key is optional
    (omitted keys keep their value, or the default on create)."""

    max_dev_clusters_per_user = JsonIntegerField(min_value=0, max_value=100, required=False)
    max_dev_gpus_per_user = JsonIntegerField(min_value=0, max_value=1024, required=False)
    dev_ttl_hours = JsonIntegerField(min_value=1, max_value=24 * 90, required=False)
    max_ttl_hours = JsonIntegerField(min_value=1, max_value=24 * 365, required=False)
    idle_suspend_minutes = JsonIntegerField(
        min_value=0,
        max_value=24 * 60 * 30,
        required=False,
        help_text="A dev cluster idle this long is warned, then suspended (0: never).",
    )
    idle_suspend_prod = serializers.BooleanField(
        required=False, help_text="Apply the idle policy to production clusters too."
    )
    idle_gpu_util_percent = JsonIntegerField(
        min_value=0, max_value=100, required=False, help_text=IDLE_GPU_HELP
    )
    monthly_gpu_hour_budget = JsonIntegerField(
        min_value=1,
        max_value=100_000_000,
        required=False,
        allow_null=True,
        help_text="GPU-hours the tenant may use per UTC calendar month (null: no budget). "
        "At 80% its pages warn; at 100% the platform's BUDGET_POLICY applies.",
    )
    allow_pip_direct_urls = serializers.BooleanField(required=False, help_text=PIP_URLS_HELP)


class TenantAdminPolicySerializer(StrictSerializer):
    """What a tenant's own admins may change (``PATCH .../policy/``); the rest of the
    policy is the platform's (a key outside these is a 400 naming it)."""

    max_dev_clusters_per_user = JsonIntegerField(min_value=0, max_value=100, required=False)
    max_dev_gpus_per_user = JsonIntegerField(min_value=0, max_value=1024, required=False)
    dev_ttl_hours = JsonIntegerField(
        min_value=1,
        max_value=24 * 90,
        required=False,
        help_text="At most the tenant's max_ttl_hours, which the platform sets.",
    )
    idle_suspend_minutes = JsonIntegerField(min_value=0, max_value=24 * 60 * 30, required=False)
    idle_suspend_prod = serializers.BooleanField(required=False)
    idle_gpu_util_percent = JsonIntegerField(
        min_value=0, max_value=100, required=False, help_text=IDLE_GPU_HELP
    )
    allow_pip_direct_urls = serializers.BooleanField(required=False, help_text=PIP_URLS_HELP)


class PolicyOutSerializer(serializers.Serializer[Tenant]):
    max_dev_clusters_per_user = serializers.IntegerField()
    max_dev_gpus_per_user = serializers.IntegerField()
    dev_ttl_hours = serializers.IntegerField()
    max_ttl_hours = serializers.IntegerField()
    idle_suspend_minutes = serializers.IntegerField()
    idle_suspend_prod = serializers.BooleanField()
    idle_gpu_util_percent = serializers.IntegerField()
    monthly_gpu_hour_budget = serializers.IntegerField(allow_null=True)
    allow_pip_direct_urls = serializers.BooleanField()


# What a tenant reads and writes as (the output adds created_at).
TENANT_FIELDS = [
    "slug",
    "name",
    "namespace",
    "cohort",
    "weight",
    "cpu_quota",
    "memory_quota_gib",
    "pod_security",
    "policy",
]


class TenantOutSerializer(serializers.ModelSerializer[Tenant]):
    weight = serializers.DecimalField(max_digits=6, decimal_places=2, coerce_to_string=False)
    policy = PolicyOutSerializer(source="*", read_only=True)

    class Meta:
        model = Tenant
        fields = [*TENANT_FIELDS, "created_at"]
        read_only_fields = fields


class TenantWriteSerializer(StrictModelSerializer):
    """Body of tenant create (slug and name required) and update (everything optional)."""

    weight = serializers.DecimalField(
        max_digits=6,
        decimal_places=2,
        min_value=Decimal("0.01"),
        max_value=Decimal("1000"),
        required=False,
    )
    policy = PolicySerializer(required=False)
    # The slug rule alone, with no length check of its own (the rule has the length), so
    # a refused slug gets the one message its help states. Uniqueness is checked by the
    # service's full_clean, in its transaction.
    slug = serializers.CharField(
        validators=[validate_tenant_slug],
        help_text=SLUG_HELP,
        error_messages={"blank": SLUG_HELP},
    )

    class Meta:
        model = Tenant
        fields = TENANT_FIELDS
        extra_kwargs = {
            "namespace": {
                "validators": [],
                "required": False,
                "help_text": "Always the configured prefix plus the slug (e.g. gw-<slug>); "
                "leave it out. Any other name is refused, and it never changes.",
            },
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance is not None:
            # A change names the slug only to repeat it (the service refuses any other),
            # and a tenant created under an older rule may repeat its own.
            self.fields["slug"].validators = []

    def flat(self) -> dict[str, Any]:
        """Validated data with the policy object flattened into tenant fields."""
        data = dict(self.validated_data)
        data.update(data.pop("policy", {}) or {})
        return data


# --- Members ------------------------------------------------------------------------


class MemberInSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices)


class MemberRoleSerializer(StrictSerializer):
    """Body of ``PATCH .../members/{username}/``: the member's new role."""

    role = serializers.ChoiceField(choices=Role.choices)


class MemberOutSerializer(serializers.ModelSerializer[Membership]):
    username = serializers.CharField(source="user.username")
    email = serializers.CharField(source="user.email")

    class Meta:
        model = Membership
        fields = ["username", "email", "role", "source", "created_at"]
        read_only_fields = fields


# --- Quotas -------------------------------------------------------------------------


class QuotaLineSerializer(StrictSerializer):
    flavor = serializers.CharField(max_length=40)
    gpus = JsonIntegerField(min_value=0, max_value=1_000_000)
    borrow_limit = JsonIntegerField(min_value=0, max_value=1_000_000, default=0)
    lend_limit = JsonIntegerField(
        min_value=0,
        max_value=1_000_000,
        default=None,
        allow_null=True,
        help_text="GPUs of its unused nominal quota the tenant lends to its cohort (at most "
        "gpus; null: all of it). The rest stays reserved for the tenant.",
    )


class QuotaSetSerializer(StrictSerializer):
    """A tenant's whole quota: GPUs per flavor plus tenant-wide CPU and memory."""

    flavors = QuotaLineSerializer(many=True, max_length=1000)  # type: ignore[call-arg]
    cpu = JsonIntegerField(min_value=0, max_value=10_000_000)
    memory_gib = JsonIntegerField(min_value=0, max_value=100_000_000)


# --- Audit --------------------------------------------------------------------------


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    actor = serializers.CharField(source="actor_name")
    tenant = serializers.CharField(source="tenant_slug")

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "at",
            "actor",
            "action",
            "tenant",
            "object_type",
            "object_id",
            "object_repr",
            "request_id",
            "data",
        ]
        read_only_fields = fields


class SshKeyInSerializer(StrictSerializer):
    """Add an SSH public key: one OpenSSH line (``ssh-ed25519 AAAA... comment``)."""

    public_key = JsonStringField(trim_whitespace=True, max_length=16384)
    name = JsonStringField(required=False, allow_blank=True, max_length=100, default="")


class SshKeyOutSerializer(serializers.Serializer[Any]):
    """One of your SSH public keys."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    fingerprint = serializers.CharField()
    public_key = serializers.CharField()
    created_at = serializers.DateTimeField()
