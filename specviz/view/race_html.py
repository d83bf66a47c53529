"""The race drawn: the track as escaped HTML and CSS, and the script that plays it on in the browser.

Token text and labels are model output and user input, untrusted: every piece is escaped. The model
it draws is specviz.race (Lane, Race, their states at a replay time); specviz.ui_race places it.

    race_html(race, race.at(t), speed)   the clock, the two lanes and (at the finish) the result
    replay_script(race, t, speed, id)    a <script> that moves that track on without the server
"""

from __future__ import annotations

import json
from html import escape

from ..figures import SPEEDUP, THIS_REQUEST, TOKENS_PER_TARGET_PASS
from ..prompts import workload_name
from ..race import EPS_S, Lane, LaneState, Race, RaceState
from .render import CSS, pieces_html

RACE_CSS = """
<style>
.sv-race{display:flex;gap:20px;align-items:stretch;margin-top:4px}
.sv-lane{flex:1 1 0;min-width:0;border:2px solid rgba(128,128,128,.30);border-radius:12px;padding:12px 16px}
.sv-lane-spec{border-color:#6cc46c}
.sv-lane-head{display:flex;justify-content:space-between;align-items:center;font-size:1.45em;font-weight:700;
 margin-bottom:6px}
.sv-flag{font-size:.62em;font-weight:600;padding:3px 10px;border-radius:12px;background:rgba(128,128,128,.15)}
.sv-flag-done{background:#c8f0c8;color:#0b4d0b}
.sv-stats{display:grid;grid-template-columns:1.35fr 1fr 1fr 1fr;gap:8px;margin:8px 0 10px}
.sv-stat{background:rgba(128,128,128,.09);border-radius:8px;padding:4px 10px}
.sv-stat b{display:block;font-size:1.9em;line-height:1.15;font-variant-numeric:tabular-nums;white-space:nowrap}
.sv-stat span{font-size:.9em;opacity:.75}
.sv-track{height:10px;background:rgba(128,128,128,.18);border-radius:5px;overflow:hidden;margin-bottom:10px}
.sv-track div{height:100%;background:#7f9cc0}
.sv-lane-spec .sv-track div{background:#4caf50}
.sv-scroll{max-height:340px;overflow-y:auto;display:flex;flex-direction:column-reverse}
.sv-lane .sv-output{font-size:1.08em}
.sv-chip.sv-new{outline:2px solid #ff9800;outline-offset:0}
.sv-clock{font-size:1.05em;opacity:.8;margin:2px 0 6px}
.sv-result{margin:6px 0 14px;padding:14px 20px;border-radius:12px;background:#c8f0c8;color:#0b4d0b;font-size:1.9em;
 font-weight:700}
.sv-result-slower{background:#ffe2a8;color:#6a4100}
.sv-result small{display:block;font-size:.5em;font-weight:400;margin-top:4px}
</style>
"""


