"""The dry-run verdict in English: what a request is charged, when it would start, and
the sentences the dashboard and the CLI show before submission.

One place builds them so that the web panel, the API's ``headline``/``summary`` and the
CLI read alike for dev, production and job shapes. Pure, like the rest of
:mod:`clusters.admission`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from clusters.admission.counts_in_words import count
from clusters.admission.eta import format_eta
from clusters.admission.snapshot import FITS_NOW, PROD, WILL_QUEUE, Pending

NEVER_FITS_HEADLINE = "Never fits."


def charged(p: Pending) -> str:
    """What admission charges ``p`` on its flavor: ``1 GPU charged``, ``0.5 GPUs
    charged``, or for production (one whole node per worker) ``2 whole nodes, 16 GPUs
    charged``."""
    gpus = count(p.gpus, "GPU")
    if p.kind == PROD:
        return f"{count(p.workers, 'whole node')}, {gpus} charged"
    return f"{gpus} charged"


def start_words(verdict: str, eta: datetime | None, now: datetime) -> str:
    """When it would start, to follow "start" or "on h100": ``now``, ``within a
    minute``, ``in about 40 min``, ``at a time not yet known``."""
    if verdict == FITS_NOW:
        return "now"
    if eta is None:
        return "at a time not yet known"
    if (eta - now).total_seconds() < 60:
        return "within a minute"
    return f"in {format_eta(eta, now)}"


def on_flavors(options: Sequence[Pending]) -> str:
    """``on h100 (1 GPU charged)``; for several accepted flavors ``on l4 or h100 (1 GPU
    charged)``, each flavor with its own charge where they differ."""
    charges = [charged(o) for o in options]
    names = [o.flavor for o in options]
    if len(set(charges)) == 1:
        return f"on {' or '.join(names)} ({charges[0]})"
    return "on " + " or ".join(f"{n} ({c})" for n, c in zip(names, charges, strict=True))


def option(options: Sequence[Pending], verdict: str, eta: datetime | None, now: datetime) -> str:
    """One choice of the summary: ``on l4 now (1 GPU charged)``, ``on l4 or h100 (1 GPU
    charged) in about 40 min``."""
    when = start_words(verdict, eta, now)
    if len(options) == 1:
        return f"on {options[0].flavor} {when} ({charged(options[0])})"
    return f"{on_flavors(options)} {when}"


def summary(choices: Sequence[str]) -> str:
    """The choices, soonest first: ``Starts on l4 now, or on h100 in about 40 min.``"""
    return f"Starts {', or '.join(choices)}." if choices else ""


def alternative(p: Pending, verdict: str, eta: datetime | None, now: datetime) -> str:
    """What another flavor would do, read after its name: ``fits now (1 GPU charged)``,
    ``would start in about 40 min (2 whole nodes, 16 GPUs charged)``."""
    if verdict == FITS_NOW:
        return f"fits now ({charged(p)})"
    return f"would start {start_words(verdict, eta, now)} ({charged(p)})"


def headline(
    verdict: str,
    *,
    options: Sequence[Pending],
    position: int | None,
    eta: datetime | None,
    now: datetime,
    placement: str = "",
) -> str:
    """The verdict's first sentence. ``options`` are the flavors it would start on
    (fits now: the one it is placed on) or waits on, most preferred first.

    ``Fits now on h100: 2 whole nodes, 16 GPUs charged.``;
    ``Will queue on h100 (1 GPU charged): #1 in acme's queue, expected to start in about
    2 h.``; ``Never fits.`` In a fleet of several clusters, ``placement`` says where it
    would start and why not elsewhere: ``Fits now on l4 in cloud-l4 (onprem is full): 1
    GPU charged.``
    """
    if verdict == FITS_NOW:
        where = f" in {placement}" if placement else ""
        return f"Fits now on {options[0].flavor}{where}: {charged(options[0])}."
    if verdict == WILL_QUEUE:
        place = f"#{position} in {options[0].tenant}'s queue" if position else "in the queue"
        when = start_words(verdict, eta, now)
        return f"Will queue {on_flavors(options)}: {place}, expected to start {when}."
    return NEVER_FITS_HEADLINE
