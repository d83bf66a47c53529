"""Recorded run: open a run file and walk through its verification steps."""

import pandas as pd
import streamlit as st

from specviz import charts, render
from specviz.metrics import request_acceptance_length, run_acceptance, summarize
from specviz.trace import RunFileError, list_run_files, load_run


@st.cache_data(show_spinner=False)
def _load(data: bytes):
    return load_run(data)


def provenance(run) -> str:
    m = run.meta
    spec = f"{m.method} k={m.num_speculative_tokens}" if m.method else "no speculation (baseline)"
    return (f"{spec} · concurrency {m.concurrency} · prompt set '{m.prompt_set}' · max {m.max_tokens} tokens · "
            f"{m.platform} ({m.device_name}) · vLLM {m.vllm_version} · {m.target_model.split('/')[-1]}")


files = list_run_files()
with st.sidebar:
    st.subheader("Run source")
    names = [p.name for p in files]
    choice = st.selectbox("Recorded run (sample_runs/)", names, key="run_file") if names else None
    upload = st.file_uploader("…or open a run file", type=["json", "gz"], key="run_upload")

st.title("Recorded run")
if upload is None and choice is None:
    st.info("No run files in sample_runs/. Record one with `python -m specviz record ...` or upload one.")
    st.stop()
try:
    run = _load(upload.getvalue() if upload is not None else files[names.index(choice)].read_bytes())
except RunFileError as e:
    st.error(f"This file cannot be opened: {e}")
    st.stop()

st.caption(provenance(run))
if not run.meta.complete:
    st.warning(f"Incomplete run: {run.meta.incomplete_reason}")
s = summarize(run)
acc = run_acceptance(run)
cols = st.columns(5)
cols[0].metric("engine steps (all requests)", s.num_steps)
cols[1].metric("tokens per step (mean acceptance length)",
               f"{s.mean_acceptance_length:.2f}" if s.mean_acceptance_length else "–")
cols[2].metric("draft acceptance rate", f"{s.draft_acceptance_rate:.0%}" if s.draft_acceptance_rate is not None else "–")
cols[3].metric("output tokens/s (all requests)", f"{s.output_tokens_per_s:.1f}" if s.output_tokens_per_s else "–")
cols[4].metric("matches vLLM's counters", {True: "yes", False: "NO", None: "–"}[s.counters_match])

request_ids = [r.request_id for r in run.requests]
rid = st.selectbox("Request", request_ids, key="request_id",
                   format_func=lambda r: f"{r}: {run.requests[request_ids.index(r)].prompt[-60:]!r}")
req = run.requests[request_ids.index(rid)]

st.markdown(render.CSS, unsafe_allow_html=True)
st.markdown(render.legend_html(), unsafe_allow_html=True)
left, right = st.columns([3, 2])
with left:
    st.subheader("Output, by where each token came from")
    st.markdown(render.output_html(req), unsafe_allow_html=True)
with right:
    if acc.num_drafts:
        st.plotly_chart(charts.acceptance_per_position(acc, provenance(run)), key="acc_per_pos", width="stretch")

st.subheader("Verification steps")
if not req.steps:
    st.info("This run was recorded without the specviz tracer: no per-step records.")
else:
    n = len(req.steps)
    shown = st.slider("Steps shown", 1, n, (1, min(n, 60)), key="step_range") if n > 1 else (1, 1)
    st.markdown(render.steps_html(req.steps[shown[0] - 1: shown[1]], start=shown[0] - 1), unsafe_allow_html=True)

if len(run.requests) > 1:
    st.subheader("Per request")
    st.dataframe(pd.DataFrame({
        "request": request_ids,
        "output tokens": [len(r.output_token_ids) for r in run.requests],
        "steps": [len(r.steps) for r in run.requests],
        "acceptance length": [request_acceptance_length(r) for r in run.requests],
        "finish": [r.finish_reason for r in run.requests],
    }), key="per_request", hide_index=True)
