"""Playground: watch the target verify drafts, step by step: a recorded run, a local engine, or a server at a URL."""

import streamlit as st

from specviz import ui, ui_race, ui_textbook, ui_untraced
from specviz.catalog import LOOKUP_MAX, LOOKUP_MIN
from specviz.config import NO_DRAFTING, ConfigError, SpecConfig
from specviz.demo_model import DemoModelError, demo_mimo_model_dir, demo_model_dir, ensure_demo_mimo_model
from specviz.metrics import summarize
from specviz.playground import (
    DEFAULT_DTYPE,
    DTYPES,
    PLAYGROUND_METHODS,
    engine_dtype,
    last_run_from,
    sample_runs,
    shown_run_name,
    spec_from_choices,
    target_for_method,
    verify_table,
    views_table,
    with_run,
)
from specviz.runfile import RunFileError, run_bytes
from specviz.serving.attached import AttachedServer, AttachError, attach
from specviz.serving.live import LiveGeneration
from specviz.serving.shared import EngineConfig
from specviz.serving.verify_client import verify_draft
from specviz.verify import VerifyError
from specviz.view import render
from specviz.viewer import viewer_mode

RECORDED, LOCAL, ATTACHED = "Recorded run", "Local engine (specviz starts it)", "vLLM server at a URL"


def init_state() -> None:
    for key, value in {
        "pg_model": str(demo_model_dir()), "pg_method": "ngram", "pg_k": 3, "pg_lookup_min": 2,
        "pg_lookup_max": 4, "pg_draft_model": "", "pg_prompt": "The weather today is", "pg_max_tokens": 64,
        "pg_temperature": 0.0, "pg_gen": None, "pg_runs": [], "pg_source": RECORDED,
        "pg_url": "http://127.0.0.1:8000", "pg_dtype": DEFAULT_DTYPE, "pg_trace_file": "", "pg_attach_spec": "", "pg_attached": None,
    }.items():
        st.session_state.setdefault(key, value)


def spec_from_controls() -> SpecConfig | None:
    s = st.session_state
    return spec_from_choices(s.pg_method, s.pg_k, s.pg_lookup_min, s.pg_lookup_max, s.pg_draft_model)


def on_method_change() -> None:
    """Native MTP on the demo model: switch the target to its MiMo form (the same weights plus an MTP layer)."""
    st.session_state.pg_model = target_for_method(st.session_state.pg_method, st.session_state.pg_model)


def start_generation() -> None:
    if st.session_state.pg_model == str(demo_mimo_model_dir()):
        try:
            ensure_demo_mimo_model(progress=lambda message: None)  # seconds, from the Llama folder
        except DemoModelError as e:
            st.error(str(e))
            return
    try:
        config = EngineConfig(model=st.session_state.pg_model, spec=spec_from_controls(),
                              dtype=engine_dtype(st.session_state.pg_dtype))
    except ConfigError as e:
        st.error(str(e))
        return
    server = ui.start_engine(ui.shared_engine(), config)
    if server is None:
        return
    st.session_state.pg_gen = LiveGeneration(
        server, st.session_state.pg_prompt, max_tokens=st.session_state.pg_max_tokens,
        temperature=st.session_state.pg_temperature, tokenizer=ui.cached_tokenizer(config.model)).start()


def draw(run, done: bool, area, tick: int) -> None:
    with area.container():
        ui.metrics_row(summarize(run))
        marks = ui_race.versus_live_baseline(run, st.session_state.pg_runs) if done else None
        # While it runs the rows follow the last 40 steps; once it ended, the timeline chooses them, as for a recording.
        ui.request_view(run.requests[0], ui.run_caption(run), steps=slice(-40, None), chart_key=f"pg_acc_{tick}",
                        marks=marks, batches=ui.step_batches(run, run.requests[0]),
                        timeline_key="pg_timeline" if done else None)


def recorded_source() -> None:
    paths = sample_runs()
    with st.sidebar:
        names = list(paths)
        if names and st.session_state.get("run_file") not in names:  # open on the best speculative run
            st.session_state.run_file = ui_race.opening_run_name() or names[0]
        choice = st.selectbox("Recorded run (sample_runs/)", names, key="run_file", format_func=shown_run_name,
                              help="the run files in sample_runs/, by folder; the middle of a long name is left "
                                   "out so its end stays visible") if names else None
        upload = st.file_uploader("…or open a run file", type=["json", "gz"], key="run_upload")
    if upload is None and choice is None:
        st.info("No run files in sample_runs/. Record one with `python -m specviz record ...` or upload one.")
        return
    try:
        run = ui.run_from_bytes(upload.getvalue() if upload is not None else paths[choice].read_bytes())
    except RunFileError as e:
        st.error(f"This file cannot be opened: {e}")
        return
    ui_race.recorded_run_with_race(run, None if upload is not None else choice)
    ui_textbook.formula_expander(run)


