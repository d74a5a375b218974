"""Template helpers of the dashboard: relative times, state badges, GPU counts and the
one-line queue summary. Presentation only; the facts come from selectors."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django import template
from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from clusters import selectors
from clusters.admission import counts_in_words as words
from clusters.admission import format_eta
from clusters.admission.explain import reason_label
from clusters.domain.images import ray_version, resolve_image
from clusters.queue import usage_reads
from clusters.queue.waiting import waiting
from clusters.rows import usage
from frontend.kinds import all_pages, pages_for, route_names, tenant_home_route

register = template.Library()

# Terminal escape sequences: CSI (colours, cursor moves: ESC [ ... final byte), OSC (titles,
# links: ESC ] ... BEL or ESC \\) and the two-byte escapes; an ESC that starts none of them
# goes alone. Ray colours its log lines.
ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])?")


def _span(seconds: float) -> str:
    minutes = round(abs(seconds) / 60)
    if minutes < 1:
        return "less than a minute"
    if minutes < 90:
        return f"{minutes} min"
    hours = round(minutes / 60)
    if hours < 48:
        return f"{hours} h"
    return f"{round(hours / 24)} days"


def relative(when: datetime, now: datetime | None = None) -> str:
    """``in 3 h`` or ``5 min ago``."""
    seconds = (when - (now or timezone.now())).total_seconds()
    return f"in {_span(seconds)}" if seconds >= 0 else f"{_span(seconds)} ago"


@register.filter
def reltime(when: datetime | None) -> str:
    """A ``<time>`` element reading ``in 3 h``/``5 min ago``, the exact UTC time as title."""
    if when is None:
        return "—"
    utc = when.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>',
        utc.isoformat(),
        utc.strftime("%Y-%m-%d %H:%M:%S"),
        relative(when),
    )


@register.filter
def seconds_ago(when: datetime | None) -> float:
    """How many seconds ago ``when`` was (0 for ``None`` or the future)."""
    if when is None:
        return 0.0
    return max((timezone.now() - when).total_seconds(), 0.0)


@register.filter
def ray_image(cluster: Any) -> str:
    """The request's image with the Ray version its tag names: ``image (Ray 2.49.2)``."""
    image = resolve_image(cluster)
    version = ray_version(image)
    return f"{image} (Ray {version})" if version else image


@register.filter
def utc(when: datetime | None) -> str:
    """The absolute time in UTC, for tables of history."""
    return "—" if when is None else when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def gpus(amount: Any) -> str:
    """``8``, ``0.5``: never ``8.000``."""
    if amount is None:
        return "0"
    return format(Decimal(amount).normalize(), "f")


@register.filter
def hours(amount: Any) -> str:
    """GPU-hours for a table: ``1,923`` and, below 10, to the tenth (``0.4``), so that a
    small but real usage does not read as none."""
    value = float(amount or 0)
    if value >= 10:
        return f"{value:,.0f}"
    return f"{value:.1f}".removesuffix(".0")


@register.filter
def counted(amount: Any, noun: str) -> str:
    """``1 GPU-hour``, ``2.5 GPU-hours``: the same wording as the services' messages."""
    return words.count(amount if amount is not None else 0, noun)


@register.filter
def shape(request: Any) -> str:
    """A request's shape, worded the same on every page: ``dev · l4 x 2 · 2 GPUs`` (with
    a multiplication sign), the flavors it accepts (``l4 or h100``), autoscaling bounds
    and fractional GPUs."""
    accepted = list(getattr(request, "accepted_flavors", None) or [])
    flavors = " or ".join(accepted) if len(accepted) > 1 else request.flavor.name
    extra = ""
    if request.min_workers is not None or request.max_workers is not None:
        low = request.workers if request.min_workers is None else request.min_workers
        high = request.workers if request.max_workers is None else request.max_workers
        extra += f" (autoscaling {low}\u2013{high})"
    if request.gpu_fraction:
        extra += f" ({gpus(request.gpu_fraction)} GPU each)"
    return format_html(
        '{} · {} \u00d7 {}{} <span class="muted">· {}</span>',
        request.kind,
        flavors,
        request.workers,
        extra,
        words.count(request.gpus or 0, "GPU"),
    )


@register.filter
def reason_words(code: str | None) -> str:
    """A ``queue.reason`` code in words ("team quota used up"): pages never show the code."""
    return reason_label(code) if code else ""


@register.simple_tag
def kinds_nav() -> list[dict[str, Any]]:
    """The tenant menu's links of each kind: its list's and new form's URL names, its
    heading, and the words of a link to its new form (None: the menu offers none)."""
    return [
        {**route_names(kind), "heading": kind.HEADING, "new_words": kind.NAV_NEW}
        for kind in all_pages().values()
    ]


