"""Dashboard routes: session login and logout, home, and the pages of one tenant."""

from collections.abc import Callable

from django.http import HttpResponse
from django.urls import URLPattern, path, re_path
from django.utils.module_loading import import_string

from frontend import views
from frontend.kinds import KindPages, all_pages, route_names
from frontend.views import (
    account,
    kube_clusters,
    mail,
    platform,
    priority_classes,
    quota_caps,
    ssh_keys,
    sso,
    tenant_admin,
    whatif,
)
from frontend.views import workloads as w
from tenants.forms import SignInForm

TENANT = "t/<slug:slug>/"
CLUSTER = TENANT + "clusters/<slug:name>/"


def _kind_routes(workload: str, kind: KindPages) -> list[URLPattern]:
    """One kind's pages: ``new`` before a request's own pages (it is a valid name), ``log``
    and the kind's own pages before the actions (else ``{name}/tokens/`` would be taken for an
    action)."""
    one = f"{TENANT}{kind.PATH}<slug:name>/"
    name = route_names(kind)
    pages: list[tuple[str, Callable[..., HttpResponse], str]] = [
        (TENANT + kind.LIST_PATH, w.workload_list, name["list"]),
        (f"{TENANT}{kind.PATH}new/", w.workload_new, name["new"]),
        (f"{TENANT}{kind.PATH}new/verdict/", w.workload_verdict, name["verdict"]),
        (one, w.workload_detail, name["detail"]),
        (one + "log/", w.workload_log, name["log"]),
    ]
    if kind.MANIFESTS is not None:
        pages.append((one + "manifests.yaml", w.workload_manifests, name["manifests"]))
    which = {"workload": workload}
    routes = [path(route, view, which, name=n) for route, view, n in pages]
    routes += [path(one + route, import_string(view), name=n) for route, view, n in kind.ROUTES]
    routes.append(path(one + "<str:action>/", w.workload_action, which, name=name["action"]))
    return routes


