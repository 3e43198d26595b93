"""Geometry for the admin page's two pictures, drawn by the templates as inline SVG.

No script and no outside resource (the page's CSP forbids both): the server works out every
rectangle and line, the template only writes them out. Both pictures scale with the page
(``viewBox``), so they fit a phone as well as a desktop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from gateway.memory.policy import Policy
from gateway.observability.metrics import DROP_REASONS

# One colour per drop reason, in DROP_REASONS order; injected memories are green.
INJECTED_COLOUR = "#2e7d32"
_REASON_COLOURS = (
    "#8d6e63",  # expired
    "#90a4ae",  # scope
    "#b0bec5",  # source
    "#ef6c00",  # threshold
    "#7e57c2",  # superseded
    "#c2185b",  # conflict
    "#b3261e",  # sensitivity
    "#546e7a",  # paused
    "#fbc02d",  # limit
    "#0288d1",  # budget
)
REASON_COLOURS = dict(zip(DROP_REASONS, _REASON_COLOURS, strict=True))


@dataclass
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    title: str


@dataclass
class DailyChart:
    """Per day: a green bar of memories injected beside a bar of dropped ones, stacked by
    reason; the y axis counts memories."""

    width: int
    height: int
    rects: list[Rect]
    ticks: list[tuple[float, int]]  # (y, value)
    labels: list[tuple[float, str]]  # (x, YYYY-MM-DD) under a few days
    legend: list[tuple[str, str]]  # (colour, reason) for reasons that occur
    plot: tuple[float, float, float, float]  # left, top, right, bottom
    answers: int
    empty: bool = field(default=False)


def days_ending(now: datetime, count: int) -> list[str]:
    """The ``count`` days up to and including today (UTC), oldest first, as YYYY-MM-DD."""
    today = now.date()
    return [(today - timedelta(days=count - 1 - i)).isoformat() for i in range(count)]


def daily_chart(per_day: dict[str, dict[str, int]]) -> DailyChart:
    days = list(per_day)
    width, height = 640, 220
    left, top, right, bottom = 36.0, 10.0, width - 8.0, height - 28.0
    peak = 1
    for counts in per_day.values():
        dropped = sum(v for k, v in counts.items() if k.startswith("dropped:"))
        peak = max(peak, counts.get("injected", 0), dropped)
    step = _nice_step(peak)
    top_value = step * -(-peak // step)
    scale = (bottom - top) / top_value
    slot = (right - left) / max(len(days), 1)
    bar = slot * 0.36
    rects: list[Rect] = []
    seen: set[str] = set()
    for i, day in enumerate(days):
        counts = per_day[day]
        x = left + i * slot + slot * 0.12
        injected = counts.get("injected", 0)
        if injected:
            h = injected * scale
            rects.append(
                Rect(x, bottom - h, bar, h, INJECTED_COLOUR, f"{day}: {injected} injected")
            )
        y = bottom
        for reason in DROP_REASONS:
            n = counts.get(f"dropped:{reason}", 0)
            if not n:
                continue
            seen.add(reason)
            h = n * scale
            y -= h
            rects.append(
                Rect(x + bar, y, bar, h, REASON_COLOURS[reason], f"{day}: {n} dropped ({reason})")
            )
    ticks = [(bottom - v * scale, v) for v in range(0, top_value + 1, step)]
    shown = {0, len(days) // 2, len(days) - 1} if days else set()
    labels = [(left + i * slot + slot / 2, d) for i, d in enumerate(days) if i in shown]
    legend = [(INJECTED_COLOUR, "injected")] + [
        (REASON_COLOURS[r], r) for r in DROP_REASONS if r in seen
    ]
    answers = sum(c.get("answers", 0) for c in per_day.values())
    return DailyChart(
        width,
        height,
        rects,
        ticks,
        labels,
        legend,
        (left, top, right, bottom),
        answers,
        empty=answers == 0,
    )


def _nice_step(peak: int) -> int:
    for step in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000):
        if peak / step <= 5:
            return step
    return 10 ** len(str(peak // 5))


@dataclass
class Threshold:
    x: float
    value: float
    name: str
    dash: str


@dataclass
class ScoreRow:
    number: int
    y: float
    bars: list[Rect]
    marker: float  # x of the cosine value (clamped to the scale)
    standing: bool
    decision: str
    unscored: bool  # a standing memory found by its tag alone: no score to draw


@dataclass
class ScoreChart:
    """Every candidate's meaning (cosine), keyword (BM25 saturated to 0..1) and ranking
    scores on one 0..1 axis, with the relevance thresholds (cosine) drawn across."""

    width: int
    height: int
    rows: list[ScoreRow]
    thresholds: list[Threshold]
    ticks: list[tuple[float, str]]
    plot: tuple[float, float, float, float]


SCORE_COLOURS = {"vector": "#1565c0", "text_norm": "#ef6c00", "fused": "#455a64"}


def score_chart(candidates: list[dict[str, Any]], policy: Policy) -> ScoreChart:
    width = 640
    left, right, top = 40.0, width - 12.0, 34.0
    row_h = 30.0
    height = int(top + row_h * max(len(candidates), 1) + 24)
    bottom = height - 20.0

    def x_of(value: float) -> float:
        return left + (right - left) * min(max(value, 0.0), 1.0)

    bar = policy.recall.relevance
    thresholds = [
        Threshold(x_of(bar.similarity), bar.similarity, "similarity", ""),
        Threshold(
            x_of(bar.shared_terms_min_similarity),
            bar.shared_terms_min_similarity,
            "shared_terms_min_similarity",
            "4 3",
        ),
    ]
    if bar.topic_min_similarity > 0:
        thresholds.append(
            Threshold(
                x_of(bar.topic_min_similarity),
                bar.topic_min_similarity,
                "topic_min_similarity",
                "1 3",
            )
        )
    rows: list[ScoreRow] = []
    for i, cand in enumerate(candidates):
        scores = cand.get("scores") or {}
        y = top + i * row_h
        bars = []
        for j, name in enumerate(("vector", "text_norm", "fused")):
            value = float(scores.get(name) or 0.0)
            title = f"#{i + 1} {name} {value:.3f}"
            if name == "text_norm":
                title += f" (BM25 {float(scores.get('text') or 0.0):.2f})"
            bars.append(
                Rect(left, y + 4 + j * 7, x_of(value) - left, 6, SCORE_COLOURS[name], title)
            )
        rows.append(
            ScoreRow(
                i + 1,
                y,
                bars,
                x_of(float(scores.get("vector") or 0.0)),
                cand.get("lane") == "standing",
                str(cand.get("decision") or ""),
                cand.get("lane") == "standing" and not any(b.w > 0 for b in bars),
            )
        )
    ticks = [(x_of(v / 4), f"{v / 4:g}") for v in range(5)]
    return ScoreChart(width, height, rows, thresholds, ticks, (left, top, right, bottom))
