"""The scoped base for every tenant-owned API endpoint (STYLE 2 and 3).

The tenant is resolved once from the URL (``tenant_slug``) through
``Tenant.objects.visible_to(user)``: a tenant the user cannot see is a 404, like one that
does not exist. Subclasses implement :meth:`scoped_queryset` (never ``get_queryset``) and
declare the least role of each action in ``action_roles``. It lives here, not in
``controlplane.api``, because the shared kit may not import the apps built on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any, ClassVar, TypeVar

from django.db.models import Model
from django.http import Http404
from rest_framework import permissions, viewsets
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request

from controlplane.api.throttles import WriteThrottle
from tenants.models import GpuFlavor, Role, Tenant
from tenants.selectors import tenant_role_and_flavor


class HasTenantRole(permissions.BasePermission):
    """Grants an action when the user's role in the URL's tenant is at least the action's."""

    message = "Your role in this tenant does not allow this."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        role = view.tenant_role
        if view.action in ("metadata", None):
            # OPTIONS: controlplane.api.metadata checks each method of the route in turn;
            # a method the route does not serve (HEAD without a GET) is a 405 to members.
            return role is not None
        needed = view.action_roles.get(view.action or "", Role.ADMIN)
        return role is not None and Role.rank(role) >= Role.rank(needed)


_MT = TypeVar("_MT", bound=Model)


class TenantScopedViewSet(viewsets.GenericViewSet[_MT]):
    """Base of every viewset under ``/api/v1/tenants/{tenant_slug}/``, generic in the
    model it lists (``TenantScopedViewSet[Membership]``)."""

    permission_classes = [permissions.IsAuthenticated, HasTenantRole]
    throttle_classes = [WriteThrottle]
    action_roles: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "get_queryset" in cls.__dict__:
            raise TypeError(f"{cls.__name__} must implement scoped_queryset, not get_queryset")

    # Actions whose body names a GPU flavor (``flavor``), read with the tenant: a create
    # saves a round trip that way (:attr:`flavor_read`, which serializers take from their
    # context as ``flavor_read``).
    reads_flavor_for: ClassVar[tuple[str, ...]] = ()
    flavor_read: GpuFlavor | None = None

    @cached_property
    def _tenant_and_role(self) -> tuple[Tenant, str | None]:
        # One query for both: every scoped request needs the tenant and the caller's role.
        found = tenant_role_and_flavor(
            user=self.request.user,
            slug=self.kwargs.get("tenant_slug", ""),
            flavor=self._flavor_in_body(),
        )
        if found is None:
            raise Http404("No such tenant.")
        tenant, role, self.flavor_read = found
        return tenant, role

    def _flavor_in_body(self) -> str:
        if getattr(self, "action", None) not in self.reads_flavor_for:
            return ""
        # A body that does not parse is a 400 here as later, whoever asks.
        data = self.request.data
        name = data.get("flavor") if isinstance(data, Mapping) else None
        return name if isinstance(name, str) else ""

    @property
    def tenant(self) -> Tenant:
        return self._tenant_and_role[0]

    @property
    def tenant_role(self) -> str | None:
        """The caller's role in the tenant, resolved with it (services take it as ``role``)."""
        return self._tenant_and_role[1]

    def check_permissions(self, request: Request) -> None:
        # Resolve the tenant first: an unknown or invisible tenant is a 404 even for an
        # action the user's role would not allow, so that a 403 never confirms existence.
        if request.user and request.user.is_authenticated:
            _ = self.tenant
        super().check_permissions(request)

    def scoped_queryset(self, tenant: Tenant) -> Any:
        raise NotImplementedError

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return self.queryset if self.queryset is not None else []
        return self.scoped_queryset(self.tenant)

    def get_object(self) -> Any:
        """The object named in the URL, among the tenant's (404 otherwise).

        Unlike DRF's, it skips the list's filter backends: a list's query parameters
        have no say in which object a name means, and building their form costs time.
        The tenant scope is the queryset's own (:meth:`scoped_queryset`)."""
        lookup_url_kwarg = self.lookup_url_kwarg or self.lookup_field
        assert lookup_url_kwarg in self.kwargs, f"{type(self).__name__} has no URL keyword"
        obj = get_object_or_404(
            self.get_queryset(), **{self.lookup_field: self.kwargs[lookup_url_kwarg]}
        )
        self.check_object_permissions(self.request, obj)
        return obj
