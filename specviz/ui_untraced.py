"""The Streamlit edge of the tracer-free step view: vLLM's per-step arrays placed on the stream.

    untraced_request_view(req, caption, timeline_key="step_timeline_r0")   # a request recorded without the tracer
    step_view_note(views)                                                   # Playground, attached server

The figures come from `untraced_steps` (pure); this module only draws them.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from .charts import timeline
from .charts.acceptance import acceptance_per_position
from .runfile import Request
from .serving.attached import STEP_ARRAYS_FLAG, STEP_ARRAYS_VIEW, TRACER_VIEW, View
from .untraced_steps import UntracedSteps, arrays_acceptance, place_steps
from .view import render

PLACEMENT_HEADLINE = {
    "exact": "Token placement: **exact**",
    "approximate": "Token placement: **approximate** (steps marked ≈)",
    "unaligned": "Token placement: **not possible**",
}


def untraced_request_view(req: Request, caption: str, *, container=st, chart_key: str = "acc_per_pos",
                          timeline_key: str | None = None, steps: slice | None = None,
                          method: str | None = None, marks: dict[int, str] | None = None) -> None:
    """A request recorded without the tracer but with vLLM's per-step arrays: output, acceptance, timeline, steps.

    The counts per verify step are vLLM's own and exact; where each step's tokens sit in the output
    is exact or approximate as `place_steps` says, and the rejected drafts are counts without text.
    With `timeline_key` the timeline's brush chooses the rows; else `steps` slices them. `method` (the
    run's drafting method) lets a model drafter's steps be placed more surely (place_steps). `marks`
    outlines output tokens by index (where the output parts from its baseline's), as ui.request_view.
    """
    m = req.spec_decode_metrics
    placed = place_steps(req, k=m.num_spec_tokens, method=method)
    container.markdown(render.CSS + render.untraced_legend_html(), unsafe_allow_html=True)
    left, right = container.columns([3, 2])
    left.markdown("**Output, coloured by where each token came from** (from vLLM's per-step counts; no tracer)")
    left.markdown(render.untraced_output_html(placed.steps[:render.OUTPUT_TOKENS_SHOWN], marks) if placed.steps else
                  render.chunks_html(req.stream_chunks[:render.OUTPUT_TOKENS_SHOWN]), unsafe_allow_html=True)
    if end := render.output_end(req):
        left.caption(end)
    acc = arrays_acceptance(m, k=m.num_spec_tokens)
    if acc.num_drafts:
        right.plotly_chart(acceptance_per_position(acc, caption), key=chart_key, width="stretch")
    placement_note(placed, container)
    if not placed.num_verify_steps:
        container.info("vLLM verified no drafts for this request.")
        return
    shown, start = placed.steps, 0
    if timeline_key is not None and placed.num_verify_steps > 1:
        first, last = arrays_timeline(placed, timeline_key, container)
        shown, start = rows_between(placed, first, last)
    elif steps is not None:
        rows = range(len(placed.steps))[steps]
        shown, start = placed.steps[steps], (rows[0] if rows else 0)
    if len(shown) > render.STEP_ROWS_SHOWN:
        container.caption(f"Showing the first {render.STEP_ROWS_SHOWN} of the {len(shown):,} step rows chosen: narrow "
                          "the choice on the timeline to see the others.")
        shown = shown[:render.STEP_ROWS_SHOWN]
    if shown:
        container.markdown("**Verification steps** (rejected drafts are counted by vLLM; their text needs the tracer)")
        container.markdown(render.CSS + render.untraced_steps_html(shown, start=start), unsafe_allow_html=True)


def placement_note(placed: UntracedSteps, container=st) -> None:
    """Says how sure the token placement is, and why."""
    text = (f"{PLACEMENT_HEADLINE[placed.placement]}: {placed.num_exact_verify_steps} of {placed.num_verify_steps} "
            f"verify steps placed exactly: {placed.why}.")
    (container.success if placed.placement == "exact" else container.info)(text)


def arrays_timeline(placed: UntracedSteps, key: str, container=st) -> tuple[int, int]:
    """The altair timeline from the arrays alone; returns the (first, last) verify step its brush chose, 1-based."""
    n = placed.num_verify_steps
    event = container.altair_chart(timeline.arrays_timeline(placed.per_step_accepted, placed.per_step_drafted),
                                   on_select="rerun", selection_mode=timeline.BRUSH, key=key, width="stretch")
    first, last = timeline.selected_steps(event, n)
    brushed = (first, last) != timeline.selected_steps(None, n)
    container.caption(f"Verify steps {first}–{last} of {n}" + (
        " (chosen on the timeline; double-click it to clear)" if brushed else
        ": drag across the timeline to choose others. Steps that drafted nothing are not in vLLM's arrays, "
        "so they are not on the timeline; the rows below show them between the verify steps."))
    return first, last


def rows_between(placed: UntracedSteps, first: int, last: int) -> tuple[list, int]:
    """(the step rows from verify step `first` to `last`, 1-based, with the steps without drafts among them; index
    of the first row). Steps without drafts before the first verify step are shown when it is the first one."""
    rows = [i for i, s in enumerate(placed.steps) if s.verify_index is not None and first - 1 <= s.verify_index < last]
    if not rows:
        return [], 0
    begin = 0 if first == 1 else rows[0]
    end = rows[-1] + 1
    if last == placed.num_verify_steps:
        end = len(placed.steps)
    return placed.steps[begin:end], begin


def step_view_note(views: Sequence[View], container=st) -> None:
    """For an attached server: which step view it allows, and the one flag it needs when it allows none."""
    available = {v.name: v.available for v in views}
    if available.get(TRACER_VIEW):
        container.success("This server allows the full step view: the specviz tracer records every draft's text.")
    elif available.get(STEP_ARRAYS_VIEW):
        container.success("This server allows the step view without the tracer: vLLM's per-step accepted and drafted "
                          "counts, placed on the streamed tokens (rejected drafts are counted, not shown as text).")
    elif available.get(STEP_ARRAYS_VIEW) is None:
        container.info(f"Generate once to learn whether this server sends per-step counts: the step view without "
                       f"the tracer needs it started with `{STEP_ARRAYS_FLAG}`.")
    else:
        container.warning(f"This server sends no per-step counts, so there is no step view. Add one flag to the "
                          f"server as it runs in production: `{STEP_ARRAYS_FLAG}` (vLLM 0.32 or newer).")
