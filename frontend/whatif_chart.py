"""The what-if page's chart: mean wait per tenant, the world as it is beside the changed one.

Geometry only, as in :mod:`frontend.charts`: the view passes the comparison's figures and
the template ``frontend/partials/whatif_chart.html`` writes the rectangles as inline SVG,
coloured by CSS classes (``chart-s0``, ``chart-s1``), so the CSP holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusters.whatif.services import Comparison
from frontend.charts import Bar, Tick

WIDTH, HEIGHT = 720, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 8, 10, 40


@dataclass(frozen=True)
class WaitChart:
    """Grouped bars: one pair per tenant (as is, changed), in minutes of mean wait."""

    width: int
    height: int
    bars: list[Bar]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    plot_left: int
    plot_right: int


def _nice(value: float) -> float:
    step = 1.0
    while step * 10 < value:
        step *= 10
    for factor in (1, 2, 5, 10):
        if value <= factor * step:
            return factor * step
    return 10 * step  # pragma: no cover - the loop ends at 10


def wait_chart(c: Comparison) -> WaitChart:
    """The mean wait per tenant, as is (``chart-s0``) and changed (``chart-s1``)."""
    changed = {t.tenant: t for t in c.changed.tenants}
    pairs = [
        (t.tenant, t.mean_wait / 60, changed[t.tenant].mean_wait / 60) for t in c.as_is.tenants
    ]
    top = _nice(max([max(a, b) for _, a, b in pairs] + [1.0]))
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    slot = plot_w / max(len(pairs), 1)
    bar_w = slot * 0.35
    bars: list[Bar] = []
    x_ticks: list[Tick] = []
    for i, (tenant, before, after) in enumerate(pairs):
        x = _LEFT + i * slot + slot * 0.15
        for n, (value, label) in enumerate(((before, "as is"), (after, "changed"))):
            h = plot_h * value / top
            bars.append(
                Bar(
                    x=round(x + n * bar_w, 1),
                    y=round(_TOP + plot_h - h, 1),
                    width=round(bar_w, 1),
                    height=round(h, 1),
                    css=f"chart-s{n}",
                    title=f"{tenant}, {label}: {value:.0f} min mean wait",
                )
            )
        x_ticks.append(Tick(x=round(x + bar_w, 1), y=HEIGHT - _BOTTOM + 16, text=tenant))
    y_ticks = [
        Tick(x=_LEFT - 4, y=round(_TOP + plot_h * (1 - k / 4), 1), text=f"{top * k / 4:g} min")
        for k in range(5)
    ]
    return WaitChart(WIDTH, HEIGHT, bars, y_ticks, x_ticks, _LEFT, WIDTH - _RIGHT)
