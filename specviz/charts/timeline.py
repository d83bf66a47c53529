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


def timeline_table(req: Request, first: int = 1, last: int | None = None) -> pd.DataFrame:
    """Long form: one row per drawn segment, with the step's figures for the tooltip; steps first..last (1-based)."""
    return _table([(s.num_drafts, s.num_accepted, len(s.committed_token_ids), s.all_accepted)
                   for s in req.steps[first - 1:last]], first=first)


def arrays_timeline_table(accepted: list[int], drafted: list[int]) -> pd.DataFrame:
    """timeline_table from vLLM's per-step arrays alone (one bar per verify step; steps without drafts are not in them).

    accepted [2, 3, 0], drafted [3, 3, 3] -> step 1: 2 green + 1 red; step 2: 3 green + a bonus cap;
    step 3: 3 red. Tokens committed = accepted + 1 (the last step of a stopped request may have fewer).
    """
    return _table([(d, a, a + 1, d > 0 and a == d) for a, d in zip(accepted, drafted)])


def _table(steps: list[tuple[int, int, int, bool]], first: int = 1) -> pd.DataFrame:
    """Rows for (drafts, accepted, committed, all accepted) per step, numbered from `first`."""
    rows = []
    for i, (drafts, accepted, committed, all_accepted) in enumerate(steps, start=first):
        base = dict(step=i, start=i - HALF_WIDTH, end=i + HALF_WIDTH, drafts=drafts,
                    accepted=accepted, committed=committed)
        if not drafts:
            rows.append(base | dict(part="no drafts", y0=0.0, y1=0.12))
            continue
        if accepted:
            rows.append(base | dict(part="accepted drafts", y0=0.0, y1=float(accepted)))
        if accepted < drafts:
            rows.append(base | dict(part="rejected + discarded drafts", y0=float(accepted), y1=float(drafts)))
        elif all_accepted:
            rows.append(base | dict(part="all accepted: bonus token", y0=float(drafts), y1=drafts + 0.25))
    columns = ["step", "start", "end", "drafts", "accepted", "committed", "part", "y0", "y1"]
    return pd.DataFrame(rows, columns=columns)


def acceptance_timeline(req: Request, *, height: int = 320, first: int = 1, last: int | None = None) -> alt.Chart:
    """The chart (see the module docstring); brushed steps stay opaque, the others fade.

    `height` is the whole chart's (Streamlit fits the spec to it): title, legend and axis included.
    `first`..`last` (1-based, inclusive; default all) draws a window of a long request's steps, numbered as in it.
    """
    last = len(req.steps) if last is None else min(last, len(req.steps))
    return _chart(timeline_table(req, first, last), last, height=height, first=first,
                  x_title="engine step (drag across the chart to choose the step rows below)")


def arrays_timeline(accepted: list[int], drafted: list[int], *, height: int = 320) -> alt.Chart:
    """acceptance_timeline drawn from vLLM's per-step arrays (no tracer): x is the request's verify step."""
    return _chart(arrays_timeline_table(accepted, drafted), len(accepted), height=height,
                  x_title="verify step, from vLLM's per-step arrays (drag to choose the step rows below)",
                  title="Accepted drafts per verify step (vLLM's own per-step counts)")


def _chart(data: pd.DataFrame, n_steps: int, *, height: int, x_title: str,
           title: str = "Accepted drafts per step", first: int = 1) -> alt.Chart:
    n = max(n_steps, first)
    k = int(max(data["y1"].max() if len(data) else 1.0, 1.0) + 0.5)
    brush = alt.selection_interval(name=BRUSH, encodings=["x"], empty=True)
    x = alt.X("start:Q", title=x_title,
              scale=alt.Scale(domain=[first - 0.5, n + 0.5], nice=False, zero=False),
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
        title=alt.Title(title, fontSize=16, anchor="start"),
    )


def selected_steps(event: Mapping | None, n: int, default: int = DEFAULT_STEPS, first_step: int = 1) -> tuple[int, int]:
    """(first, last) step numbers (1-based, inclusive) chosen by the brush in a chart event.

    `event` is what `st.altair_chart(..., on_select="rerun")` returned: {"selection": {"steps":
    {"start": [lo, hi]}}} while a brush is drawn, {"selection": {"steps": {}}} when it is cleared.
    A step is chosen when the left edge of its bar (step - HALF_WIDTH) lies in [lo, hi], as the chart
    highlights it; no brush, or one over no bar's edge, gives steps 1 .. min(n, default).
    """
    fallback = (first_step, max(first_step, min(n, first_step + default - 1)))
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
    first = max(first_step, math.ceil(lo + HALF_WIDTH))
    last = min(n, math.floor(hi + HALF_WIDTH))
    return (first, last) if first <= last else fallback
