"""The notifications pages: the user's own (preferences and delivery log) and a
tenant's webhooks (tenant admins: add, with the secret shown once; delete; test; recent
deliveries). Every write is a service of :mod:`notifications.services`."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from frontend.forms import NotificationPreferencesForm, WebhookForm
from frontend.views.common import HtmxHttpRequest, TenantPage, admin_page
from notifications import selectors, services
from notifications.models import TenantWebhook

PAGE_SIZE = 50


def _add_errors(form: Any, exc: ValidationError) -> None:
    by_field: dict[str, Any] = (
        exc.error_dict if hasattr(exc, "error_dict") else {"__all__": exc.error_list}
    )
    for field, errors in by_field.items():
        target = field if field in form.fields else None
        for error in errors:
            form.add_error(target, error)


@login_required
def notifications_page(request: HtmxHttpRequest) -> HttpResponse:
    """The user's choices per kind and their delivery log (htmx polls the log)."""
    if request.htmx and request.method == "GET":
        return _rows(request, selectors.deliveries_of_user(user=request.user)[:PAGE_SIZE])
    current = selectors.preferences_of(user=request.user)
    initial: dict[str, Any] = {"webhook_url": current["webhook_url"]}
    for line in current["preferences"]:
        initial[f"{line['kind']}-email"] = line["email"]
        initial[f"{line['kind']}-webhook"] = line["webhook"]
    form = NotificationPreferencesForm(
        request.POST if request.method == "POST" else None, initial=initial
    )
    secret = None
    if request.method == "POST" and form.is_valid():
        try:
            secret = services.preferences_set(
                user=request.user,
                lines=form.lines(),
                webhook_url=form.cleaned_data["webhook_url"],
            )
        except ValidationError as exc:
            _add_errors(form, exc)
        else:
            if not secret:
                messages.success(request, "Your notification preferences are saved.")
                return redirect("notifications-page")
    log = Paginator(selectors.deliveries_of_user(user=request.user), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    status = 400 if form.is_bound and form.errors else 200
    response = render(
        request,
        "frontend/notifications.html",
        {
            "form": form,
            "email": current["email"],
            "log": log,
            "secret": secret,
            "poll_url": request.path,
        },
        status=status,
    )
    response["Cache-Control"] = "no-store"
    return response


def _rows(request: HttpRequest, deliveries: Any) -> HttpResponse:
    return render(
        request,
        "frontend/partials/delivery_rows.html",
        {"deliveries": deliveries, "poll_url": request.path},
    )


@login_required
def webhooks_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The tenant's webhooks, the add form, and the recent deliveries to them (htmx
    polls the deliveries)."""
    page = admin_page(request, slug, "its webhooks")
    if request.htmx and request.method == "GET":
        return _rows(request, selectors.tenant_deliveries(tenant=page.tenant)[:PAGE_SIZE])
    form = WebhookForm(request.POST if request.method == "POST" else None)
    created = None
    secret = None
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                created, secret = services.tenant_webhook_create(
                    actor=request.user,
                    tenant=page.tenant,
                    url=form.cleaned_data["url"],
                    kinds=form.cleaned_data["kinds"],
                    name=form.cleaned_data["name"],
                )
            except ValidationError as exc:
                _add_errors(form, exc)
            else:
                status = 201
                form = WebhookForm()
    context = page.context(
        form=form,
        webhooks=selectors.tenant_webhooks(tenant=page.tenant),
        deliveries=selectors.tenant_deliveries(tenant=page.tenant)[:PAGE_SIZE],
        created=created,
        secret=secret,
        poll_url=request.path,
    )
    response = render(request, "frontend/webhooks.html", context, status=status)
    response["Cache-Control"] = "no-store"
    return response


def _webhook(page: TenantPage, webhook_id: int) -> TenantWebhook:
    hook = selectors.tenant_webhooks(tenant=page.tenant).filter(pk=webhook_id).first()
    if hook is None:
        raise Http404(f"{page.tenant.name} has no webhook {webhook_id}.")
    return hook


@login_required
@require_POST
def webhook_delete(request: HttpRequest, slug: str, webhook_id: int) -> HttpResponse:
    page = admin_page(request, slug, "its webhooks")
    hook = _webhook(page, webhook_id)
    services.tenant_webhook_delete(actor=request.user, webhook=hook)
    messages.success(request, f"{hook} was deleted.")
    return redirect("webhooks-page", slug=page.tenant.slug)


@login_required
@require_POST
def webhook_test(request: HttpRequest, slug: str, webhook_id: int) -> HttpResponse:
    page = admin_page(request, slug, "its webhooks")
    hook = _webhook(page, webhook_id)
    delivery = services.tenant_webhook_test(actor=request.user, webhook=hook)
    messages.success(request, f"A test notice to {hook} is queued ({delivery.delivery_id}).")
    return redirect("webhooks-page", slug=page.tenant.slug)
