"""The race: a baseline request and a speculative one, replayed side by side at the pace they were recorded.

Pure logic, no Streamlit: given two requests and a replay time, what is visible in each lane.

A lane's clock starts when the client sent its request (`Request.start_time_s`). Each engine step
(`Step.time_s`, stamped by the tracer when the scheduler saw the target's output) makes the tokens it
committed appear; the lane finishes when the client received its last token (`Request.end_time_s`).
A request recorded without the tracer replays its stream chunks instead (one chunk is one engine
step while the client keeps up), with every token unmarked.

Worked example (the numbers of tests/unit/test_race.py): the same prompt, 6 output tokens each.

    baseline     sent at 100.0; steps at 100.2 100.4 100.6 100.8 101.0 101.2, one token each; end 101.25
    speculative  sent at 200.0; steps at 200.2 (1 token, prefill) 200.45 (3: 2 accepted + correction)
                 200.7 (2: 1 accepted + correction); end 200.75

    race = Race(Lane.from_request(base_req, "baseline"), Lane.from_request(spec_req, "ngram k=3"))
    race.at(0.5)   baseline: 2 tokens, 2 target passes      speculative: 4 tokens, 2 passes (2.0 per pass)
    race.at(0.75)  baseline: 3 tokens, still running        speculative: 6 tokens, 3 passes, finished
    race.at(1.25)  both finished; race.speedup = (6 / 0.75) / (6 / 1.25) = 1.67x

`race_html(race, race.at(t), speed)` draws the track at replay time t as escaped HTML.

Replay time is recorded time: at speed 2x a presenter's 1 s of wall clock advances the race by 2 s
(`advance`); `next_event` gives the next moment anything changes, for single-stepping.

The pair to race: `find_baseline` looks among recorded runs for the baseline of a speculative run
(same target, concurrency, sampling and output limit, sharing its prompts), and `matching_request`
finds the baseline's request with the same prompt text.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from typing import Generic, TypeVar

from .config import describe_spec
from .divergence import RequestComparison, compare_requests, is_greedy, shared_dtype
from .prompts import workload_name
from .render import CSS, Role, output_roles, pieces_html
from .runfile import Request, Run

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0)  # replay speeds offered to a presenter
CLOCK_SLACK_S = 1.0  # step stamps this far outside [sent, received] mean another clock: re-anchor them
EPS_S = 1e-9  # times closer than this are the same moment (recorded stamps minus the send time are floats)


@dataclass(frozen=True)
class LaneState:
    """What one lane shows at one replay time."""

    elapsed_s: float  # the lane's clock: the replay time, stopped at its finish
    passes: int  # target forward passes (engine steps) so far
    tokens: int  # output tokens committed so far
    pieces: tuple[tuple[str, Role], ...]  # the visible output, piece by piece, with where it came from
    newest: int  # how many of `pieces` the latest step added (to highlight them)
    finished: bool
    started: bool  # the first token has arrived

    @property
    def tokens_per_pass(self) -> float | None:
        return self.tokens / self.passes if self.passes else None

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.elapsed_s if self.elapsed_s > 0 else None


@dataclass(frozen=True)
class Lane:
    """One request on the race track: when each of its steps happened, relative to when it was sent."""

    label: str
    request: Request
    event_s: tuple[float, ...]  # time of each step (or chunk) after the request was sent, non-decreasing
    tokens_after: tuple[int, ...]  # output tokens committed after each event (cumulative)
    pieces_after: tuple[int, ...]  # display pieces visible after each event (cumulative)
    pieces: tuple[tuple[str, Role], ...]
    finish_s: float  # when the client had the whole output
    source: str = "steps"  # "steps" (the tracer's) or "chunks" (the stream's, without the tracer)
    reanchored: bool = False  # step stamps came from another clock and were aligned to the first token

    @classmethod
    def from_request(cls, request: Request, label: str) -> Lane:
        """Build a lane from a recorded request; raises ValueError if it has neither steps nor chunks."""
        start = request.start_time_s
        reanchored = False
        if request.steps:
            times = [s.time_s for s in request.steps]
            end = request.end_time_s if request.end_time_s is not None else times[-1]
            if min(times) < start - CLOCK_SLACK_S or max(times) > end + CLOCK_SLACK_S:
                # The engine's clock is not the client's (an attached server on another host): keep the
                # step intervals, and put the first step where the client saw the first token.
                anchor = request.first_token_time_s if request.first_token_time_s is not None else start
                times = [anchor + t - times[0] for t in times]
                reanchored = True
            counts = [len(s.committed_token_ids) for s in request.steps]
            pieces = tuple(output_roles(request))
            piece_counts = counts
            source = "steps"
        elif request.stream_chunks:
            times = [c.time_s for c in request.stream_chunks]
            counts = [len(c.token_ids) for c in request.stream_chunks]
            pieces = tuple((c.text, "plain") for c in request.stream_chunks)
            piece_counts = [1] * len(counts)
            source = "chunks"
        else:
            raise ValueError(f"request {request.request_id} has neither steps nor stream chunks to replay")
        rel, last = [], 0.0
        for t in times:  # relative to the send time, never before it, never going back
            last = max(last, t - start)
            rel.append(last)
        end_rel = (request.end_time_s - start) if request.end_time_s is not None else rel[-1]
        return cls(label=label, request=request, event_s=tuple(rel), tokens_after=tuple(_cumsum(counts)),
                   pieces_after=tuple(_cumsum(piece_counts)), pieces=pieces, finish_s=max(end_rel, rel[-1]),
                   source=source, reanchored=reanchored)

    @property
    def num_passes(self) -> int:
        return len(self.event_s)

    def piece_of_token(self, index: int) -> int:
        """Which display piece holds output token `index`: the token itself, or the stream chunk it came in."""
        return index if self.source == "steps" else bisect.bisect_right(self.tokens_after, index)

    @property
    def num_tokens(self) -> int:
        return self.tokens_after[-1] if self.tokens_after else 0

    def at(self, t: float) -> LaneState:
        """The lane at replay time t (seconds since both requests were sent)."""
        n = bisect.bisect_right(self.event_s, t + EPS_S)  # events at or before t have happened
        shown = self.pieces_after[n - 1] if n else 0
        before = self.pieces_after[n - 2] if n >= 2 else 0
        finished = t + EPS_S >= self.finish_s
        return LaneState(
            elapsed_s=min(max(t, 0.0), self.finish_s), passes=n, tokens=self.tokens_after[n - 1] if n else 0,
            pieces=self.pieces[:shown], newest=(shown - before) if n and not finished else 0,
            finished=finished, started=n > 0,
        )


@dataclass(frozen=True)
class RaceState:
    t: float
    baseline: LaneState
    speculative: LaneState

    @property
    def finished(self) -> bool:
        return self.baseline.finished and self.speculative.finished


@dataclass(frozen=True)
class Race:
    baseline: Lane
    speculative: Lane
    prompt_set: str = ""  # what the prompt asks (prompts.workload_name): a speedup is shown with its workload
    comparison: RequestComparison | None = None  # same output, or where and why they part (race_for fills it)

    @property
    def duration_s(self) -> float:
        """When the slower lane finishes: the end of the replay."""
        return max(self.baseline.finish_s, self.speculative.finish_s)

    @property
    def speedup(self) -> float | None:
        """Output tokens/s of the speculative request over the baseline's, each from send to last token.

        With greedy sampling both produce the same tokens, and this is the baseline's time over the
        speculative one's. None when either lane produced nothing or took no time.
        """
        b, s = self.baseline, self.speculative
        if not (b.num_tokens and s.num_tokens and b.finish_s > 0 and s.finish_s > 0):
            return None
        return (s.num_tokens / s.finish_s) / (b.num_tokens / b.finish_s)

    @property
    def passes_saved(self) -> int:
        """Target forward passes the baseline needed beyond the speculative request's."""
        return self.baseline.num_passes - self.speculative.num_passes

    @property
    def same_output(self) -> bool:
        return self.baseline.request.output_token_ids == self.speculative.request.output_token_ids

    def at(self, t: float) -> RaceState:
        return RaceState(t=min(max(t, 0.0), self.duration_s), baseline=self.baseline.at(t),
                         speculative=self.speculative.at(t))

    def _moments(self) -> list[float]:
        return [e for lane in (self.baseline, self.speculative) for e in (*lane.event_s, lane.finish_s)]

    def next_event(self, t: float) -> float:
        """The next moment after t when either lane changes (a step, or a finish); the end if none is left."""
        return min((e for e in self._moments() if e > t + EPS_S), default=self.duration_s)

    def previous_event(self, t: float) -> float:
        """The last moment before t when either lane changed; 0 if none."""
        return max((e for e in self._moments() if e < t - EPS_S), default=0.0)


