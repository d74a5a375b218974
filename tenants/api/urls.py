"""Routes of the tenants API (users, tokens, flavors, cohorts, tenants, members, quotas,
audit).

Routes are spelled out with ``path()`` rather than a router so that each URL, its
converters and its methods read at a glance (and so that the route-matrix test sees
exactly these patterns). Converters admit only what the identifier can be (a slug, a
username), so that a URL naming anything else, a NUL byte say, is a 404 before it
reaches a query.
"""

from django.urls import path, register_converter

from tenants.api import views


class UsernameConverter:
    """A username as Django's validator allows it: letters, digits and ``@.+-_``."""

    regex = r"[\w.@+-]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(UsernameConverter, "username")


class CohortNameConverter(UsernameConverter):
    """A cohort's or a priority class's name (a DNS label of at most 40): a PUT to any
    other name is a 404."""

    regex = r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?"


register_converter(CohortNameConverter, "cohort")

urlpatterns = [
    path("auth/token/", views.TokenView.as_view(), name="auth-token"),
    path("auth/sso/", views.SsoConfigView.as_view(), name="auth-sso"),
    path(
        "auth/tokens/",
        views.TokenViewSet.as_view({"get": "list", "delete": "revoke_all"}),
        name="auth-tokens",
    ),
    path(
        "auth/tokens/<str:token_id>/",
        views.TokenViewSet.as_view({"delete": "destroy"}),
        name="auth-token-item",
    ),
    path("users/", views.UserViewSet.as_view({"get": "list", "post": "create"}), name="users"),
    path("users/me/", views.UserViewSet.as_view({"get": "me"}), name="users-me"),
    path(
        "users/me/ssh-keys/",
        views.SshKeyViewSet.as_view({"get": "list", "post": "create"}),
        name="users-me-ssh-keys",
    ),
    path(
        "users/me/ssh-keys/<int:key_id>/",
        views.SshKeyViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="users-me-ssh-key",
    ),
    path(
        "users/me/password/",
        views.UserViewSet.as_view({"post": "change_password"}),
        name="users-me-password",
    ),
    path(
        "users/<username:username>/password/",
        views.UserViewSet.as_view({"post": "set_password"}),
        name="user-password",
    ),
    path(
        "flavors/",
        views.FlavorViewSet.as_view({"get": "list", "post": "create"}),
        name="flavors",
    ),
    path(
        "flavors/<slug:name>/",
        views.FlavorViewSet.as_view(
            {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
        ),
        name="flavor",
    ),
    path("cohorts/", views.CohortViewSet.as_view({"get": "list"}), name="cohorts"),
    path(
        "cohorts/<cohort:name>/",
        views.CohortViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="cohort",
    ),
    # The platform's priority classes (docs/preemption.md): platform admins only.
    path(
        "platform/priority-classes/",
        views.PriorityClassViewSet.as_view({"get": "list", "post": "create"}),
        name="priority-classes",
    ),
    path(
        "platform/priority-classes/<cohort:name>/",
        views.PriorityClassViewSet.as_view(
            {
                "get": "retrieve",
                "put": "update",
                "patch": "partial_update",
                "delete": "destroy",
            }
        ),
        name="priority-class",
    ),
    path(
        "tenants/",
        views.TenantViewSet.as_view({"get": "list", "post": "create"}),
        name="tenants",
    ),
    path(
        "tenants/<slug:slug>/",
        views.TenantViewSet.as_view({"get": "retrieve", "patch": "partial_update"}),
        name="tenant",
    ),
    path(
        "tenants/<slug:tenant_slug>/policy/",
        views.PolicyViewSet.as_view({"get": "retrieve", "patch": "partial_update"}),
        name="tenant-policy",
    ),
    path(
        "tenants/<slug:tenant_slug>/members/",
        views.MemberViewSet.as_view({"get": "list", "post": "create"}),
        name="members",
    ),
    path(
        "tenants/<slug:tenant_slug>/members/<username:username>/",
        views.MemberViewSet.as_view({"patch": "partial_update", "delete": "destroy"}),
        name="member",
    ),
    path(
        "tenants/<slug:tenant_slug>/quotas/",
        views.QuotaViewSet.as_view({"get": "retrieve", "put": "update"}),
        name="quotas",
    ),
    path(
        "tenants/<slug:tenant_slug>/priority-classes/",
        views.TenantPriorityClassViewSet.as_view({"get": "list"}),
        name="tenant-priority-classes",
    ),
    path("audit/", views.AuditEventViewSet.as_view({"get": "list"}), name="audit"),
]
