"""The acceptance timeline of one request: an altair chart whose brush chooses the step rows shown.

One bar per engine step (x = step number, 1-based): accepted drafts in green from 0 up, the drafts
that were not accepted (the first rejected one and the discarded tail) stacked above them in red,
a grey stub for a step without drafts, and a violet cap on a step whose drafts were all accepted
(it gained a bonus token). Dragging across the chart makes an interval selection on x named
`steps` (BRUSH); a page passes the chart to `st.altair_chart(chart, on_select="rerun", key=...)`
and hands the returned event to `selected_steps`:

    event = st.altair_chart(acceptance_timeline(req), on_select="rerun", key="step_timeline_r0")
    first, last = selected_steps(event, len(req.steps))   # e.g. a brush over x 3.6..7.2 -> (4, 7)

Steps are numbered from 1 and a step's bar spans step - 0.4 .. step + 0.4. Vega-Lite tests a brush
on the x field, the bar's left edge, so a step is chosen (and drawn opaque) when the left edge of its
bar lies inside the brush. Without a brush the first DEFAULT_STEPS steps are chosen.
Pure: no Streamlit here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import altair as alt
import pandas as pd

from ..runfile import Request

BRUSH = "steps"  # the name of the interval selection; the event's selection is keyed by it
DEFAULT_STEPS = 60  # rows shown before anything is brushed
HALF_WIDTH = 0.4  # half the width of a step's bar, in steps

PARTS = ["accepted drafts", "rejected + discarded drafts", "all accepted: bonus token", "no drafts"]
COLOURS = ["#4caf50", "#e06666", "#8e6fd8", "#b0b0b0"]  # the chips' roles: accepted, rejected, bonus, plain


def timeline_table(req: Request) -> pd.DataFrame:
    """Long form: one row per drawn segment, with the step's figures for the tooltip."""
    rows = []
    for i, s in enumerate(req.steps, start=1):
        base = dict(step=i, start=i - HALF_WIDTH, end=i + HALF_WIDTH, drafts=s.num_drafts,
                    accepted=s.num_accepted, committed=len(s.committed_token_ids))
        if not s.num_drafts:
            rows.append(base | dict(part="no drafts", y0=0.0, y1=0.12))
            continue
        if s.num_accepted:
            rows.append(base | dict(part="accepted drafts", y0=0.0, y1=float(s.num_accepted)))
        if s.num_accepted < s.num_drafts:
            rows.append(base | dict(part="rejected + discarded drafts", y0=float(s.num_accepted),
                                    y1=float(s.num_drafts)))
        elif s.all_accepted:
            rows.append(base | dict(part="all accepted: bonus token", y0=float(s.num_drafts),
                                    y1=s.num_drafts + 0.25))
    columns = ["step", "start", "end", "drafts", "accepted", "committed", "part", "y0", "y1"]
    return pd.DataFrame(rows, columns=columns)


def acceptance_timeline(req: Request, *, height: int = 320) -> alt.Chart:
    """The chart (see the module docstring); brushed steps stay opaque, the others fade.

    `height` is the whole chart's (Streamlit fits the spec to it): title, legend and axis included.
    """
    data = timeline_table(req)
    n = max(len(req.steps), 1)
    k = int(max(data["y1"].max() if len(data) else 1.0, 1.0) + 0.5)
    brush = alt.selection_interval(name=BRUSH, encodings=["x"], empty=True)
    x = alt.X("start:Q", title="engine step (drag across the chart to choose the step rows below)",
              scale=alt.Scale(domain=[0.5, n + 0.5], nice=False, zero=False),
              axis=alt.Axis(tickMinStep=1, format="d", labelFontSize=13, titleFontSize=14))
    return alt.Chart(data, height=height).mark_rect().encode(
        x=x, x2="end:Q",
        y=alt.Y("y0:Q", title="drafts", scale=alt.Scale(domain=[0, k]),
                axis=alt.Axis(tickMinStep=1, format="d", labelFontSize=13, titleFontSize=14)),
        y2="y1:Q",
        color=alt.Color("part:N", scale=alt.Scale(domain=PARTS, range=COLOURS),
                        legend=alt.Legend(title=None, orient="top", labelFontSize=13, symbolType="square")),
        opacity=alt.condition(brush, alt.value(1.0), alt.value(0.25)),
        tooltip=[alt.Tooltip("step:Q", title="step"), alt.Tooltip("drafts:Q", title="drafts verified"),
                 alt.Tooltip("accepted:Q", title="accepted"),
                 alt.Tooltip("committed:Q", title="tokens committed")],
    ).add_params(brush).properties(
        title=alt.Title("Accepted drafts per step", fontSize=16, anchor="start"),
    )


def selected_steps(event: Mapping | None, n: int, default: int = DEFAULT_STEPS) -> tuple[int, int]:
    """(first, last) step numbers (1-based, inclusive) chosen by the brush in a chart event.

    `event` is what `st.altair_chart(..., on_select="rerun")` returned: {"selection": {"steps":
    {"start": [lo, hi]}}} while a brush is drawn, {"selection": {"steps": {}}} when it is cleared.
    A step is chosen when the left edge of its bar (step - HALF_WIDTH) lies in [lo, hi], as the chart
    highlights it; no brush, or one over no bar's edge, gives steps 1 .. min(n, default).
    """
    fallback = (1, max(1, min(n, default)))
    if n < 1:
        return (1, 1)
    try:
        interval = dict(event["selection"][BRUSH])  # type: ignore[index]
    except (KeyError, TypeError):
        return fallback
    values = next(iter(interval.values()), None) if interval else None
    if not values or len(values) != 2:
        return fallback
    try:
        lo, hi = sorted(float(v) for v in values)
    except (TypeError, ValueError):
        return fallback
    first = max(1, math.ceil(lo + HALF_WIDTH))
    last = min(n, math.floor(hi + HALF_WIDTH))
    return (first, last) if first <= last else fallback
