"""The race: a baseline request and a speculative one, replayed side by side at the pace they were recorded.

The replay model and the pairing, pure: no Streamlit, no HTML. Given two requests and a replay time,
what is visible in each lane (specviz/view/race_html.py draws it; specviz/ui_race.py keeps its state).

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

`view.race_html.race_html(race, race.at(t), speed)` draws the track at replay time t as escaped HTML.

Replay time is recorded time: at speed 2x a presenter's 1 s of wall clock advances the race by 2 s
(`advance`); `next_event` gives the next moment anything changes, for single-stepping.

The pair to race: `find_baseline` looks among recorded runs for the baseline of a speculative run
(same target, concurrency, sampling and output limit, sharing its prompts), and `matching_request`
finds the baseline's request with the same prompt text; `latest_baseline` does it for the Playground's
runs generated live.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from . import figures
from .config import describe_spec, short_model_name
from .divergence import RequestComparison, compare_requests, is_greedy, shared_dtype
from .figures import Figure
from .metrics import summarize
from .roles import Role, output_roles
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
        """figures.tokens_per_target_pass so far."""
        return figures.tokens_per_target_pass(self.tokens, self.passes)

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
    run_figures: tuple[Figure, ...] = ()  # the whole run's figures against its baseline, as the headline states them

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
        return figures.speedup(s.num_tokens / s.finish_s, b.num_tokens / b.finish_s)

    @property
    def request_figures(self) -> tuple[Figure, ...]:
        """This request's speedup and tokens per target pass (scope 'this request'), as the finish line states
        them (the lanes' passes are the request's steps)."""
        s = self.speculative
        return figures.figures_of(figures.THIS_REQUEST, speedup_value=self.speedup,
                                  per_pass=figures.tokens_per_target_pass(s.num_tokens, s.num_passes))

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


def prompt_key(req: Request) -> str:
    """What two requests must share to race: the prompt text sent (after any chat template)."""
    return req.prompt


def comparable(spec: Run, base: Run) -> bool:
    """Same target (by folder name), dtype, concurrency, output limit and temperature: a fair race."""
    a, b = spec.meta, base.meta
    return (short_model_name(a.target_model) == short_model_name(b.target_model) and a.dtype == b.dtype
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
                prompt_set=pair.speculative.meta.prompt_set, comparison=comparison,
                run_figures=run_figures(pair.speculative, pair.baseline))


def run_figures(spec: Run, base: Run) -> tuple[Figure, ...]:
    """The run's speedup over its baseline, tokens per target pass and mean acceptance length, scope
    'both prompts' (figures.run_scope): what the headline states and the race repeats for the run."""
    s, b = summarize(spec), summarize(base)
    return figures.figures_of(figures.run_scope(len(spec.requests)),
                              speedup_value=figures.speedup(s.output_tokens_per_s, b.output_tokens_per_s),
                              per_pass=s.tokens_per_target_pass, acceptance_length=s.mean_acceptance_length)


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


def raced_against(base: Run, runs: Iterable[tuple[K, Run]]) -> list[K]:
    """The names of the speculative runs among `runs` whose baseline (find_baseline) is `base`."""
    return [name for name, run in runs if is_speculative(run) and find_baseline(run, [(None, base)]) is not None]


def latest_baseline(run: Run, earlier: Iterable[Run]) -> Run | None:
    """The baseline among runs generated before `run` (the Playground's) to compare it with, by find_baseline:
    the same prompt, target, dtype, output limit and temperature; of several, the one generated closest to it."""
    pair = find_baseline(run, [(r.meta.run_id, r) for r in earlier if r.meta.run_id != run.meta.run_id])
    return pair.baseline if pair is not None else None