urlpatterns = [
    path("", views.home, name="home"),
    path(
        "login/",
        sso.SignInView.as_view(template_name="frontend/login.html", authentication_form=SignInForm),
        name="login",
    ),
    path("logout/", sso.sign_out, name="logout"),
    path("account/password/", account.password_change, name="password-change"),
    path("account/ssh-keys/", ssh_keys.ssh_keys, name="ssh-keys"),
    path("account/ssh-keys/<int:key_id>/remove/", ssh_keys.ssh_key_remove, name="ssh-key-remove"),
    path("password-reset/", account.PasswordResetView.as_view(), name="password_reset"),
    path(
        "password-reset/sent/",
        account.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "password-reset/<uidb64>/<token>/",
        account.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "password-reset/done/",
        account.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("sso/login/", sso.sso_login, name="sso-login"),
    path("sso/callback/", sso.sso_callback, name="sso-callback"),
    path("queue/", views.global_queue, name="global-queue-page"),
    path("capacity/", views.capacity_page, name="capacity-page"),
    path("fair-share/", views.fairshare_page, name="fairshare-page"),
    path("usage/", views.platform_usage_page, name="platform-usage-page"),
    path("audit/", views.audit_page, name="audit-page"),
    path("notifications/", views.notifications_page, name="notifications-page"),
    path("mail/", mail.mail_page, name="mail-page"),
    path("mail/<str:name>/", mail.mail_detail, name="mail-detail"),
    path(TENANT + "webhooks/", views.webhooks_page, name="webhooks-page"),
    path(TENANT + "webhooks/<int:webhook_id>/delete/", views.webhook_delete, name="webhook-delete"),
    path(TENANT + "webhooks/<int:webhook_id>/test/", views.webhook_test, name="webhook-test"),
    # Platform administration (platform admins only; 404 for anybody else).
    path("platform/users/", platform.users, name="platform-users"),
    path(
        "platform/users/<int:user_id>/password/",
        platform.user_password,
        name="platform-user-password",
    ),
    path(
        "platform/users/<int:user_id>/<str:action>/",
        platform.user_action,
        name="platform-user-action",
    ),
    path("platform/flavors/", platform.flavors, name="platform-flavors"),
    path("platform/prices/", views.prices, name="platform-prices"),
    path("platform/whatif/", whatif.whatif_page, name="platform-whatif"),
    path("platform/flavors/<slug:name>/", platform.flavor_edit, name="platform-flavor"),
    path(
        "platform/flavors/<slug:name>/delete/",
        platform.flavor_delete,
        name="platform-flavor-delete",
    ),
    path("platform/cohorts/", platform.cohorts, name="platform-cohorts"),
    path(
        "platform/priority-classes/",
        priority_classes.priority_classes,
        name="platform-priority-classes",
    ),
    path(
        "platform/priority-classes/<slug:name>/delete/",
        priority_classes.priority_class_delete,
        name="platform-priority-class-delete",
    ),
    path("platform/kube-clusters/", kube_clusters.kube_clusters, name="platform-kube-clusters"),
    path(
        "platform/kube-clusters/<slug:name>/",
        kube_clusters.kube_cluster,
        name="platform-kube-cluster",
    ),
    path(
        "platform/kube-clusters/<slug:name>/stock/",
        kube_clusters.kube_cluster_stock,
        name="platform-kube-cluster-stock",
    ),
    path(
        "platform/kube-clusters/<slug:name>/<str:action>/",
        kube_clusters.kube_cluster_action,
        name="platform-kube-cluster-action",
    ),
    path(
        "platform/cohorts/<slug:name>/delete/",
        platform.cohort_delete,
        name="platform-cohort-delete",
    ),
    path("platform/tenants/", platform.tenants, name="platform-tenants"),
    path("platform/tenants/<slug:slug>/", platform.tenant, name="platform-tenant"),
    path(
        "platform/tenants/<slug:slug>/quota/", platform.tenant_quota, name="platform-tenant-quota"
    ),
    path(
        "platform/tenants/<slug:slug>/quota/caps/",
        quota_caps.tenant_quota_cap,
        name="platform-tenant-quota-cap",
    ),
    path(
        "platform/tenants/<slug:slug>/quota/preview/",
        platform.tenant_quota_preview,
        name="platform-tenant-quota-preview",
    ),
    path(
        "platform/tenants/<slug:slug>/<str:action>/",
        platform.tenant_archive,
        name="platform-tenant-archive",
    ),
    # A tenant's admins: members, policy, and the queue controls of one request.
    path(TENANT + "members/", tenant_admin.members, name="tenant-members-page"),
    path(
        TENANT + "members/<str:username>/role/",
        tenant_admin.member_role,
        name="tenant-member-role",
    ),
    path(
        TENANT + "members/<str:username>/remove/",
        tenant_admin.member_remove,
        name="tenant-member-remove",
    ),
    path(TENANT + "policy/", tenant_admin.policy, name="tenant-policy-page"),
    path(CLUSTER + "manage/", tenant_admin.manage, name="cluster-manage"),
    path(CLUSTER + "manage/<str:control>/", tenant_admin.manage, name="cluster-manage-control"),
    path(TENANT + "queue/", views.queue, name="tenant-queue-page"),
    path(TENANT + "usage/", views.usage_page, name="tenant-usage-page"),
    path(TENANT + "usage/report/", views.cost_report_page, name="tenant-cost-report"),
    path(TENANT + "audit/", views.tenant_audit_page, name="tenant-audit-page"),
    re_path(
        r"^t/(?P<slug>[-a-zA-Z0-9_]+)/clusters/(?P<name>[-a-z0-9]+)/ray/(?P<path>.*)$",
        views.ray_dashboard,
        name="cluster-ray",
    ),
    *(route for workload, kind in all_pages().items() for route in _kind_routes(workload, kind)),
]
