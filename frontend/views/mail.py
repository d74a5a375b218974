"""The Mail page: the mails a local mail sink kept (``make run``), for reading them
without a mail client. Listed in the header only when ``MAIL_SINK_DIR`` is set; a 404
otherwise (production). A user reads the mails sent to their address; a platform
admin reads all."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from notifications import selectors


@login_required
@require_safe
def mail_page(request: HttpRequest) -> HttpResponse:
    """The kept mails, newest first."""
    if selectors.mail_sink_dir() is None:
        raise Http404("No mail sink is configured.")
    response = render(
        request,
        "frontend/mail.html",
        {"mails": selectors.sink_mails(user=request.user), "directory": selectors.mail_sink_dir()},
    )
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_safe
def mail_detail(request: HttpRequest, name: str) -> HttpResponse:
    """One kept mail: its headers and text."""
    found = selectors.sink_mail(user=request.user, name=name)
    if found is None:
        raise Http404("No such mail.")
    response = render(request, "frontend/mail_detail.html", {"mail": found})
    response["Cache-Control"] = "no-store"
    return response