def _fmt_s(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def lane_html(lane: Lane, state: LaneState, *, speculative: bool, marks: dict[int, str] | None = None) -> str:
    """One lane: its name, a finished flag, four counters, a progress track and the output so far.

    `marks` outlines output tokens (by index) with a hover text: where the two outputs part."""
    flag = (f'<span class="sv-flag sv-flag-done">✓ finished in {_fmt_s(lane.finish_s)}</span>' if state.finished
            else f'<span class="sv-flag">{"running" if state.started else "waiting for the first token"}</span>')
    per_pass = state.tokens_per_pass
    stats = [(_fmt_s(state.elapsed_s), "elapsed"), (str(state.passes), "target passes"),
             (str(state.tokens), "tokens"), ("–" if per_pass is None else f"{per_pass:.2f}", TOKENS_PER_TARGET_PASS)]
    cells = "".join(f'<div class="sv-stat"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for v, k in stats)
    share = 100.0 * state.tokens / lane.num_tokens if lane.num_tokens else 0.0
    unit = "" if lane.source == "steps" else " (from the stream: no tracer)"
    pieces_marks = {lane.piece_of_token(i): text for i, text in (marks or {}).items()}
    return (f'<div class="sv-lane{" sv-lane-spec" if speculative else ""}">'
            f'<div class="sv-lane-head"><span>{escape(lane.label)}{escape(unit)}</span>{flag}</div>'
            f'<div class="sv-stats">{cells}</div><div class="sv-track"><div style="width:{share:.1f}%"></div></div>'
            f'<div class="sv-scroll">{pieces_html(lane.pieces, state.newest, len(state.pieces), pieces_marks)}'
            '</div></div>')


def result_html(race: Race, hidden: bool = False) -> str:
    """The finish line: the measured speedup, what it rests on, and an honest word when drafting lost.

    `hidden` draws it with the class sv-later, for the browser's replay to show at the finish."""
    later = " sv-later" if hidden else ""
    b, s, x = race.baseline, race.speculative, race.speedup
    on = f" on {workload_name(race.prompt_set)}" if race.prompt_set else ""  # the workload, by name
    if x is None:
        return f'<div class="sv-result sv-result-slower{later}">No speedup to show: a lane produced nothing.</div>'
    detail = (f"{s.num_tokens} tokens in {_fmt_s(s.finish_s)} ({s.num_passes} target passes) against "
              f"{b.num_tokens} in {_fmt_s(b.finish_s)} ({b.num_passes} passes), each from sending the request "
              "to its last token, as recorded")
    c = race.comparison
    if c is not None and c.verdict == "identical" and race.same_output:
        detail = f"Identical output, {race.passes_saved} fewer target passes. " + detail
    elif c is not None and c.divergence is not None:
        detail += (f". The {c.headline()}" + ("" if c.verdict == "tie" else
                   ". The drafting path changed the target's output: this is not lossless") +
                   "; the speedup compares tokens per second")
    mine = {f.name: f for f in race.request_figures}
    if mine.get(TOKENS_PER_TARGET_PASS):
        detail += f"; {THIS_REQUEST}: {mine[TOKENS_PER_TARGET_PASS].text}"
    if race.run_figures:  # the headline's figures, under the same names, with their scope
        scope = race.run_figures[0].scope
        detail += f". Over {scope} of the run: " + ", ".join(f.text for f in race.run_figures)
    if x >= 1:
        head = f"{escape(s.label)} finished {THIS_REQUEST} {mine[SPEEDUP].text}{escape(on)}"
        cls = "sv-result"
    else:
        head = f"The baseline won {THIS_REQUEST}: {escape(s.label)} was {mine[SPEEDUP].text}{escape(on)}"
        cls = "sv-result sv-result-slower"
    return f'<div class="{cls}{later}">{head}<small>{escape(detail)}</small></div>'


def race_html(race: Race, state: RaceState, speed: float, replay_id: str = "") -> str:
    """The whole track at one moment: the race clock, the two lanes side by side, the result at the end.

    Every lane holds its whole output, the part not yet produced hidden (class sv-later), and the result
    is drawn hidden until the finish, so that
    `replay_script(..., replay_id)` can play the race on in the browser without the server.
    """
    clock = (f'<div class="sv-clock">race clock <span class="sv-clock-t">{_fmt_s(state.t)}</span> of '
             f'{_fmt_s(race.duration_s)} · replayed at {speed:g}x the recorded pace</div>')
    c = race.comparison
    marks = {c.divergence.position: c.marker()} if c is not None and c.divergence is not None else None
    lanes = (f'<div class="sv-race">{lane_html(race.baseline, state.baseline, speculative=False, marks=marks)}'
             f'{lane_html(race.speculative, state.speculative, speculative=True, marks=marks)}</div>')
    root = f"sv-replay sv-replay-{escape(replay_id)}" if replay_id else "sv-replay"
    return (RACE_CSS + CSS + f'<div class="{root}">' + clock + result_html(race, hidden=not state.finished)
            + lanes + "</div>")


def replay_data(race: Race, t: float, speed: float) -> dict:
    """What the browser needs to play the race on from replay time t: times and counts only, no token text.

    For each lane (baseline, then speculative) the event times, the tokens and display pieces
    visible after each event, the finish time and the total tokens; as Lane.at uses them.
    """
    return {"t0": t, "speed": speed, "duration": race.duration_s, "eps": EPS_S, "lanes": [
        {"ev": list(lane.event_s), "tok": list(lane.tokens_after), "pcs": list(lane.pieces_after),
         "fin": lane.finish_s, "n": lane.num_tokens} for lane in (race.baseline, race.speculative)]}


# Plays the race on in the browser, about 25 times a second, from the state race_html drew: the same
# rules as Lane.at (an event at or before t has happened; a lane's clock stops at its finish). It stops
# when its track is gone from the page (paused, restarted, finished: the server draws anew).
REPLAY_JS = r"""
(() => {
  const D = __DATA__, id = __ID__, done = __DONE__;
  const start = performance.now();
  const fmt = s => (s < 10 ? s.toFixed(2) : s.toFixed(1)) + " s";
  const upto = (a, x) => { let lo = 0, hi = a.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (a[m] <= x) lo = m + 1; else hi = m; } return lo; };
  const last = [-1, -1];
  function frame() {
    const root = document.querySelector(".sv-replay-" + id);
    if (!root) { if (performance.now() - start < 5000) setTimeout(frame, 40); return; }
    const t = Math.min(D.t0 + (performance.now() - start) / 1000 * D.speed, D.duration);
    root.classList.add("sv-live");  // the browser is playing it now
    root.querySelector(".sv-clock-t").textContent = fmt(t);
    root.querySelectorAll(".sv-lane").forEach((lane, li) => {
      const L = D.lanes[li], n = upto(L.ev, t + D.eps), finished = t + D.eps >= L.fin;
      const tokens = n ? L.tok[n - 1] : 0, shown = n ? L.pcs[n - 1] : 0, before = n >= 2 ? L.pcs[n - 2] : 0;
      const b = lane.querySelectorAll(".sv-stat b");
      b[0].textContent = fmt(Math.min(Math.max(t, 0), L.fin));
      b[1].textContent = n; b[2].textContent = tokens; b[3].textContent = n ? (tokens / n).toFixed(2) : "\u2013";
      lane.querySelector(".sv-track div").style.width = (L.n ? 100 * tokens / L.n : 0).toFixed(1) + "%";
      const flag = lane.querySelector(".sv-flag");
      flag.className = finished ? "sv-flag sv-flag-done" : "sv-flag";
      flag.textContent = finished ? "\u2713 finished in " + fmt(L.fin)
        : n ? "running" : "waiting for the first token";
      const key = finished ? -2 - shown : shown;
      if (key !== last[li]) {
        last[li] = key;
        Array.from(lane.querySelector(".sv-output").children).forEach((p, i) => {
          p.classList.toggle("sv-later", i >= shown);
          p.classList.toggle("sv-new", !finished && n > 0 && i >= before && i < shown);
        });
      }
    });
    if (t < D.duration) setTimeout(frame, 40);
    else {
      root.querySelector(".sv-result")?.classList.remove("sv-later");  // the finish line, drawn hidden
      if (done) document.querySelector(".st-key-" + done + " button")?.click();  // the page follows
    }
  }
  frame();
})();
"""


def replay_script(race: Race, t: float, speed: float, replay_id: str, done_key: str = "") -> str:
    """A <script> that plays the track drawn by race_html(..., replay_id) on from replay time t at `speed`,
    and at the finish presses the button with Streamlit key `done_key` (if given).

    `replay_id` and `done_key` must be letters, digits and _ (they name CSS classes); the data are numbers only.
    """
    for name in (replay_id, done_key):
        if name and not name.replace("_", "").isalnum():
            raise ValueError(f"replay_id and done_key must be letters, digits and _, not {name!r}")
    code = (REPLAY_JS.replace("__DATA__", json.dumps(replay_data(race, t, speed)))
            .replace("__ID__", f'"{replay_id}"').replace("__DONE__", json.dumps(done_key)))
    return f"<script>{code}</script>"
