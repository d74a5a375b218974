"""The monthly cost report mailed to each tenant's admins (docs/cost.md): on the first
days of a month the beat task mails last month's report (HTML, with the CSV attached)
through Django's email backend, once per tenant and month (:class:`CostReportMail`)."""

from __future__ import annotations

import logging
from datetime import date, datetime

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.utils import timezone

from clusters.models import CostReportMail
from clusters.rows.cost_report import last_month, monthly_report, report_csv
from tenants.models import Membership, Role, Tenant

log = logging.getLogger(__name__)


def mail_report(*, tenant: Tenant, month: date, now: datetime | None = None) -> int:
    """Mail the tenant's report of ``month`` to its active admins with an email address,
    unless it was mailed already; returns how many were mailed to (0: none, or done)."""
    admins = [
        m.user.email
        for m in Membership.objects.filter(tenant=tenant, role=Role.ADMIN).select_related("user")
        if m.user.is_active and m.user.email
    ]
    report = monthly_report(tenant=tenant, month=month, now=now)
    url = f"{settings.PUBLIC_BASE_URL}/t/{tenant.slug}/usage/report/?month={month:%Y-%m}"
    context = {"report": report, "url": url}
    try:
        with transaction.atomic():
            # The row first: a second run (or a retry) finds it and mails nothing.
            row = CostReportMail.objects.create(tenant=tenant, month=month)
            if not admins:
                return 0
            message = EmailMultiAlternatives(
                subject=f"[gangway] {tenant.slug} cost report for {month:%B %Y}",
                body=render_to_string("notifications/cost_report.txt", context),
                from_email=settings.DEFAULT_FROM_EMAIL,
                to=admins,
                connection=get_connection(timeout=settings.EMAIL_TIMEOUT),
            )
            message.attach_alternative(
                render_to_string("notifications/cost_report_mail.html", context), "text/html"
            )
            message.attach(
                f"gangway-cost-{tenant.slug}-{month:%Y-%m}.csv", report_csv(report), "text/csv"
            )
            # Sent inside the transaction: a failure rolls the row back for the next run.
            message.send()
            row.recipients = len(admins)
            row.save(update_fields=["recipients"])
    except IntegrityError:
        return 0
    return len(admins)


def mail_reports(*, now: datetime | None = None) -> dict[str, int]:
    """Mail last month's report to every tenant not archived that has not had it."""
    now = now or timezone.now()
    month = last_month(now)
    done = set(
        CostReportMail.objects.unscoped().filter(month=month).values_list("tenant_id", flat=True)
    )
    sent: dict[str, int] = {}
    for tenant in Tenant.objects.filter(archived_at__isnull=True).exclude(pk__in=done):
        try:
            sent[tenant.slug] = mail_report(tenant=tenant, month=month, now=now)
        except Exception:  # one tenant's mail must not stop the others'
            log.exception("cost report of %s for %s not mailed", tenant.slug, month)
    return sent
