"""Figures computed from a Run, in vLLM's words.

Worked example: two steps with k=3 drafts each, accepting 2 and 3 (the second gets a bonus):
    num_drafts = 2, num_draft_tokens = 6, num_accepted_tokens = 5
    num_accepted_tokens_per_pos = [2, 2, 1]   (position j counts steps that accepted > j drafts)
    mean_acceptance_length = 1 + 5 / 2 = 3.5  over the passes that verified drafts, as vLLM reports it
    (with 3 more passes that verified none, 7 + 3 = 10 tokens over 5 passes: tokens_per_target_pass 2.0)
The names and formulas are specviz.figures'.
    draft_acceptance_rate  = 5 / 6 = 0.833
    acceptance_rate_per_pos = [1.0, 1.0, 0.5]
"""

from __future__ import annotations

import numpy as np
from pydantic import computed_field, model_validator

from . import figures
from .base import Frozen
from .runfile import Request, Run, SpecDecodeCounters, Step


class Acceptance(Frozen):
    """Spec-decode totals; the same fields whether counted from steps or read from vLLM."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_accepted_tokens_per_pos: list[int]

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data):
        """Its JSON carries the computed figures below; reading it back recomputes them."""
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in cls.model_computed_fields}
        return data

    @computed_field
    @property
    def mean_acceptance_length(self) -> float | None:
        return figures.mean_acceptance_length(self.num_accepted_tokens, self.num_drafts)

    @computed_field
    @property
    def draft_acceptance_rate(self) -> float | None:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else None

    @computed_field
    @property
    def acceptance_rate_per_pos(self) -> list[float]:
        return [n / self.num_drafts for n in self.num_accepted_tokens_per_pos] if self.num_drafts else []


def count_acceptance(steps: list[Step], k: int | None = None, *, padded: bool = False) -> Acceptance:
    """Totals over steps that verified drafts; the per-position vector has length k (or the most drafts seen).

    padded=True counts as vLLM's own counters do (count_as_vllm): padded placeholder slots are drafts.
    """
    drafted = [s for s in steps if (s.verified if padded else s.draft_token_ids)]
    slots = [s.num_drafts + (s.num_padded_drafts if padded else 0) for s in drafted]
    width = k if k is not None else max(slots, default=0)
    # A step accepts at most its drafts, at most k in a valid run. An invalid run, read as recorded for
    # inspection, may claim more: it is counted up to its drafts, in as many positions as it drafted.
    accepted = [min(s.num_accepted, s.num_drafts) for s in drafted]
    per_pos = [0] * max(width, max(accepted, default=0))
    for n in accepted:
        for j in range(n):
            per_pos[j] += 1
    return Acceptance(
        num_drafts=len(drafted),
        num_draft_tokens=sum(slots),
        num_accepted_tokens=sum(accepted),
        num_accepted_tokens_per_pos=per_pos,
    )


def run_acceptance(run: Run) -> Acceptance:
    return count_acceptance([s for r in run.requests for s in r.steps], run.meta.num_speculative_tokens)


def count_as_vllm(steps: list[Step], k: int | None = None) -> Acceptance:
    """Totals as vLLM's own counters count them: padded placeholder slots are drafts, all rejected.

    A request admitted with one token left to compute is padded to 1 + k tokens (k=4 here) and
    samples one token; with one real step that accepted 2 of 4 drafts:
        count_acceptance: num_drafts 1, num_draft_tokens 4, accepted 2 -> acceptance length 3.0
        count_as_vllm:    num_drafts 2, num_draft_tokens 8, accepted 2 -> acceptance length 2.0
    """
    return count_acceptance(steps, k, padded=True)


def acceptance_length_interval(run: Run, level: float = 0.9, resamples: int = 2000,
                               seed: int = 0) -> tuple[float, float] | None:
    """Bootstrap interval of the run's mean acceptance length, resampling its requests.

    A request's steps are not independent (one hard answer rejects drafts all along), so whole
    requests are drawn with replacement and 1 + accepted / drafts is taken over each draw. Example:
    the draft model at k=3 on the 12 held-out chat prompts, 1.75 with a 90% interval of 1.61-1.91:
    too wide to tell it from 1.8. None when no request verified drafts.
    """
    per_request = [count_acceptance(r.steps) for r in run.requests]
    return bootstrap_acceptance_length([(a.num_drafts, a.num_accepted_tokens) for a in per_request],
                                       level=level, resamples=resamples, seed=seed)


def bootstrap_acceptance_length(request_counts: list[tuple[int, int]], level: float = 0.9, resamples: int = 2000,
                                seed: int = 0) -> tuple[float, float] | None:
    """Bootstrap interval of 1 + accepted / drafts from (num_drafts, num_accepted_tokens) per request.

    Whole requests are drawn with replacement. Two requests, (4 drafts, 4 accepted) and (4, 0): a
    draw of two is the first twice (1 + 8/8 = 2.0, a quarter of draws), the second twice (1.0, a
    quarter) or one of each (1 + 4/8 = 1.5, half), so the 90% interval is 1.0-2.0 around 1.5.
    Requests without drafts are left out; None if none is left.
    """
    counts = np.array([c for c in request_counts if c[0]], dtype=float)
    if len(counts) == 0:
        return None
    picks = np.random.default_rng(seed).integers(0, len(counts), size=(resamples, len(counts)))
    lengths = 1 + counts[picks, 1].sum(axis=1) / counts[picks, 0].sum(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(lengths, [tail, 1 - tail])
    return float(low), float(high)


def counters_acceptance(counters: SpecDecodeCounters) -> Acceptance:
    return Acceptance(**counters.model_dump())


def reported_acceptance(run: Run) -> Acceptance | None:
    """Totals from vLLM's per-request figures (--per-request-spec-decode-metrics), over the requests that
    sent them (those that finished); None if none did. What an untraced run has when the server died
    before its counters could be read.

    acceptance_histogram [1, 2, 0, 1] (k=3: 4 drafted steps that accepted 0, 1, 1 and 3 drafts):
        num_drafts = 4, num_accepted_tokens_per_pos = [2+0+1, 0+1, 1] = [3, 1, 1]
    """
    reported = [r.spec_decode_metrics for r in run.requests if r.spec_decode_metrics is not None]
    if not reported:
        return None
    width = max([run.meta.num_speculative_tokens, *(len(m.acceptance_histogram) - 1 for m in reported)])
    per_pos = [0] * width
    for m in reported:
        for accepted, steps in enumerate(m.acceptance_histogram):
            for j in range(accepted):
                per_pos[j] += steps
    return Acceptance(num_drafts=sum(sum(m.acceptance_histogram) for m in reported),
                      num_draft_tokens=sum(m.num_draft_tokens for m in reported),
                      num_accepted_tokens=sum(m.num_accepted_draft_tokens for m in reported),
                      num_accepted_tokens_per_pos=per_pos)


def request_acceptance_length(request: Request) -> float | None:
    """Mean tokens committed per drafted step of one request (1 + accepted / drafts)."""
    return count_acceptance(request.steps).mean_acceptance_length


def time_to_first_token_s(request: Request) -> float | None:
    return None if request.first_token_time_s is None else request.first_token_time_s - request.start_time_s


def time_per_output_token_s(request: Request) -> float | None:
    """Decode time per token after the first: (end - first token) / (n - 1)."""
    n = len(request.output_token_ids)
    if request.first_token_time_s is None or request.end_time_s is None or n < 2:
        return None
    return (request.end_time_s - request.first_token_time_s) / (n - 1)


def request_output_tokens_per_s(request: Request) -> float | None:
    """Output tokens / (end - sent): what one user sees."""
    if request.end_time_s is None or request.end_time_s <= request.start_time_s:
        return None
    return len(request.output_token_ids) / (request.end_time_s - request.start_time_s)


def output_tokens_per_s(run: Run) -> float | None:
    """All output tokens / wall time from the first request sent to the last one finished.

    4 requests of 100 tokens, sent at t=0, the last finishing at t=8 s -> 400 / 8 = 50 tokens/s.
    """
    ends = [r.end_time_s or r.first_token_time_s for r in run.requests]
    ends = [e for e in ends if e is not None]
    if not run.requests or not ends:
        return None
    span = max(ends) - min(r.start_time_s for r in run.requests)
    total = sum(len(r.output_token_ids) for r in run.requests)
    return total / span if span > 0 else None


def percentile(values: list[float | None], q: float) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.percentile(present, q)) if present else None


class Summary(Frozen):
    """What `python -m specviz check` prints; the provenance travels with the figures."""

    run_id: str
    complete: bool
    method: str | None
    num_speculative_tokens: int | None  # k; 0 for no drafting (None in sweep files written before run schema 4)
    concurrency: int
    prompt_set: str
    max_tokens: int
    num_requests: int
    num_output_tokens: int
    num_steps: int
    vllm_version: str
    platform: str
    device_name: str
    mean_acceptance_length: float | None  # figures.MEAN_ACCEPTANCE_LENGTH: over the passes that verified drafts
    draft_acceptance_rate: float | None
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_accepted_tokens_per_pos: list[int]
    acceptance_rate_per_pos: list[float]
    request_acceptance_lengths: list[float | None]
    tokens_per_target_pass: float | None = None  # figures.TOKENS_PER_TARGET_PASS: output tokens / every traced pass
    output_tokens_per_s: float | None
    request_output_tokens_per_s_p50: float | None
    time_to_first_token_s_p50: float | None
    time_to_first_token_s_p90: float | None
    time_per_output_token_s_p50: float | None
    time_per_output_token_s_p90: float | None
    vllm_counters: Acceptance | None = None  # the same figures from vLLM's own counters
    counters_match: bool | None  # the steps, counted as vLLM counts (padding included), equal its counters
    num_padded_steps: int = 0  # steps vLLM padded with placeholder drafts (a request joining with 1 token left)
    num_padded_draft_tokens: int = 0  # placeholder slots vLLM counted as drafted and rejected
    num_failed_requests: int = 0  # requests the server refused or failed (see each request's error)
    invalid_reason: str | None = None  # the invariant the recording broke, if it did
    trace_dropped_steps: int = 0  # engine steps the tracer's writer dropped (fell behind): the traces are incomplete
    num_untraced_tokens: int = 0  # output tokens no recorded step commits (dropped, or the server died first)


# Summary fields that are the run's own facts, under RunMeta's names: what it ran and where.
SUMMARY_META_FIELDS = ("run_id", "complete", "method", "num_speculative_tokens", "concurrency", "prompt_set",
                       "max_tokens", "vllm_version", "platform", "device_name", "invalid_reason", "trace_dropped_steps")


def summarize(run: Run) -> Summary:
    acc = run_acceptance(run)
    all_steps = [s for r in run.requests for s in r.steps]
    padded = [s for s in all_steps if s.num_padded_drafts]
    counters = counters_acceptance(run.meta.vllm_counters) if run.meta.vllm_counters else None
    traced = run.meta.traced
    # Without the tracer the steps are unknown: vLLM's counters are the acceptance figures, or, when the
    # server died before they were read, vLLM's per-request figures of the requests that finished.
    best = acc if traced else counters or reported_acceptance(run) or acc
    ttft = [time_to_first_token_s(r) for r in run.requests]
    tpot = [time_per_output_token_s(r) for r in run.requests]
    return Summary(
        **{name: getattr(run.meta, name) for name in SUMMARY_META_FIELDS},
        **best.model_dump(),  # the totals and the figures computed from them
        num_requests=len(run.requests),
        num_output_tokens=sum(len(r.output_token_ids) for r in run.requests),
        num_steps=sum(len(r.steps) for r in run.requests),
        request_acceptance_lengths=[request_acceptance_length(r) for r in run.requests],
        tokens_per_target_pass=figures.tokens_per_target_pass(
            sum(len(r.output_token_ids) for r in run.requests if r.steps), len(all_steps)) if traced else None,
        output_tokens_per_s=output_tokens_per_s(run),
        request_output_tokens_per_s_p50=percentile([request_output_tokens_per_s(r) for r in run.requests], 50),
        time_to_first_token_s_p50=percentile(ttft, 50),
        time_to_first_token_s_p90=percentile(ttft, 90),
        time_per_output_token_s_p50=percentile(tpot, 50),
        time_per_output_token_s_p90=percentile(tpot, 90),
        vllm_counters=counters,
        counters_match=(counters == count_as_vllm(all_steps, run.meta.num_speculative_tokens))
        if (counters is not None and traced) else None,
        num_padded_steps=len(padded),
        num_padded_draft_tokens=sum(s.num_padded_drafts for s in padded),
        num_failed_requests=sum(1 for r in run.requests if r.error),
        num_untraced_tokens=sum(r.num_untraced_tokens for r in run.requests),
    )


def incomplete_trace_note(run: Run) -> tuple[str, bool] | None:
    """(what is missing from the traces and how it moves the counters cross-check, whether the drops explain it).

    None when the traces are whole. The steps that are left are a subset of what vLLM counted, so each of the
    counters is at least the steps' count; the difference is what the missing steps drafted and accepted:
        the tracer dropped 3 steps; counters 120 drafts / 360 draft tokens / 200 accepted, steps 112 / 336 / 185
        -> "... vLLM's counters count 8 drafts, 24 draft tokens and 15 accepted tokens more than the steps", True
    """
    untraced = sum(r.num_untraced_tokens for r in run.requests)
    dropped = run.meta.trace_dropped_steps
    if not dropped and not untraced:
        return None
    what = (f"the tracer's writer fell behind and dropped {dropped} engine step{'s' if dropped != 1 else ''}"
            if dropped else "the server died before the tracer wrote its last steps")
    note = (f"the run's traces are INCOMPLETE: {what}, so {untraced} output token{'s' if untraced != 1 else ''} of "
            f"{sum(1 for r in run.requests if r.num_untraced_tokens)} request(s) have no step")
    counters = run.meta.vllm_counters
    if counters is None or not run.meta.traced:
        return note, True
    steps = count_as_vllm([s for r in run.requests for s in r.steps], run.meta.num_speculative_tokens)
    more = [counters.num_drafts - steps.num_drafts, counters.num_draft_tokens - steps.num_draft_tokens,
            counters.num_accepted_tokens - steps.num_accepted_tokens]
    per_pos = [c - s for c, s in zip(counters.num_accepted_tokens_per_pos, steps.num_accepted_tokens_per_pos)]
    explained = min(more + per_pos, default=0) >= 0
    if explained:
        note += (f"; vLLM's counters count {more[0]} drafts, {more[1]} draft tokens and {more[2]} accepted tokens "
                 "more than the steps: what the missing steps verified")
    else:
        note += (f"; and the steps count more than vLLM's counters somewhere (counters minus steps: {more[0]} drafts, "
                 f"{more[1]} draft tokens, {more[2]} accepted tokens, per position {per_pos}), which missing steps "
                 "cannot explain")
    return note, explained


class StepFigures(Frozen):
    """What the tuner needs from one run: how many drafts each step accepted, and what a step cost.

    A run at k=3 whose drafted steps accepted 0, 3, 1, 3 drafts, plus 2 steps without drafts:
        accepted_histogram = [1, 1, 0, 2]   (steps that accepted exactly 0, 1, 2, 3 drafts)
        num_steps_without_drafts = 2
    Engine steps are counted once however many requests they served:
        engine_step_time_s = (time of last step - time of first step) / (engine steps - 1)
    """

    accepted_histogram: list[int]  # index a: drafted request-steps that accepted exactly a drafts
    num_steps_without_drafts: int  # request-steps that verified no drafts (prefill, or nothing proposed)
    num_engine_steps: int  # distinct engine steps (target passes) over the whole run
    engine_step_time_s: float | None  # mean seconds per engine step while the run was in flight


def step_figures(run: Run) -> StepFigures:
    k = run.meta.num_speculative_tokens or 0
    steps = [s for r in run.requests for s in r.steps]
    # k + 1 bins; an invalid run read as recorded may draft more than k, and claim more accepted than drafted
    accepted = [min(s.num_accepted, s.num_drafts) for s in steps if s.draft_token_ids]
    histogram = [0] * (max([k, *accepted]) + 1)
    for n in accepted:
        histogram[n] += 1
    engine_steps = sorted({(s.engine_step, s.time_s) for s in steps})
    step_time = None
    if len(engine_steps) > 1:
        step_time = (engine_steps[-1][1] - engine_steps[0][1]) / (len(engine_steps) - 1)
    return StepFigures(
        accepted_histogram=histogram,
        num_steps_without_drafts=sum(1 for s in steps if not s.draft_token_ids),
        num_engine_steps=len(engine_steps),
        engine_step_time_s=step_time,
    )


def counted_step_figures(summary: Summary) -> StepFigures:
    """StepFigures of a run without the tracer, from its acceptance counts (vLLM's counters).

    At k=3, 10 drafted steps with accepted tokens per position [6, 4, 1] (11 accepted): steps that
    accepted exactly a drafts number per_pos[a-1] - per_pos[a], so the histogram is
    [10-6, 6-4, 4-1, 1] = [4, 2, 3, 1]. With 40 output tokens, the drafted steps committed
    10 + 11 = 21 of them, so 40 - 21 = 19 steps went without drafts (prefill, nothing proposed).
    Engine steps and their time are unknown without the tracer: 0 and None.
    """
    k = summary.num_speculative_tokens or 0
    per_pos = (list(summary.num_accepted_tokens_per_pos) + [0] * k)[:k]
    bounds = [summary.num_drafts, *per_pos, 0]
    histogram = [max(0, bounds[a] - bounds[a + 1]) for a in range(k + 1)]
    committed_by_drafted = summary.num_drafts + summary.num_accepted_tokens
    return StepFigures(
        accepted_histogram=histogram,
        num_steps_without_drafts=max(0, summary.num_output_tokens - committed_by_drafted),
        num_engine_steps=0,
        engine_step_time_s=None,
    )
