"""The race's Streamlit edge (beside specviz/ui.py): presenter controls, the replay loop, the recorded pair
and the live race. The model and pairing are specviz.race (pure), the HTML specviz.view.race_html; this
module keeps the session state and draws (engines start through ui.start_engine).

Replay: the server keeps the race clock (replay time advances by the wall time since the last draw
times the chosen speed) and draws `race_html` at it; while playing, `replay_script` moves
the clock and the lanes on in the browser, and a timer redraws the track at the finish line.
Pause, step and restart are buttons with callbacks (so the next run already sees their effect);
when the race reaches its end the fragment reruns the page once, which stops the timer.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from html import escape

import streamlit as st

from . import figures, ui
from .divergence import RequestComparison, compare_requests, is_greedy, shared_dtype
from .headline import baseline_headline, headline, headline_html
from .metrics import summarize
from .race import (
    EPS_S,
    SPEEDS,
    Pair,
    Race,
    advance,
    default_speed,
    find_baseline,
    is_baseline,
    is_speculative,
    latest_baseline,
    matching_request,
    race_for,
    raceable_requests,
    raced_against,
    spec_label,
)
from .runfile import SAMPLE_RUNS_DIR, Request, Run, RunFileError, list_run_files, load_run
from .serving.recording import record
from .serving.server import EngineError
from .serving.shared import EngineConfig, SharedEngine
from .showcase import example_step, opening_run
from .view import render
from .view.race_html import race_html, replay_script

# The browser's replay presses the hidden "finished" button when it reaches the finish line; this timer
# (the replay's remaining wall time plus this) redraws the page in case it did not, e.g. without JavaScript.
END_SLACK_S = 3.0


# ---- the sample runs, loaded once per file version ------------------------------------------------

@st.cache_resource(show_spinner=False)
def _load_sample(path: str, mtime_ns: int) -> Run:
    return load_run(path)


def sample_entries() -> list[tuple[str, Run]]:
    """(name relative to sample_runs/, run) for every readable sample run."""
    out = []
    for p in list_run_files():
        try:
            out.append((str(p.relative_to(SAMPLE_RUNS_DIR)), _load_sample(str(p), p.stat().st_mtime_ns)))
        except (RunFileError, OSError):
            continue
    return out


def opening_run_name() -> str | None:
    """The sample run the Playground opens on (showcase.opening_run)."""
    return opening_run(sample_entries())


# ---- replay controls and the track ---------------------------------------------------------------

def _keys(key: str) -> dict[str, str]:
    return {n: f"{key}_{n}" for n in ("t", "playing", "wall", "speed", "ident", "draws")}


def _fold(race: Race, key: str) -> None:
    """Bring the race clock up to now (at the current speed) before a control changes anything."""
    k, s = _keys(key), st.session_state
    now = time.monotonic()
    if s[k["playing"]]:
        s[k["t"]] = advance(s[k["t"]], now - s[k["wall"]], s[k["speed"]], race.duration_s)
    s[k["wall"]] = now


def _play_pause(race: Race, key: str) -> None:
    k, s = _keys(key), st.session_state
    _fold(race, key)
    if s[k["playing"]]:
        s[k["playing"]] = False
        return
    if s[k["t"]] >= race.duration_s - EPS_S:
        s[k["t"]] = 0.0
    s[k["playing"]] = True


def _step(race: Race, key: str, direction: int) -> None:
    k, s = _keys(key), st.session_state
    _fold(race, key)
    s[k["playing"]] = False
    s[k["t"]] = race.next_event(s[k["t"]]) if direction > 0 else race.previous_event(s[k["t"]])


def _finish(race: Race, key: str) -> None:
    k, s = _keys(key), st.session_state
    s[k["t"]], s[k["playing"]], s[k["wall"]] = race.duration_s, False, time.monotonic()


def _restart(race: Race, key: str) -> None:
    k, s = _keys(key), st.session_state
    s[k["t"]], s[k["playing"]], s[k["wall"]] = 0.0, True, time.monotonic()


def start_race(key: str) -> None:
    """Have the race under `key` start from the line on its next draw (a callback for an 'open race' button)."""
    k = _keys(key)
    st.session_state[k["ident"]] = None  # the next draw resets the clock ...
    st.session_state[f"{key}_autostart"] = True  # ... and plays


def race_view(race: Race, key: str) -> None:
    """Presenter controls and the two lanes, replayed at the recorded pace."""
    k, s = _keys(key), st.session_state
    ident = (race.baseline.request.request_id, race.speculative.request.request_id, race.duration_s)
    if s.get(k["ident"]) != ident:
        s[k["ident"]], s[k["t"]], s[k["wall"]] = ident, 0.0, time.monotonic()
        s[k["playing"]] = bool(s.pop(f"{key}_autostart", False))
        s[k["speed"]] = default_speed(race.duration_s)
    t, playing = s[k["t"]], s[k["playing"]]
    at_end = t >= race.duration_s - EPS_S
    # Material icons, not emoji: with only DejaVu/Liberation fonts chromium drew "⏸" as a missing-glyph box
    label, icon = (("Pause", "pause") if playing else ("Race again", "replay") if at_end
                   else ("Start the race", "play_arrow") if t == 0 else ("Resume", "play_arrow"))
    c = st.columns([1.4, 1, 1, 1, 3], vertical_alignment="bottom")
    c[0].button(label, key=f"{key}_play", type="primary", icon=f":material/{icon}:", on_click=_play_pause,
                args=(race, key), width="stretch")
    c[1].button("step", key=f"{key}_back", icon=":material/skip_previous:", on_click=_step, args=(race, key, -1),
                width="stretch", help="Back to the previous moment a lane changed (pauses)")
    c[2].button("step", key=f"{key}_next", icon=":material/skip_next:", on_click=_step, args=(race, key, 1),
                width="stretch", help="On to the next moment a lane changes: one engine step of either request (pauses)")
    c[3].button("Restart", key=f"{key}_restart", icon=":material/restart_alt:", on_click=_restart, args=(race, key),
                width="stretch")
    c[4].select_slider("Replay speed (1x = as recorded)", options=list(SPEEDS), key=k["speed"],
                       format_func=lambda v: f"{v:g}x", on_change=_fold, args=(race, key))
    # Hidden: the browser's replay presses it at the finish, so the page (its buttons) follows the race
    # as the audience saw it end, not the server's clock.
    st.button("finished", key=f"{key}_done", on_click=_finish, args=(race, key))
    st.html(f"<style>.st-key-{key}_done{{display:none}}</style>")

    # While it plays, the browser moves the clock and the lanes (replay_script): a server tick per
    # frame stuttered (clock jumps of 0.6-2.7 s on a busy 2-core machine). The server draws the track once
    # and once more after the finish line, when its timer (the replay's remaining wall time) fires.
    remaining_wall_s = (race.duration_s - t) / s[k["speed"]] + END_SLACK_S
    s[k["draws"]] = 0

    @st.fragment(run_every=remaining_wall_s if playing else None)
    def track() -> None:
        s[k["draws"]] += 1
        if s[k["playing"]]:
            now = time.monotonic()
            s[k["t"]] = advance(s[k["t"]], now - s[k["wall"]], s[k["speed"]], race.duration_s)
            s[k["wall"]] = now
            if s[k["t"]] >= race.duration_s - EPS_S:
                s[k["playing"]] = False
                st.rerun()  # the whole page once more: the timer stops and the buttons say so
            if s[k["draws"]] > 1:  # the timer fired early: draw the page anew with the time left
                st.rerun()
        replay_id = uuid.uuid4().hex if s[k["playing"]] else ""
        st.markdown(race_html(race, race.at(s[k["t"]]), s[k["speed"]], replay_id), unsafe_allow_html=True)
        if replay_id:
            st.html(replay_script(race, s[k["t"]], s[k["speed"]], replay_id, done_key=f"{key}_done"),
                    unsafe_allow_javascript=True)

    track()


def _prompt_text(req: Request) -> str:
    text = (req.user_message or req.prompt).strip().replace("\n", " ")
    return text[:160] + ("…" if len(text) > 160 else "")


def race_header(race: Race, note: str) -> None:
    st.subheader(f":material/sports_score: The race: {race.speculative.label} against no drafting")
    st.caption(f"Same prompt, same target, one request each: “{_prompt_text(race.speculative.request)}”. "
               f"Tokens appear when the engine's step produced them, chips coloured as in the step rows. {note}")


# ---- the recorded pair (Playground > Recorded run) -----------------------------------------------

VIEW, RACE_REQUEST = "pg_view", "pg_race_request"


def _open_race(request_id: str) -> None:
    st.session_state[VIEW] = "race"
    st.session_state[RACE_REQUEST] = request_id
    start_race("rec_race")


def _close_race() -> None:
    st.session_state[VIEW] = "steps"


def example_step_line(req: Request) -> None:
    """One step of the request in large chips, as the worked example: what a verification step is.

    Not while presenting: the step-through below shows one step itself (one step number on screen).
    """
    i = example_step(req)
    if i is None or ui.presenting():
        return
    step = req.steps[i]
    st.markdown(render.CSS + f'<div class="sv-example" style="font-size:1.35em;margin:4px 0 8px">'
                f'<span style="font-size:.7em;opacity:.75">One verification step of this request (step {i + 1} '
                f'of {len(req.steps)}): {escape(render.step_summary(step))}</span>'
                f'{render.step_html(step)}</div>', unsafe_allow_html=True)


def request_header(pair: Pair | None, req: Request, raced_by: list[str] | None = None) -> dict[int, str] | None:
    """Under the request selector: one step as the worked example, the comparison with the baseline's
    output, and the one click to the race. Returns the token to mark where the outputs part, if they do.

    `raced_by` is given for a baseline run: the speculative runs that race against it.
    """
    example_step_line(req)
    marks = baseline_comparison(pair.baseline, pair.speculative, req, pair.baseline_name) if pair else None
    race_button(pair, req, raced_by)
    return marks


def baseline_comparison(baseline: Run, run: Run, req: Request, baseline_name: str) -> dict[int, str] | None:
    """Compare `req` (of `run`) with the baseline's request of its prompt and say so in one line.

    Returns the token to outline where the outputs part ({index: hover text}), or None."""
    base = matching_request(baseline, req)
    if base is None:
        return None
    c = compare_requests(base, req, greedy=is_greedy(baseline) and is_greedy(run), dtype=shared_dtype(baseline, run))
    comparison_note(c, baseline_name)
    return {c.divergence.position: c.marker()} if c.divergence is not None else None


def comparison_note(c: RequestComparison, baseline_name: str) -> None:
    """Same output as the baseline (the point of the demo), or where it parts and why, in one line."""
    where = f"against the baseline {baseline_name}"
    detail = f" {c.detail[0].upper()}{c.detail[1:]}." if c.detail else ""
    if c.verdict == "identical":
        st.success(f"**Same output as without drafting**: {c.reason}, {where}.", icon=":material/check_circle:")
    elif c.verdict == "tie":
        st.info(f"**The {c.headline()}.**{detail} The token is outlined in red below; hover it for both runs' "
                f"scores ({where}).", icon=":material/balance:")
    elif c.verdict == "not_applicable":
        st.caption(c.reason)
    else:
        st.error(f"**The {c.headline()}.**{detail} The token is outlined in red below ({where}).",
                 icon=":material/error:")


def race_button(pair: Pair | None, req: Request, raced_by: list[str] | None = None) -> None:
    """The one click from a recorded run to its race (for a baseline run, where its races are)."""
    if raced_by is not None:
        st.caption("This run is a baseline (no drafting): the race starts from a speculative run of the same "
                   "prompts" + (f", such as {', '.join(raced_by)}." if raced_by else "; none is recorded yet."))
        return
    if pair is None:
        st.caption("No recorded baseline of these prompts at this concurrency to race against: record one with "
                   "`python -m specviz record --spec none` and the same prompts.")
        return
    if req.request_id not in {r.request_id for r in raceable_requests(pair)}:
        st.caption(f"The baseline {pair.baseline_name} has no request with this prompt to race against.")
        return
    col, note = st.columns([1.5, 2.5], vertical_alignment="center")  # the label whole at 1280 px
    col.button("Race it against the baseline", key="pg_race_open", type="primary", icon=":material/sports_score:", on_click=_open_race,
               args=(req.request_id,), width="stretch")
    note.caption(f"Replays this request beside the baseline's request with the same prompt "
                 f"({pair.baseline_name}), side by side at the pace they were recorded.")


def _headline_markup(run: Run, pair: Pair | None, raced_by: list[str]) -> str:
    if pair is not None:
        h = headline(run, pair.baseline)
    elif is_baseline(run):
        h = baseline_headline(run, raced_by)
    else:
        h = None
    return headline_html(h) if h is not None else ""


def recorded_run_with_race(run: Run, name: str | None) -> None:
    """The recorded-run view with its headline and race button, or the race itself once asked for."""
    others = [e for e in sample_entries() if e[0] != name]
    pair = find_baseline(run, others) if is_speculative(run) else None
    raced_by = raced_against(run, others) if is_baseline(run) else []
    if st.session_state.get(VIEW) == "race" and pair is not None:
        req = next((r for r in raceable_requests(pair) if r.request_id == st.session_state.get(RACE_REQUEST)), None)
        if req is not None:
            st.button("← Back to the steps", key="pg_race_close", on_click=_close_race)
            race = race_for(pair, req, spec_label(run))
            race_header(race, f"Recorded: {name or 'uploaded run'} against {pair.baseline_name}, "
                              f"{ui.run_caption(run)}.")
            race_view(race, "rec_race")
            return
    st.session_state[VIEW] = "steps"
    ui.recorded_run_view(run, on_request=lambda r: request_header(pair, r, raced_by if is_baseline(run) else None),
                         headline_markup=_headline_markup(run, pair, raced_by))


# ---- a live generation against the baseline made before it (Playground > Local engine) -----------

def versus_live_baseline(run: Run, earlier: list[Run]) -> dict[int, str] | None:
    """Under a finished speculative generation: target passes saved and speed against the baseline of its
    prompt generated before it (race.latest_baseline), and whether the outputs are the same.

    Returns the token to mark where the outputs part ({index: hover text}); None without a baseline."""
    base = latest_baseline(run, earlier) if run.meta.method is not None else None
    if base is None:
        return None
    s, b = summarize(run), summarize(base)
    c1, c2 = st.columns(2)
    c1.metric("target passes saved vs baseline", b.num_steps - s.num_steps)
    if (x := figures.speedup(s.output_tokens_per_s, b.output_tokens_per_s)) is not None:
        c2.metric(f"{figures.SPEEDUP} vs baseline ({figures.THIS_REQUEST})", f"{x:.2f}x")
    return baseline_comparison(base, run, run.requests[0], "generated just before")


# ---- the live race (Playground > Local engine) ---------------------------------------------------

LIVE_RACE = "pg_live_race"


def run_live_race(engine: SharedEngine, model: str, spec, prompt: str, *, max_tokens: int, temperature: float,
                  tokenizer, dtype: str | None = None) -> tuple[Run, Run] | None:
    """Generate `prompt` with the baseline and with `spec`, one engine after the other; (baseline, speculative).

    The configuration already running goes first (one engine start fewer). Each run is recorded like
    `specviz record` does it, with a warm-up request first, so neither lane pays for a cold engine.
    """
    configs = {"baseline": EngineConfig(model=model, spec=None, dtype=dtype),
               "speculative": EngineConfig(model=model, spec=spec, dtype=dtype)}
    order = sorted(configs, key=lambda name: configs[name] != engine.running())
    runs: dict[str, Run] = {}
    for name in order:
        server = ui.start_engine(engine, configs[name])
        if server is None:
            return None
        with st.status(f"Generating with {configs[name].describe()} (after a warm-up request)") as status:
            try:
                runs[name] = record(server, [prompt], prompt_set="playground race", concurrency=1,
                                    max_tokens=max_tokens, temperature=temperature, tokenizer=tokenizer)
            except EngineError as e:
                status.update(label="Generation failed", state="error")
                st.error(str(e))
                return None
            req = runs[name].requests[0]
            if req.error:
                status.update(label="Generation failed", state="error")
                st.error(req.error)
                ui.engine_failure(runs[name])  # the engine's own error, when it died, not only vLLM's generic one
                return None
            status.update(label=f"{configs[name].describe()}: {len(req.output_token_ids)} tokens", state="complete")
    return runs["baseline"], runs["speculative"]


def live_race_button(container, disabled_why: str | None, on_click: Callable[[], None]) -> bool:
    return container.button("Race", key="pg_race", icon=":material/sports_score:", disabled=disabled_why is not None, on_click=on_click,
                            help=disabled_why or "Generate this prompt without drafting and with the chosen method, "
                                                 "one engine after the other, then replay both side by side")


def live_race_view() -> bool:
    """Draw the last live race, if there is one; False otherwise."""
    pair: tuple[Run, Run] | None = st.session_state.get(LIVE_RACE)
    if pair is None:
        return False
    base, spec = pair
    try:
        race = race_for(Pair(speculative=spec, baseline=base, baseline_name="generated live"), spec.requests[0],
                        spec_label(spec))
    except ValueError as e:
        st.warning(f"This race cannot be replayed: {e}")
        return False
    race_header(race, f"Generated live just now: {ui.run_caption(spec)}.")
    race_view(race, "pg_live_race_view")
    return True