def local_engine_controls():
    """The engine controls in the sidebar; returns the slot for the engine's status (engine_status), which is
    filled once this rerun has started the engine or not."""
    with st.sidebar:
        st.text_input("Target model folder", key="pg_model",
                      help="a Hugging Face model folder on this machine, served by vLLM as the target")
        st.selectbox("Drafting method", PLAYGROUND_METHODS, key="pg_method", on_change=on_method_change,
                     format_func=lambda m: NO_DRAFTING if m == "none" else m,
                     help="how drafts are proposed (the Methods page describes each); no drafting is the baseline")
        if st.session_state.pg_method == "mtp":
            st.caption("Native MTP drafts with MTP layers inside the target. The demo model's MiMo form has one, "
                       "UNTRAINED (random): output stays the target's, drafts are mostly rejected.")
        if st.session_state.pg_method != "none":
            st.slider("num_speculative_tokens (k)", 1, 8, key="pg_k",
                      help="drafts proposed per step; the target verifies them all in one pass")
        if st.session_state.pg_method == "ngram":
            st.number_input("prompt_lookup_min", 1, 8, key="pg_lookup_min", help=LOOKUP_MIN.meaning)
            st.number_input("prompt_lookup_max", 1, 8, key="pg_lookup_max", help=LOOKUP_MAX.meaning)
        elif st.session_state.pg_method in ("draft_model", "eagle", "eagle3"):
            st.text_input("Draft model folder", key="pg_draft_model",
                          help="the drafter's folder: a small model with the target's tokenizer (draft_model) or an "
                               "EAGLE head trained for this target")
        st.selectbox("Target dtype", DTYPES, key="pg_dtype",
                     help="specviz serves the demo model in float32, where greedy output with drafting is "
                          "identical to the target alone; in bfloat16 near-tied candidates can round the other "
                          "way when k+1 tokens are verified in one pass (the Methods page, 'Is it lossless?')")
        return st.empty()


def engine_status(slot) -> None:
    running = ui.shared_engine().running()
    slot.caption(f"Running: {running.describe()}" if running else "No engine running.")


def attached_controls() -> AttachedServer | None:
    with st.sidebar:
        st.text_input("Server URL", key="pg_url", help="a running vLLM OpenAI-compatible server, e.g. a ROCm box")
        st.text_input("Tracer file (optional)", key="pg_trace_file",
                      help="the SPECVIZ_TRACE_FILE of a server on this machine started with the specviz tracer")
        st.text_input("Its speculative config (optional JSON)", key="pg_attach_spec",
                      help='as the server was started, e.g. {"method": "eagle3", "num_speculative_tokens": 3, ...}')
        if st.button("Connect", key="pg_connect"):
            try:
                spec = SpecConfig.parse(st.session_state.pg_attach_spec)
                st.session_state.pg_attached = attach(st.session_state.pg_url, spec=spec,
                                                      trace_file=st.session_state.pg_trace_file or None)
            except (AttachError, ConfigError) as e:
                st.session_state.pg_attached = None
                st.error(str(e))
    server: AttachedServer | None = st.session_state.pg_attached
    if server is None:
        st.info("Give the URL of a running vLLM server and press Connect (in the sidebar).")
        return None
    st.markdown(f"**Attached to {server.url}**: serving `{server.model}` with vLLM {server.vllm_version}")
    views = server.views(last_run_from(server.url, st.session_state.pg_runs))
    st.dataframe(views_table(views), key="pg_views", hide_index=True)
    ui_untraced.step_view_note(views)
    return server


def start_attached_generation(server: AttachedServer) -> None:
    if not server.alive():
        st.error(f"{server.url} does not answer /health any more. Is the server still running?")
        return
    try:  # the server's /tokenize applies the chat template when its model is not on this machine
        st.session_state.pg_gen = LiveGeneration(
            server, st.session_state.pg_prompt, max_tokens=st.session_state.pg_max_tokens,
            temperature=st.session_state.pg_temperature, tokenizer=server.tokenizer()).start()
    except AttachError as e:
        st.error(str(e))


init_state()
st.title("Playground")
st.caption("Watch each verification step of speculative decoding in vLLM: drafts accepted, the target's correction, "
           "the discarded tail, bonus tokens. " + ("Open a recorded run." if viewer_mode() else
                                                   "Open a recorded run, start a local engine, or attach to a server."))

if viewer_mode():  # no engine, no server, no server-side path typed in the browser
    source = RECORDED
