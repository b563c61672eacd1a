"""The insights page's pictures, drawn on the server as SVG (as feedback/plot.py draws the evaluation's): no script
and no library to vendor, the same in every browser and in a screenshot, readable with CSS off. A day's bar is
stacked by door; the outcomes are one bar split in proportion."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 40, 12, 12, 36
DOORS = (  # door, colour (the legend's words come from the template, translated)
    ("chat", "#1f5fbf"),
    ("api", "#2e8b57"),
    ("mcp", "#8e44ad"),
    ("openai", "#d35400"),
)
OUTCOMES = (
    ("answered", "#2e8b57"),
    ("computed", "#1f5fbf"),
    ("partial", "#f1c40f"),
    ("refused", "#c0392b"),
)


@dataclass
class Rect:
    x: float
    y: float
    w: float
    h: float
    colour: str
    title: str


@dataclass
class Bars:
    width: int
    height: int
    rects: list[Rect] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)  # x, label
    grid: list[tuple[float, str]] = field(default_factory=list)  # y, label
    legend: list[tuple[str, str]] = field(default_factory=list)  # key, colour


GAP_SERIES = (("opened", "#c0392b"), ("closed", "#2e8b57"))
PALETTE = ("#1f5fbf", "#2e8b57", "#8e44ad", "#d35400", "#16a085", "#c0392b", "#7f8c8d", "#b7950b")


def series_of(counts: dict[dt.date, dict[str, int]], order: list[str]) -> tuple[tuple[str, str], ...]:
    """A colour for each key of `counts` (assistants, groups), in `order` (the most asked first), the rest after."""
    keys = list(dict.fromkeys([k for k in order if any(k in day for day in counts.values())]))
    keys += sorted({k for day in counts.values() for k in day} - set(keys))
    return tuple((key, PALETTE[n % len(PALETTE)]) for n, key in enumerate(keys))


def per_day(
    days: list[dt.date], counts: dict[dt.date, dict[str, int]], series: tuple[tuple[str, str], ...] = DOORS
) -> Bars:
    """One bar a day, stacked by door (or `series`); the y scale rounded up to a readable step."""
    chart = Bars(WIDTH, HEIGHT, legend=list(series))
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    most = max((sum(counts.get(day, {}).values()) for day in days), default=0)
    top = _nice(most)
    slot = inner_w / max(len(days), 1)
    for i, day in enumerate(days):
        y = float(TOP + inner_h)
        for door, colour in series:
            n = counts.get(day, {}).get(door, 0)
            if not n:
                continue
            h = inner_h * n / top
            y -= h
            chart.rects.append(Rect(LEFT + i * slot + slot * 0.1, y, slot * 0.8, h, colour, f"{day}: {n} {door}"))
    step = max(1, -(-len(days) // 8))
    chart.ticks = [(LEFT + i * slot + slot / 2, f"{day:%d %b}") for i, day in enumerate(days)][::step]
    chart.grid = [(TOP + inner_h * (1 - v / top), f"{v:g}") for v in (0, top / 2, top)]
    return chart


def split(outcomes: dict[str, int], *, width: int = WIDTH, height: int = 28) -> Bars:
    """One bar, each outcome's share of it."""
    chart = Bars(width, height, legend=list(OUTCOMES))
    total = sum(outcomes.values())
    x = 0.0
    for key, colour in OUTCOMES:
        n = outcomes.get(key, 0)
        if total and n:
            w = width * n / total
            chart.rects.append(Rect(x, 0, w, height, colour, f"{key}: {n} ({100 * n / total:.0f}%)"))
            x += w
    return chart


def _nice(value: float) -> float:
    """The smallest of 1, 2, 5 × 10^k at least `value` (at least 1)."""
    step = 1.0
    while True:
        for factor in (1, 2, 5):
            if factor * step >= value:
                return factor * step
        step *= 10
