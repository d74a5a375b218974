"""The Django admin as a read-only window on the tables, for every model registered in it.

Every write goes through a service, which validates it and audits it in the same
transaction; the admin's own forms would skip both. So this site makes every
registration read-only as it is registered (its own, Django's users and groups, knox's
tokens, any model registered later); changes are made through the API or the dashboard.
``INSTALLED_APPS`` names :class:`GangwayAdminConfig` instead of ``django.contrib.admin``,
which makes this the default ``admin.site``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.core.exceptions import PermissionDenied
from django.db.models import Model

READ_ONLY_NOTE = (
    "This admin is read-only. Change tenants, members, quotas, flavors and users through "
    "the API (/api/docs/) or the dashboard, where every change is validated and audited."
)


class ReadOnlyInline:
    """Mixed into every inline of a read-only admin: it may show rows, never write them."""

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin:
    """Mixed in front of every ModelAdmin by :class:`ReadOnlyAdminSite`.

    The permission methods make Django refuse (403) every add, change and delete view and
    render change pages with all fields read-only; the write hooks raise as well, so a
    view that forgot to ask for permission still cannot save.
    """

    change_form_template = "admin/gangway_read_only_change_form.html"
    change_list_template = "admin/gangway_read_only_change_list.html"

    def has_add_permission(self, request: Any, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def get_actions(self, request: Any) -> dict[str, Any]:
        return {}  # the bulk "delete selected" included

    def save_model(self, request: Any, obj: Any, form: Any, change: Any) -> None:
        raise PermissionDenied(READ_ONLY_NOTE)

    def delete_model(self, request: Any, obj: Any) -> None:
        raise PermissionDenied(READ_ONLY_NOTE)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        raise PermissionDenied(READ_ONLY_NOTE)

    def save_related(self, request: Any, form: Any, formsets: Any, change: Any) -> None:
        raise PermissionDenied(READ_ONLY_NOTE)


def read_only(admin_class: type[admin.ModelAdmin]) -> type[admin.ModelAdmin]:
    """``admin_class`` with :class:`ReadOnlyAdmin` in front, and its inlines read-only."""
    inlines = [
        type(f"ReadOnly{inline.__name__}", (ReadOnlyInline, inline), {})
        for inline in admin_class.inlines
    ]
    return type(
        f"ReadOnly{admin_class.__name__}",
        (ReadOnlyAdmin, admin_class),
        {"inlines": inlines, "__module__": admin_class.__module__},
    )


class ReadOnlyAdminSite(admin.AdminSite):
    """An admin site whose every registration is read-only (see the module docstring)."""

    site_header = "gangway admin (read-only)"
    site_title = "gangway admin"
    index_title = READ_ONLY_NOTE

    def each_context(self, request: Any) -> dict[str, Any]:
        """Every admin page's context, with the note its templates show."""
        return {**super().each_context(request), "read_only_note": READ_ONLY_NOTE}

    def register(
        self,
        model_or_iterable: type[Model] | Iterable[type[Model]],
        admin_class: type[admin.ModelAdmin] | None = None,
        **options: Any,
    ) -> None:
        super().register(model_or_iterable, read_only(admin_class or admin.ModelAdmin), **options)


class GangwayAdminConfig(AdminConfig):
    """``django.contrib.admin`` with :class:`ReadOnlyAdminSite` as its default site."""

    default_site = "controlplane.admin_site.ReadOnlyAdminSite"
