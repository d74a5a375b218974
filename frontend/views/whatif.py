"""The what-if planner page (platform admins): replay a period against a changed world.

A GET without ``run`` shows the form only; with it, the form's period and changes are
replayed by :func:`clusters.whatif.services.whatif_compare` (the service the
``manage.py whatif`` command calls) and the figures are shown side by side with a chart.
The request waits for the simulation: a week takes well under a minute.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from clusters.whatif import services
from clusters.whatif.workload import LOAD
from frontend.whatif_chart import wait_chart
from tenants.selectors import is_platform_admin


class WhatIfForm(forms.Form):
    """The period to replay and the changes, one per line."""

    source = forms.ChoiceField(
        choices=[("recorded", "Recorded history"), ("synthetic", "Synthetic week")],
        initial="recorded",
    )
    start = forms.DateField(required=False, help_text="Recorded: first day (UTC).")
    end = forms.DateField(required=False, help_text="Recorded: last day (UTC), included.")
    days = forms.FloatField(initial=7, min_value=0.01, max_value=28, required=False)
    seed = forms.IntegerField(initial=19, required=False)
    changes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}),
        required=False,
        help_text="One per line: nodes:h100=+8, quota:TENANT/FLAVOR=N, "
        "borrow:TENANT/FLAVOR=N, weight:TENANT=N, idle:TENANT=MINUTES (idle:*=0), "
        "topology:FLAVOR=LEVEL (e.g. topology:h100=rack), half-life:HOURS (0: off), "
        "notice:SECONDS (notice:off), requeue:back or requeue:place.",
    )


def _compare(form: WhatIfForm) -> services.Comparison:
    data = form.cleaned_data
    changes = services.parse_changes(data["changes"].splitlines())
    if data["source"] == "synthetic":
        world, workload = services.synthetic(
            seed=data["seed"] if data["seed"] is not None else 19,
            days=data["days"] or 7,
            load=LOAD,
        )
    else:
        today = timezone.now().date()
        last = data["end"] or today
        first = data["start"] or last - timedelta(days=6)
        world, workload = services.recorded(
            start=datetime.combine(first, time.min, tzinfo=UTC),
            end=datetime.combine(last + timedelta(days=1), time.min, tzinfo=UTC),
        )
    return services.whatif_compare(world=world, workload=workload, changes=changes)


@login_required
def whatif_page(request: HttpRequest) -> HttpResponse:
    """The form, and with ``run`` the comparison; anybody but a platform admin gets a 404."""
    if not is_platform_admin(request.user):
        raise Http404("No such page.")
    context: dict[str, object] = {"not_modelled": services.NOT_MODELLED}
    if "run" in request.GET:
        form = WhatIfForm(request.GET)
        if form.is_valid():
            try:
                comparison = _compare(form)
            except services.WhatIfError as error:
                form.add_error("changes", str(error))
            else:
                context.update(
                    comparison=comparison,
                    summary=services.summary_rows(comparison),
                    tenants=services.tenant_rows(comparison),
                    chart=wait_chart(comparison),
                )
    else:
        form = WhatIfForm()
    context["form"] = form
    return render(request, "frontend/platform/whatif.html", context)
