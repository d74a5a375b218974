"""Input serializers of the clusters API: the create body of DESIGN, used by dry-run too."""

from __future__ import annotations

from typing import Any, NoReturn

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from clusters.domain.shapes import MIN_HOURS
from clusters.models import ClusterKind, KubeCluster, TopologyMode
from clusters.requests import services
from clusters.requests.placement_wish import unknown_member_message
from clusters.requests.services import MAX_FLAVORS
from controlplane.api import generics as drf
from controlplane.api.fields import SlugRowField
from controlplane.api.serializers import JsonIntegerField
from tenants.models import GpuFlavor, PriorityClass
from tenants.selectors import flavor_named, unknown_flavor_message


class _NamedRowField(SlugRowField):
    """A row by its ``name``; an unknown name is refused in :meth:`unknown`'s words."""

    def unknown(self, name: str) -> str:
        raise NotImplementedError

    def fail(self, key: str, **kwargs: Any) -> NoReturn:
        if key == "does_not_exist":
            raise serializers.ValidationError(self.unknown(str(kwargs.get("value", ""))), code=key)
        super().fail(key, **kwargs)
        raise AssertionError("unreachable")  # fail() always raises


class FlavorField(_NamedRowField):
    """A GPU flavor by name; an unknown name is refused naming the flavors there are."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="name", queryset=GpuFlavor.objects.all(), **kwargs)

    def to_internal_value(self, data: Any) -> GpuFlavor:
        # SlugRelatedField's, through the catalogue's plain-SQL read (every create names
        # a flavor). A value that is not a string is looked up as its text, as the ORM's
        # CharField lookup did.
        name = data if isinstance(data, str) else str(data)
        read = self.context.get("flavor_read")  # read with the tenant by the view
        flavor = read if read is not None and read.name == name else flavor_named(name)
        if flavor is None:
            self.fail("does_not_exist", slug_name=self.slug_field, value=name)
        return flavor

    def unknown(self, name: str) -> str:
        return unknown_flavor_message(name)


class KubeClusterField(_NamedRowField):
    """A member of the fleet by name; an unknown name is refused naming the members."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="name", queryset=KubeCluster.objects.all(), **kwargs)

    def unknown(self, name: str) -> str:
        return unknown_member_message(name)