def default_speed(duration_s: float, watchable_s: float = 4.0) -> float:
    """The fastest offered speed, at most 1x, at which the race lasts `watchable_s` of wall clock.

    A 64-token request of a small model on a CPU finishes in about a second: at 1x an audience
    sees nothing. 1.17 s -> 0.25x (4.7 s); 3 s -> 0.5x (6 s); 6 s -> 1x.
    """
    fits = [v for v in SPEEDS if v <= 1.0 and duration_s / v >= watchable_s]
    return max(fits) if fits else min(SPEEDS)


def advance(t: float, wall_elapsed_s: float, speed: float, duration_s: float) -> float:
    """Replay time after `wall_elapsed_s` seconds of the presenter's clock at `speed` (stopped at the end)."""
    return min(t + max(wall_elapsed_s, 0.0) * speed, duration_s)


def _cumsum(values: Iterable[int]) -> list[int]:
    out, total = [], 0
    for v in values:
        total += v
        out.append(total)
    return out


# ---- finding the pair to race --------------------------------------------------------------------

K = TypeVar("K")


@dataclass(frozen=True)
class Pair(Generic[K]):
    """A speculative run and the recorded baseline to race it against (with the baseline's name)."""

    speculative: Run
    baseline: Run
    baseline_name: K
    shared_prompts: int = field(default=0)


