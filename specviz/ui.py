"""The Streamlit edge: drawing helpers shared by the pages. The only specviz module that imports streamlit."""

from __future__ import annotations

import uuid

import pandas as pd
import streamlit as st

from . import charts, render
from .metrics import Summary, count_acceptance, request_acceptance_length
from .trace import Request, Run


def provenance(run: Run) -> str:
    m = run.meta
    spec = f"{m.method} k={m.num_speculative_tokens}" if m.method else "no speculation (baseline)"
    return (f"{spec} · concurrency {m.concurrency} · prompt set '{m.prompt_set}' · max {m.max_tokens} tokens · "
            f"{m.platform} ({m.device_name}) · vLLM {m.vllm_version} · {m.target_model.rstrip('/').split('/')[-1]}")


def session_id() -> str:
    return st.session_state.setdefault("session_id", uuid.uuid4().hex[:8])


def _fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def metrics_row(s: Summary, container=st) -> None:
    cols = container.columns(5)
    cols[0].metric("engine steps", s.num_steps)
    cols[1].metric("mean acceptance length", _fmt(s.mean_acceptance_length, "{:.2f}"),
                   help="tokens committed per target pass when drafts were verified: 1 + accepted / drafts")
    cols[2].metric("draft acceptance rate", _fmt(s.draft_acceptance_rate, "{:.0%}"))
    cols[3].metric("output tokens/s", _fmt(s.output_tokens_per_s, "{:.1f}"),
                   help="all output tokens / wall time from the first request sent to the last one finished")
    cols[4].metric("matches vLLM's counters", {True: "yes", False: "NO", None: "–"}[s.counters_match])


def request_view(req: Request, caption: str, *, steps: slice | None = None, chart_key: str = "acc_per_pos",
                 container=st) -> None:
    """Legend, the output coloured by origin, acceptance per position, and the step rows."""
    container.markdown(render.CSS + render.legend_html(), unsafe_allow_html=True)
    left, right = container.columns([3, 2])
    left.markdown("**Output, coloured by where each token came from**")
    left.markdown(render.output_html(req), unsafe_allow_html=True)
    acc = count_acceptance(req.steps)
    if acc.num_drafts:
        right.plotly_chart(charts.acceptance_per_position(acc, caption), key=chart_key, width="stretch")
    if not req.steps:
        container.info("No per-step records (the server ran without the specviz tracer).")
        return
    shown = req.steps[steps] if steps else req.steps
    start = (steps.start or 0) if steps else 0
    if start < 0:
        start = max(len(req.steps) + start, 0)
    container.markdown("**Verification steps**")
    container.markdown(render.CSS + render.steps_html(shown, start=start), unsafe_allow_html=True)


def per_request_table(run: Run, key: str) -> None:
    st.dataframe(pd.DataFrame({
        "request": [r.request_id for r in run.requests],
        "output tokens": [len(r.output_token_ids) for r in run.requests],
        "steps": [len(r.steps) for r in run.requests],
        "acceptance length": [request_acceptance_length(r) for r in run.requests],
        "finish": [r.finish_reason for r in run.requests],
    }), key=key, hide_index=True)