class PriorityClassField(_NamedRowField):
    """A platform priority class by name; an unknown name is refused naming the classes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="name", queryset=PriorityClass.objects.all(), **kwargs)

    def unknown(self, name: str) -> str:
        names = list(PriorityClass.objects.order_by("-value").values_list("name", flat=True))
        there = f"the classes are {', '.join(names)}" if names else "there are none"
        return (
            f"No priority class {name!r}; {there} (GET /api/v1/tenants/{{slug}}/priority-classes/)."
        )


class TtlHoursField(JsonIntegerField):
    """``ttl_hours``: the schema declares its floor (1), while the service checks both
    bounds (the upper one is the tenant's) in the words the dashboard and verdict use, so
    the field itself refuses nothing but a non-integer."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.min_value = MIN_HOURS  # read by the schema generator; no validator added


class ClusterCreateInput(drf.Serializer):
    """``{name?, kind, flavor | flavors, workers, min_workers, max_workers, gpu_fraction,
    ttl_hours, image, env, container_gpus, notebook}``.

    Unknown fields are refused (a typo like ``max_worker`` must not silently create a
    fixed-size cluster). This serializer only parses and resolves the flavor by name:
    every rule (shape, name, policy, caps) is checked once, by
    :func:`clusters.requests.services.cluster_request_check`, which create and dry-run both call,
    so that the two report a request's faults alike and all at once.
    """

    name = serializers.CharField(required=False, allow_blank=False, max_length=253)
    kind = serializers.ChoiceField(choices=ClusterKind.choices, default=ClusterKind.DEV)
    flavor = FlavorField(
        required=False,
        help_text="The GPU flavor; or give flavors instead (exactly one of the two).",
    )
    flavors = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        help_text="The GPU flavors the request accepts, in order of preference (at most "
        f"{MAX_FLAVORS}): it is admitted on the first of them that fits now. "
        '"flavor": "x" is the same as "flavors": ["x"].',
    )
    workers = JsonIntegerField(default=1, min_value=0, max_value=1024)
    min_workers = JsonIntegerField(
        required=False, allow_null=True, default=None, min_value=0, max_value=1024
    )
    max_workers = JsonIntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=1024,
        help_text="Production only: autoscale up to this many workers. The cluster is "
        "charged against the quota for all of them, so it can never grow past it.",
    )
    gpu_fraction = serializers.DecimalField(
        max_digits=4, decimal_places=3, required=False, allow_null=True, default=None
    )
    ttl_hours = TtlHoursField(
        required=False,
        allow_null=True,
        default=None,
        # The bounds are the tenant's (clusters.domain.shapes.ttl_hours_range), checked by the
        # service for create and dry-run alike, in the words the dashboard uses too.
        help_text="Time to live in whole hours, from 1 to the tenant's max_ttl_hours "
        "(dev default: the tenant's dev_ttl_hours; prod: none).",
    )
    priority = JsonIntegerField(
        required=False,
        default=0,
        min_value=settings.CLUSTER_PRIORITY_MIN,
        max_value=settings.CLUSTER_PRIORITY_MAX,
        help_text="Tenant admins only: higher goes first among the tenant's requests of "
        f"the same kind ({settings.CLUSTER_PRIORITY_MIN} to {settings.CLUSTER_PRIORITY_MAX}, "
        "default 0).",
    )
    priority_class = PriorityClassField(
        required=False,
        allow_null=True,
        default=None,
        help_text="The platform priority class it runs in, by name: one of GET "
        "/api/v1/tenants/{slug}/priority-classes/ (default: the default class). A class "
        "that may preempt is for the tenant's admins only (docs/preemption.md).",
    )
    image = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=255,
        help_text="The Ray image of the head and workers, one of GET /api/v1/images/ "
        "(default: the platform's default image).",
    )
    env = serializers.JSONField(
        required=False,
        default=dict,
        help_text="Environment variables of the Ray containers, {name: value} (strings). "
        "At most 64, 4 KiB each, 32 KiB in all; names that decide GPU visibility or are "
        "Ray's, KubeRay's or Kubernetes' own (NVIDIA_*, CUDA_*, RAY_*, LD_*, ...) are "
        "refused: see docs/containers.md.",
    )
    container_gpus = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Let Ray runtime environments that run containers (image_uri) see "
        "exactly each GPU worker's own GPUs, through a CDI spec written per pod. Needs "
        "whole GPUs, the platform's seccomp profile and a tenant whose Pod Security "
        "level is baseline (docs/containers.md).",
    )
    notebook = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Run JupyterLab on the head (the image must have jupyterlab installed). "
        "It opens from the cluster's page through the product's proxy origin, for the "
        "cluster's owner and the tenant's admins only; kernels run on the head and "
        "`ray.init()` there joins the cluster (docs/notebooks.md).",
    )
    ssh = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Run an SSH server on the head for `gangway ssh` (and VS Code Remote-SSH), "
        "accepting the SSH keys in the profiles of the owner and the tenant's admins "
        "(docs/tunnels.md).",
    )
    kube_cluster = KubeClusterField(
        required=False,
        allow_null=True,
        help_text="Run it on this Kubernetes cluster of the fleet (by name; one the tenant "
        "may use). Default: wherever it fits first in the admin's placement order "
        "(docs/fleet.md).",
    )
    region = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=63,
        help_text="Run it on a Kubernetes cluster of this region (one the tenant may use).",
    )
    topology_level = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=316,
        help_text="A production cluster's workers all in one domain of this level of its "
        "flavor's topology, e.g. network.topology.kubernetes.io/rack (docs/topology.md).",
    )
    topology_mode = serializers.ChoiceField(
        choices=TopologyMode.choices,
        required=False,
        allow_blank=True,
        help_text="required: admitted only when one domain has room for every worker; "
        "preferred: in as few domains as it can. Default: required.",
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({field: ["Unknown field."] for field in unknown})
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """``flavors`` or ``flavor``, not both: the spec's ``flavor`` and ``accepted_flavors``;
        ``kube_cluster`` and ``region``: the spec's ``wanted_kube_cluster`` and
        ``wanted_region`` (whether the tenant may use them is the service's to check)."""
        return wanted_placement(accept_flavors(attrs, required=True))


def accept_flavors(attrs: dict[str, Any], *, required: bool) -> dict[str, Any]:
    """Resolve ``flavors`` into ``flavor`` and ``accepted_flavors`` (the list's rules are
    the services': :func:`clusters.requests.services.resolve_flavors`)."""
    names = attrs.pop("flavors", None)
    if names is not None:
        if attrs.get("flavor") is not None:
            raise serializers.ValidationError(
                {"flavors": ["Give flavor or flavors, not both."]}, code="invalid"
            )
        try:
            flavors = services.resolve_flavors(names)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        attrs["flavor"] = flavors[0]
        attrs["accepted_flavors"] = tuple(names)
    elif required and attrs.get("flavor") is None:
        raise serializers.ValidationError(
            {"flavor": ["Name a GPU flavor (flavor), or several in order of preference (flavors)."]}
        )
    return attrs


def wanted_placement(attrs: dict[str, Any]) -> dict[str, Any]:
    """``kube_cluster`` and ``region`` under the names of the spec's fields."""
    if "kube_cluster" in attrs:
        attrs["wanted_kube_cluster"] = attrs.pop("kube_cluster")
    if "region" in attrs:
        attrs["wanted_region"] = attrs.pop("region")
    if attrs.get("topology_level") and not attrs.get("topology_mode"):
        attrs["topology_mode"] = "required"
    return attrs


class ManifestsOutput(drf.Serializer):
    """``{"manifests": [...]}``: Kubernetes objects as plain JSON (or YAML, see renderers)."""

    manifests = serializers.ListField(child=serializers.DictField())


class DryRunOutput(ManifestsOutput):
    """What a create would do: the verdict (admission's), its reasons and ETA, the objects."""

    verdict = serializers.ChoiceField(choices=["fits_now", "will_queue", "never_fits"])
    headline = serializers.CharField(
        help_text="The verdict's first sentence, with what the request is charged, e.g. "
        '"Fits now on h100: 2 whole nodes, 16 GPUs charged."'
    )
    reasons = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))
    summary = serializers.CharField(
        help_text="Where and when it could start, soonest first, alternatives included, "
        'e.g. "Starts on l4 now (1 GPU charged), or on h100 in about 40 min (1 GPU charged)."'
    )
    position = serializers.IntegerField(allow_null=True)
    flavor_position = serializers.IntegerField(allow_null=True)
    eta = serializers.DateTimeField(allow_null=True)
    eta_text = serializers.CharField()
    alternatives = serializers.ListField(child=serializers.DictField())
    flavor = serializers.CharField(
        allow_null=True,
        help_text="fits_now: the flavor it would start on (of several accepted, the first "
        "that fits now).",
    )
    kube_cluster = serializers.CharField(
        allow_null=True,
        help_text="fits_now: the Kubernetes cluster of the fleet it would start on (the "
        "headline says why not the clusters before it in the placement order).",
    )
    flavors = serializers.ListField(
        child=serializers.DictField(),
        help_text="will_queue, for a request that accepts several flavors: its standing "
        "on each (flavor, position, reason, message, eta, eta_text).",
    )
    budget_note = serializers.CharField(
        help_text="Set when the tenant is at or over its monthly GPU-hour budget and the "
        "platform deprioritises: the request would queue at the lowest priority."
    )
    as_of = serializers.DateTimeField(
        help_text="When the queue was read for this verdict. On a large queue (reading it "
        "takes a while) a verdict answers from the last reading, at most "
        "DRY_RUN_STALE_SECONDS old, while the next is read."
    )


class PodOut(drf.Serializer):
    """One pod of a cluster, for choosing whose log to read."""

    name = serializers.CharField()
    role = serializers.CharField(help_text="head or worker")
    group = serializers.CharField(help_text="The worker group (empty for the head).")
    phase = serializers.CharField()
    containers = serializers.ListField(child=serializers.CharField())


class ClusterLogsOut(drf.Serializer):
    """A pod's log: the last ``tail`` lines (at most ``limit_bytes``), and the pods there
    are; ``message`` says why there is no text when there is none."""

    pod = serializers.CharField(allow_blank=True)
    container = serializers.CharField(allow_blank=True)
    text = serializers.CharField(allow_blank=True)
    truncated = serializers.BooleanField()
    message = serializers.CharField(allow_blank=True)
    pods = PodOut(many=True)