@register.simple_tag
def tenant_home() -> str:
    """The URL name of a tenant's home page."""
    return tenant_home_route()


@register.simple_tag
def mail_sink_on() -> bool:
    """Whether a local mail sink keeps the mails (the Mail page is listed only then)."""
    return bool(settings.MAIL_SINK_DIR)


@register.simple_tag
def state_badge(state: str) -> str:
    """A badge with colour and the state's name (colour is never the only signal)."""
    return format_html('<span class="badge badge-{}">{}</span>', state, state)


@register.simple_tag
def stale_badge(row: Any) -> str:
    """A "stale" badge when the row's Kubernetes cluster cannot be reached: its state is
    the one last read there (the title says when)."""
    stale, since = selectors.staleness(row)
    if not stale:
        return ""
    when = f"last read {timezone.localtime(since):%Y-%m-%d %H:%M}" if since else "not read"
    return format_html(
        '<span class="badge badge-stale" title="Its Kubernetes cluster cannot be reached; '
        '{}">stale</span>',
        when,
    )


@register.simple_tag
def eta_words(eta: datetime | None) -> str:
    """When a waiting request should start, in the words the API's ``eta_text`` uses."""
    if eta is None:
        return "start time unknown"
    text = format_eta(eta, timezone.now())
    return text if text.startswith(("now", "in ")) else f"starts in {text}"


@register.simple_tag
def queue_line(cluster: Any) -> str:
    """ "#2 in acme's queue — acme is using 16 of 16 h100 GPUs … — starts in about 40 min"."""
    found = waiting(cluster)
    if found is None:
        return ""
    if found.position is None:
        return found.message  # held, or not looked at by a pass yet
    parts = [f"#{found.position} in {cluster.tenant.slug}'s queue"]
    if found.looked_at:
        parts.append(found.message.rstrip("."))
    parts.append(eta_words(found.eta))
    return " — ".join(parts)


@register.simple_tag
def recent_usage_line(cluster: Any) -> str:
    """How the tenant's recent GPU-hours weigh on its waiting request (usage-decayed fair
    share; "" when off)."""
    return usage_reads.tenant_standing(cluster.tenant)


@register.simple_tag
def waiting_message(cluster: Any) -> str:
    """Why a queued request waits, in its own sentence (:func:`clusters.queue.waiting.waiting`)."""
    found = waiting(cluster)
    return found.message if found is not None else ""


@register.simple_tag
def idle_line(cluster: Any) -> str:
    """ "in use" / "idle for 42 min" / "idle for 70 min · suspended at 14:05 UTC unless
    used" for a ready cluster (empty otherwise), from :func:`selectors.cluster_activity`."""
    activity = selectors.cluster_activity(cluster)
    if activity is None or activity["checked_at"] is None:
        return ""
    if activity["active"]:
        return "in use"
    line = f"idle for {_span(activity['idle_minutes'] * 60)}"
    if activity["suspend_at"] is not None:
        line += f" · suspended at {activity['suspend_at']:%H:%M} UTC unless used"
    return line


@register.filter
def seconds(amount: int | None) -> str:
    """A number of seconds as a person reads it: ``3600`` is ``1 h``."""
    if amount is None:
        return "—"
    return _span(amount) if amount >= 60 else f"{amount} s"


@register.simple_tag
def run_duration(run: Any) -> str:
    """How long a job's driver ran: started to ended, or to now while it runs."""
    if run is None or run.started_at is None:
        return "—"
    end = run.ended_at or timezone.now()
    return _span(max((end - run.started_at).total_seconds(), 0))


@register.simple_tag
def request_url(request: Any) -> str:
    """The page of a request in a list that mixes clusters and jobs (home, the queues)."""
    view = route_names(pages_for(request.workload))["detail"]
    return reverse(view, args=[request.tenant.slug, request.name])


@register.filter
def thousands(amount: int | None) -> str:
    """``1,000``: an integer with a comma between thousands."""
    return "" if amount is None else f"{amount:,}"


@register.inclusion_tag("frontend/partials/budget_banner.html", takes_context=True)
def budget_banner(context: template.Context) -> dict[str, Any]:
    """A tenant page's banner from 80% of its monthly GPU-hour budget on (at 100%: which
    policy applies); one query, none for a tenant without a budget."""
    tenant = context.get("tenant")
    return {"budget": usage.budget_status(tenant=tenant) if tenant is not None else None}


@register.filter
def plain_log(text: str) -> str:
    """A log's text without terminal escape sequences: a page shows the words, not the
    ``\\x1b[37m`` a terminal would turn into colour. The API keeps them (it is the log as
    Kubernetes returns it, and a terminal renders them)."""
    return ANSI_ESCAPE.sub("", text)
