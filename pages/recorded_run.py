"""Recorded run: open a run file and walk through its verification steps."""

import streamlit as st

from specviz import render, ui
from specviz.metrics import summarize
from specviz.trace import RunFileError, list_run_files, load_run


@st.cache_data(show_spinner=False)
def _load(data: bytes):
    return load_run(data)


def _shown_prompt(req) -> str:
    text = (req.user_message or req.prompt).strip().replace("\n", " ")
    return text[:80] + ("…" if len(text) > 80 else "")


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

caption = ui.provenance(run)
st.caption(caption)
if not run.meta.complete:
    st.warning(f"Incomplete run: {run.meta.incomplete_reason}")
ui.metrics_row(summarize(run))

request_ids = [r.request_id for r in run.requests]
rid = st.selectbox("Request", request_ids, key="request_id",
                   format_func=lambda r: f"{r}: {_shown_prompt(run.requests[request_ids.index(r)])}")
req = run.requests[request_ids.index(rid)]

n = len(req.steps)
step_through = n > 0 and st.toggle("Step through (presenter mode)", key="step_through")
if step_through:
    at = st.session_state.setdefault("step_at", 1)
    prev, slider, nxt = st.columns([1, 8, 1])
    if prev.button("◀ previous", key="step_prev", disabled=at <= 1):
        st.session_state.step_at = at - 1
    if nxt.button("next ▶", key="step_next", disabled=at >= n):
        st.session_state.step_at = at + 1
    st.session_state.step_at = min(max(st.session_state.step_at, 1), n)
    at = slider.slider("step", 1, n, key="step_at")
    step = req.steps[at - 1]
    st.markdown(render.CSS, unsafe_allow_html=True)
    st.markdown(f"##### Step {at} of {n}: {render.step_summary(step)}")
    st.markdown(f'<div style="font-size:1.6em">{render.step_html(step)}</div>', unsafe_allow_html=True)
    so_far = req.model_copy(update={"steps": req.steps[:at]})
    st.markdown("**Output so far**")
    st.markdown(render.output_html(so_far), unsafe_allow_html=True)
    st.markdown(render.legend_html(), unsafe_allow_html=True)
else:
    shown = st.slider("Steps shown", 1, n, (1, min(n, 60)), key="step_range") if n > 1 else (1, 1)
    ui.request_view(req, caption, steps=slice(shown[0] - 1, shown[1]))

if len(run.requests) > 1:
    st.subheader("Per request")
    ui.per_request_table(run, key="per_request")
