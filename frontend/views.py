"""Dashboard views. For now a home page listing the user's tenants; the dashboard proper
arrives with a later issue and will call the same selectors and services as the API."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tenants.selectors import tenant_list


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The tenants the signed-in user can see."""
    return render(request, "frontend/home.html", {"tenants": tenant_list(user=request.user)})
