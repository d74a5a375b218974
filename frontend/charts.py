"""Charts drawn on the server as inline SVG: the geometry of stacked daily bars.

No chart library and no script: a view turns numbers into rectangles here and the
template ``frontend/partials/usage_chart.html`` writes them out. Colours come from CSS
classes (``chart-s0`` ... in gangway.css), so the strict CSP (no inline styles) holds.
Presentation only: the numbers come from :mod:`clusters.rows.usage`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

WIDTH = 720
HEIGHT = 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 8, 10, 22
# Beyond this many series the smallest are drawn as one "other" series, so that the
# colours stay tellable apart.
MAX_SERIES = 6
_MAX_X_LABELS = 8


@dataclass(frozen=True)
class Bar:
    """One day's share of one series, in SVG user units."""

    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(frozen=True)
class Tick:
    x: float
    y: float
    text: str


@dataclass(frozen=True)
class LegendItem:
    label: str
    css: str
    total: float


@dataclass(frozen=True)
class Chart:
    """A stacked bar chart of one value per day and series."""

    title: str
    width: int
    height: int
    bars: list[Bar]
    y_ticks: list[Tick]  # a gridline across the plot at each
    x_ticks: list[Tick]
    legend: list[LegendItem]
    plot_left: int
    plot_right: int
    total: float

    @property
    def empty(self) -> bool:
        return not self.bars


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power  # pragma: no cover - the loop ends at 10


def _number(value: float) -> str:
    return f"{value:,.1f}".removesuffix(".0")


def stacked_days(
    *,
    title: str,
    days: Sequence[date],
    series: Mapping[str, Mapping[date, Decimal]],
    css: Mapping[str, str] | None = None,
    unit: str = "GPU-h",
) -> Chart:
    """Bars per day, one segment per series stacked in the order given (largest total
    first when ``css`` is not given, the rest beyond :data:`MAX_SERIES` merged as
    "other"). ``css`` names each series' class; without it the series get ``chart-s0``,
    ``chart-s1``... in order."""
    named = dict(series)
    if css is None:
        ranked = sorted(named, key=lambda name: (-sum(named[name].values()), name))
        if len(ranked) > MAX_SERIES:
            rest = ranked[MAX_SERIES - 1 :]
            other: dict[date, Decimal] = {}
            for name in rest:
                for day, hours in named[name].items():
                    other[day] = other.get(day, Decimal(0)) + hours
            named = {name: named[name] for name in ranked[: MAX_SERIES - 1]}
            named[f"{len(rest)} others"] = other
        css = {name: f"chart-s{i}" for i, name in enumerate(named)}
    stacks = {
        day: sum((s.get(day, Decimal(0)) for s in named.values()), Decimal(0)) for day in days
    }
    top = _nice_ceiling(float(max(stacks.values(), default=Decimal(0))))
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    slot = plot_w / max(len(days), 1)
    bar_w = max(slot * 0.8, 1.0)
    bars: list[Bar] = []
    for i, day in enumerate(days):
        x = _LEFT + i * slot + (slot - bar_w) / 2
        base = float(HEIGHT - _BOTTOM)
        for name, values in named.items():
            value = float(values.get(day, Decimal(0)))
            if value <= 0:
                continue
            height = value / top * plot_h
            base -= height
            bars.append(
                Bar(
                    x=round(x, 2),
                    y=round(base, 2),
                    width=round(bar_w, 2),
                    height=round(height, 2),
                    css=css[name],
                    title=f"{day:%b %-d}: {name} {_number(value)} {unit}",
                )
            )
    y_ticks = [
        Tick(x=_LEFT - 4, y=round(HEIGHT - _BOTTOM - f * plot_h, 2), text=_number(top * f))
        for f in (0, 0.5, 1)
    ]
    every = max(1, math.ceil(len(days) / _MAX_X_LABELS))
    x_ticks = [
        Tick(x=round(_LEFT + i * slot + slot / 2, 2), y=HEIGHT - 6, text=f"{day:%b %-d}")
        for i, day in enumerate(days)
        if i % every == 0
    ]
    legend = [
        LegendItem(label=name, css=css[name], total=round(float(sum(values.values())), 1))
        for name, values in named.items()
    ]
    return Chart(
        title=title,
        width=WIDTH,
        height=HEIGHT,
        bars=bars,
        y_ticks=y_ticks,
        x_ticks=x_ticks,
        legend=legend,
        plot_left=_LEFT,
        plot_right=WIDTH - _RIGHT,
        total=round(float(sum(stacks.values())), 1),
    )