def is_baseline(run: Run) -> bool:
    return run.meta.spec is None and not run.meta.invalid_reason


def is_speculative(run: Run) -> bool:
    return run.meta.spec is not None and not run.meta.invalid_reason


def _model_name(path: str) -> str:
    return path.rstrip("/").split("/")[-1]


def prompt_key(req: Request) -> str:
    """What two requests must share to race: the prompt text sent (after any chat template)."""
    return req.prompt


def comparable(spec: Run, base: Run) -> bool:
    """Same target (by folder name), dtype, concurrency, output limit and temperature: a fair race."""
    a, b = spec.meta, base.meta
    return (_model_name(a.target_model) == _model_name(b.target_model) and a.dtype == b.dtype
            and a.concurrency == b.concurrency and a.max_tokens == b.max_tokens
            and a.sampling.get("temperature") == b.sampling.get("temperature"))


def find_baseline(spec: Run, runs: Iterable[tuple[K, Run]]) -> Pair[K] | None:
    """The recorded baseline to race `spec` against, among (name, run) pairs; None if there is none.

    A candidate is a valid baseline run comparable to `spec` (see `comparable`) sharing at least one
    prompt text with it. The best shares the most prompts; ties go to the same prompt set, then to
    the one recorded closest in time.
    """
    prompts = {prompt_key(r) for r in spec.requests}
    best, best_key = None, None
    for name, run in runs:
        if not is_baseline(run) or not comparable(spec, run):
            continue
        shared = len(prompts & {prompt_key(r) for r in run.requests if r.output_token_ids})
        if not shared:
            continue
        key = (shared, run.meta.prompt_set == spec.meta.prompt_set,
               -abs(_timestamp(run.meta.created_at) - _timestamp(spec.meta.created_at)))
        if best_key is None or key > best_key:
            best, best_key = Pair(speculative=spec, baseline=run, baseline_name=name, shared_prompts=shared), key
    return best


def matching_request(run: Run, req: Request) -> Request | None:
    """The request of `run` with the same prompt as `req` (and some output); None if there is none."""
    return next((r for r in run.requests if prompt_key(r) == prompt_key(req) and r.output_token_ids), None)


def raceable_requests(pair: Pair) -> list[Request]:
    """The speculative run's requests that have a baseline partner and something to replay."""
    return [r for r in pair.speculative.requests
            if (r.steps or r.stream_chunks) and (b := matching_request(pair.baseline, r)) is not None
            and (b.steps or b.stream_chunks)]


def race_for(pair: Pair, req: Request, spec_label: str) -> Race:
    """The race of `req` (a request of the pair's speculative run) against the baseline's request of its prompt,
    with their comparison (divergence.compare_requests): identical output, or where and why they part."""
    base = matching_request(pair.baseline, req)
    if base is None:
        raise ValueError(f"the baseline has no request with the prompt of {req.request_id}")
    comparison = compare_requests(base, req, greedy=is_greedy(pair.baseline) and is_greedy(pair.speculative),
                                  dtype=shared_dtype(pair.baseline, pair.speculative))
    return Race(Lane.from_request(base, "baseline (no drafting)"), Lane.from_request(req, spec_label),
                prompt_set=pair.speculative.meta.prompt_set, comparison=comparison)


def spec_label(run: Run) -> str:
    """'ngram k=3', 'draft_model k=2', 'ngram k by batch size (1: k=4 · 2-64: k=1)', ...: the short name of a
    run's drafting (config.describe_spec)."""
    if run.meta.spec is None:
        return "baseline (no drafting)"
    return describe_spec(run.meta.spec)


def _timestamp(iso: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0


# ---- drawing: escaped HTML (token text is model output, untrusted) --------------------------------

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
             (str(state.tokens), "tokens"), ("–" if per_pass is None else f"{per_pass:.2f}", "tokens per pass")]
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
    if x >= 1:
        head = f"{escape(s.label)} finished {x:.2f}x faster{escape(on)}"
        cls = "sv-result"
    else:
        head = f"The baseline won: {escape(s.label)} was {1 / x:.2f}x slower{escape(on)}"
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


def raced_against(base: Run, runs: Iterable[tuple[K, Run]]) -> list[K]:
    """The names of the speculative runs among `runs` whose baseline (find_baseline) is `base`."""
    return [name for name, run in runs if is_speculative(run) and find_baseline(run, [(None, base)]) is not None]