else:
    with st.sidebar:
        st.subheader("Runs come from")
        source = st.radio("Runs come from", [RECORDED, LOCAL, ATTACHED], key="pg_source",
                          label_visibility="collapsed")

if source == RECORDED:
    recorded_source()
    st.stop()

attached = status_slot = None
if source == LOCAL:
    status_slot = local_engine_controls()
else:
    attached = attached_controls()
    if attached is None:
        st.stop()

st.text_area("Prompt", key="pg_prompt", height=80)
c1, c2, c3, c4, c6, c5 = st.columns([2, 2, 1, 1, 1, 2])
c1.number_input("max tokens", 1, 2048, key="pg_max_tokens", help="output tokens to generate at most")
c2.slider("temperature", 0.0, 1.5, key="pg_temperature", step=0.1,
          help="0 is greedy: the output is then the target's own, token for token; above 0 the same distribution")
start = c3.button("Generate", key="pg_start", type="primary")
# In local-engine mode Stop has nothing to stop until an engine runs (or this press of Generate starts one)
no_engine = source == LOCAL and not start and ui.shared_engine().running() is None
stop = c4.button("Stop", key="pg_stop", disabled=no_engine,
                 help="No engine is running: Generate starts one." if no_engine else "Stop the generation; what it "
                      "generated so far stays.")
race = source == LOCAL and ui_race.live_race_button(
    c6, "Choose a drafting method to race against the baseline" if st.session_state.pg_method == "none" else None,
    lambda: st.session_state.update(pg_live_view="race"))
if start:
    st.session_state.pg_live_view = "generate"

gen: LiveGeneration | None = st.session_state.pg_gen
if stop and gen is not None:
    gen.stop()
if start:
    if gen is not None:
        gen.stop()
    if attached is not None:
        start_attached_generation(attached)
    else:
        start_generation()
    gen = st.session_state.pg_gen

if race:
    try:
        spec = spec_from_controls()
    except ConfigError as e:
        st.error(str(e))
    else:
        if gen is not None:
            gen.stop()
        st.session_state[ui_race.LIVE_RACE] = ui_race.run_live_race(
            ui.shared_engine(), st.session_state.pg_model, spec, st.session_state.pg_prompt,
            dtype=engine_dtype(st.session_state.pg_dtype), max_tokens=st.session_state.pg_max_tokens,
            temperature=st.session_state.pg_temperature, tokenizer=ui.cached_tokenizer(st.session_state.pg_model))
        ui_race.start_race("pg_live_race_view")
if status_slot is not None:
    engine_status(status_slot)

engine_note = st.container()  # the engine's error, when it failed, above the output
area = st.empty()
if st.session_state.get("pg_live_view") == "race" and ui_race.live_race_view():
    pass
elif gen is None:
    area.info("Press Generate. The first start of an engine takes about half a minute on a CPU.")
else:
    for tick, (run, done) in enumerate(gen.follow()):  # a click on Stop reruns the page, which ends this loop
        draw(run, done, area, tick)
    st.session_state.pg_runs = with_run(st.session_state.pg_runs, run)
    if run.meta.incomplete_reason and not run.meta.engine_error:  # engine_note shows the engine's own error
        c5.caption(f"({run.meta.incomplete_reason})")
    with engine_note:
        ui.engine_failure(run)
    c5.download_button("Save run", run_bytes(run), file_name=f"playground-{run.meta.run_id}.json.gz",
                       key="pg_save")

if source != LOCAL:
    st.stop()
st.divider()
st.subheader("Try your own draft")
st.caption("Type a prompt and a draft continuation: the running target verifies it greedily in one forward pass, "
           "as speculative decoding does. Try “The capital of France is” / “ Paris. It is known”.")
v1, v2 = st.columns(2)
v1.text_input("Prompt", key="pg_verify_prompt", value="The weather today is")
v2.text_input("Draft continuation", key="pg_verify_draft", value=" sunny and warm outside")
if st.button("Verify the draft", key="pg_verify", disabled=ui.shared_engine().running() is None,
             help="needs a running engine: press Generate above first"):
    engine = ui.shared_engine()
    try:
        v = verify_draft(engine.server.url, engine.server.model, ui.cached_tokenizer(engine.running().model),
                         st.session_state.pg_verify_prompt, st.session_state.pg_verify_draft)
    except VerifyError as e:
        st.error(str(e))
    else:
        st.markdown(render.CSS, unsafe_allow_html=True)
        st.markdown(f"**{render.step_summary(v.to_step())}**")
        st.markdown(f'<div style="font-size:1.4em">{render.step_html(v.to_step())}</div>', unsafe_allow_html=True)
        st.dataframe(verify_table(v), key="pg_verify_table", hide_index=True)
