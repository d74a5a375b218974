"""Routes of the notifications API (spelled out, as in tenants/api/urls.py)."""

from django.urls import path

from notifications.api import views

urlpatterns = [
    path(
        "notifications/preferences/",
        views.PreferencesViewSet.as_view({"get": "retrieve", "put": "update"}),
        name="notification-preferences",
    ),
    path(
        "notifications/deliveries/",
        views.MyDeliveriesViewSet.as_view({"get": "list"}),
        name="notification-deliveries",
    ),
    path(
        "tenants/<slug:tenant_slug>/webhooks/",
        views.WebhookViewSet.as_view({"get": "list", "post": "create"}),
        name="webhooks",
    ),
    path(
        "tenants/<slug:tenant_slug>/webhooks/deliveries/",
        views.WebhookViewSet.as_view({"get": "deliveries"}),
        name="webhook-deliveries",
    ),
    path(
        "tenants/<slug:tenant_slug>/webhooks/<int:webhook_id>/",
        views.WebhookViewSet.as_view({"delete": "destroy"}),
        name="webhook",
    ),
    path(
        "tenants/<slug:tenant_slug>/webhooks/<int:webhook_id>/test/",
        views.WebhookViewSet.as_view({"post": "test"}),
        name="webhook-test",
    ),
]
