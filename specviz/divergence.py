"""Where two runs of the same prompts part, and whether the target's own numbers explain it.

With greedy sampling the target verifies every token, so a speculative run's output is the target's
own choice at every position and must equal the baseline's, up to numerics: a verify step scores
k + 1 positions in one pass where the baseline scores one, and that other shape can round the
target's scores differently. When its two best candidates are closer than that rounding, either may
win. `compare_runs(baseline, run)` pairs the requests by prompt and says, per request:

    identical       the same output tokens
    tie             parts at token t, where the baseline wrote A and the run B, and in both runs the
                    target's gap between A and B is within what rounding explains: exactly zero, at
                    most one spacing step of the dtype at the size of those scores (rounding_step:
                    two scores equal before rounding can round one step apart), or no more than the
                    same scores moved between the runs on the text both shared (the tokens before t).
                    However many other candidates tied with them: only A and B are judged.
    not_a_tie       parts at t, both runs scored both A and B, and one run's target preferred its
                    token by a clear margin (more than that) that the other run contradicts; or a
                    run wrote a token its own target scored lower: drafting changed the choice
    unexplained     parts at t, but the evidence is missing: a run recorded no logprobs, or one run's
                    top N does not hold the token the other wrote ("not explained: token outside the
                    recorded top N"; a three-way tie recorded with top 2 looks like this). Not an
                    error, and not proof of losslessness: `specviz compare` exits 3 for it
    not_applicable  sampled (temperature > 0): outputs are draws; per-token comparison does not apply

Worked example, measured (sample_runs/showcase-bf16-xeon-k8-c4, the demo model in bfloat16, ngram
k=8 at concurrency 4): at token 12 the baseline wrote " indoor", preferring it to " gardening" by
0.125; the ngram run's target preferred " gardening" by 0.125 and wrote it. The preference moved by
0.125 + 0.125 = 0.25. Both margins are whole multiples of 0.125, the spacing of bfloat16 numbers
between 16 and 32, and each is one such step: two scores equal before rounding, a tie. The same
margins in a float32 run would be a change of the target's choice.

Worked example from the issue (bfloat16, 28 held-out prompts): the baseline wrote 827, its top two
827 and 10348 at -1.6245 each; the run wrote 253, its top two 253 and 827 at -1.6472 each. With
top 2 recorded the baseline's score of 253 is unknown: "not explained: token outside the recorded
top 2". With top 5 the baseline also has 253 at -1.6245: both gaps are 0, a (three-way) tie.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .config import DEFAULT_LOGPROBS
from .runfile import Request, Run, TokenCandidates

Verdict = Literal["identical", "tie", "not_a_tie", "unexplained", "not_applicable"]
EXPLAINED: tuple[Verdict, ...] = ("identical", "tie", "not_applicable")  # nothing to report as an error


@dataclass(frozen=True)
class Divergence:
    """The first output position where two requests differ, with the target's scores there in both runs."""

    position: int  # 0-based output token index
    baseline_token: int
    run_token: int
    baseline_logprobs: tuple[float | None, float | None] | None  # (baseline's token, run's token) in the baseline
    run_logprobs: tuple[float | None, float | None] | None  # the same two tokens, as the run's target scored them
    prefix_move: float | None  # the largest move of a candidate margin between the runs on tokens < position

    @property
    def flip(self) -> float | None:
        """How far the target's preference between the two tokens moved from one run to the other (nats).

        baseline: A -0.58, B -0.70 (A by 0.125); run: A -0.64, B -0.64 (B by 0.0) -> 0.125.
        None when either run did not report both tokens.
        """
        if not (self.baseline_logprobs and self.run_logprobs) or None in (*self.baseline_logprobs, *self.run_logprobs):
            return None
        (a_base, b_base), (a_run, b_run) = self.baseline_logprobs, self.run_logprobs
        return (a_base - b_base) + (b_run - a_run)


@dataclass(frozen=True)
class RequestComparison:
    prompt_index: int  # the request's index in the run
    request_id: str
    verdict: Verdict
    divergence: Divergence | None = None
    baseline_text: str = ""  # the two tokens at the divergence, decoded, when the runs carry their texts
    run_text: str = ""
    reason: str = ""  # in plain words: "a tie in bfloat16: ' return' and ' total' scored the same"
    detail: str = ""  # the numbers behind it: "the baseline preferred ' return' by 0.000, the run ..."

    def marker(self) -> str:
        """The hover text of the token where the outputs part, with both runs' scores of the two candidates.

        "the outputs part here: the baseline wrote ' cart' (logprob -0.580; ' items' -0.705), this run
        ' items' (-0.640; ' cart' -0.640)"
        """
        d = self.divergence
        if d is None:
            return ""
        a, b = _quote(self.baseline_text), _quote(self.run_text)
        if d.baseline_logprobs is None or d.run_logprobs is None:
            return f"the outputs part here: the baseline wrote {a}, this run {b} (no logprobs recorded)"
        return (f"the outputs part here: the baseline wrote {a} (logprob {_lp(d.baseline_logprobs[0])}; {b} "
                f"{_lp(d.baseline_logprobs[1])}), this run {b} ({_lp(d.run_logprobs[1])}; {a} "
                f"{_lp(d.run_logprobs[0])})")

    def headline(self) -> str:
        """One line a stakeholder reads in one breath.

        'identical output (320 tokens)', or "outputs part at token 63: a tie in bfloat16: ' return' and
        ' total' scored the same".
        """
        if self.verdict in ("identical", "not_applicable"):
            return self.reason
        return f"outputs part at token {self.divergence.position + 1}: {self.reason}"

    def full(self) -> str:
        """The headline with the numbers behind it, for the command line and the hover texts."""
        return f"{self.headline()} ({self.detail})" if self.detail else self.headline()


@dataclass(frozen=True)
class RunComparison:
    requests: list[RequestComparison]
    dtype: str | None
    unmatched: int  # requests of the run with no baseline request of the same prompt

    @property
    def identical(self) -> int:
        return sum(c.verdict == "identical" for c in self.requests)

    @property
    def ties(self) -> int:
        return sum(c.verdict == "tie" for c in self.requests)

    @property
    def all_explained(self) -> bool:
        return all(c.verdict in EXPLAINED for c in self.requests)

    def summary(self) -> str:
        """'2 of 2 requests identical' / '0 of 2 identical; 2 part at a tie in bfloat16' / '... 1 NOT a tie'."""
        n = len(self.requests)
        if n == 0:
            return "no request of the run has a baseline request with the same prompt"
        if all(c.verdict == "not_applicable" for c in self.requests):
            return self.requests[0].reason
        words = [f"{self.identical} of {n} requests identical"]
        if self.ties:
            words.append(f"{self.ties} part at a tie{_in(self.dtype)}")
        if bad := sum(c.verdict == "not_a_tie" for c in self.requests):
            words.append(f"{bad} part where the target's choice was clear (NOT a tie)")
        if unknown := sum(c.verdict == "unexplained" for c in self.requests):
            words.append(f"{unknown} part where the recorded logprobs cannot say why (not explained)")
        return "; ".join(words)

    @property
    def exit_code(self) -> int:
        """What `specviz compare` exits with: 1 if any request parts where the target's choice was clear
        (NOT a tie), else 3 if any parts without the evidence to say why (not explained), else 0."""
        if any(c.verdict == "not_a_tie" for c in self.requests):
            return 1
        return 3 if any(c.verdict == "unexplained" for c in self.requests) else 0


def _in(dtype: str | None) -> str:
    return f" in {dtype}" if dtype else ""


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first index where a and b differ, counting a shorter list's end as a difference; None if equal.

    first_difference([1, 2, 3], [1, 5, 3]) -> 1;  first_difference([1, 2], [1, 2, 3]) -> 2
    """
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if i is None and len(a) != len(b):
        return min(len(a), len(b))
    return i


def margin_moves(base: list[TokenCandidates], run: list[TokenCandidates], upto: int) -> list[float]:
    """How much the target's margin between two candidates moved between the runs, at each position < upto.

    At a position both runs reported (top1, top2) = (5, 9): baseline -0.1, -2.4 (margin 2.3), run
    -0.1, -2.3 (margin 2.2) -> a move of 0.1. Only pairs both runs reported count.
    """
    moves = []
    for b, r in zip(base[:upto], run[:upto]):
        shared = [t for t in b.token_ids if r.logprob_of(t) is not None]
        for i, x in enumerate(shared):
            for y in shared[i + 1:]:
                moves.append(abs((b.logprob_of(x) - b.logprob_of(y)) - (r.logprob_of(x) - r.logprob_of(y))))
    return moves


def compare_requests(base: Request, run: Request, *, greedy: bool, dtype: str | None, index: int = 0,
                     decode=None) -> RequestComparison:
    """Classify one pair of requests with the same prompt (see the module docstring)."""
    n = len(run.output_token_ids)
    if not greedy:
        return RequestComparison(index, run.request_id, "not_applicable",
                                 reason="sampled run (temperature > 0): its tokens are draws, so token-by-token "
                                        "comparison with the baseline does not apply")
    at = first_difference(base.output_token_ids, run.output_token_ids)
    if at is None:
        return RequestComparison(index, run.request_id, "identical", reason=f"identical output ({n} tokens)")
    if at >= min(len(base.output_token_ids), len(run.output_token_ids)):
        shorter = "baseline" if len(base.output_token_ids) < n else "run"
        return RequestComparison(
            index, run.request_id, "identical",
            reason=f"identical for {at} tokens, where the {shorter} stopped (it was cut off or failed)")
    a, b = base.output_token_ids[at], run.output_token_ids[at]
    texts = (decode(a), decode(b)) if decode else (_texts_at(base, at, a), _texts_at(run, at, b))
    if base.top_logprobs is None or run.top_logprobs is None:
        missing = "the baseline" if base.top_logprobs is None else "the run"
        d = Divergence(at, a, b, None, None, None)
        return RequestComparison(index, run.request_id, "unexplained", d, *texts,
                                 reason=f"not explained: {missing} recorded no logprobs (record with --logprobs 5)")
    cb, cr = base.top_logprobs[at], run.top_logprobs[at]
    moves = margin_moves(base.top_logprobs, run.top_logprobs, at)
    d = Divergence(at, a, b, (cb.logprob_of(a), cb.logprob_of(b)), (cr.logprob_of(a), cr.logprob_of(b)),
                   max(moves) if moves else None)
    shown = f"{_quote(texts[0])} and {_quote(texts[1])}"
    for who, cands, other, other_text in (("the baseline", cb, b, texts[1]), ("the run", cr, a, texts[0])):
        if cands.logprob_of(other) is None:  # no evidence either way: the token may have tied just below the top N
            n_top = len(cands.token_ids)
            return RequestComparison(
                index, run.request_id, "unexplained", d, *texts,
                reason=f"not explained: token outside the recorded top {n_top}",
                detail=(f"{who}'s top {n_top} there does not hold {_quote(other_text)}, which the other run wrote, "
                        f"so its score is unknown: a tie of three or more candidates looks like this; record with "
                        f"--logprobs {max(DEFAULT_LOGPROBS, n_top + 1)} or more to tell"))
    gap_b, gap_r = d.baseline_logprobs[0] - d.baseline_logprobs[1], d.run_logprobs[1] - d.run_logprobs[0]
    for who, gap, wrote, preferred in (("the baseline", gap_b, texts[0], texts[1]),
                                       ("the run", gap_r, texts[1], texts[0])):
        if gap < -EXACT:  # a greedy run writes its target's best token; this one did not
            return RequestComparison(
                index, run.request_id, "not_a_tie", d, *texts,
                reason=(f"NOT a tie: {who} wrote {_quote(wrote)} although its own target scored {_quote(preferred)} "
                        f"higher by {-gap:.3f}: not the target's greedy choice (sampled, or a broken path)"))
    scored = f"the baseline preferred {_quote(texts[0])} by {gap_b:.3f}, the run {_quote(texts[1])} by {gap_r:.3f}"
    step = rounding_step([gap_b, gap_r, *candidate_margins(cb), *candidate_margins(cr)], dtype)
    prefix = d.prefix_move or 0.0
    allowed = max(step, prefix)
    if gap_b <= allowed + EXACT and gap_r <= allowed + EXACT:
        exact = "scored the same" if max(gap_b, gap_r) <= EXACT else "scored within rounding"
        tied = max(tied_candidates(cb, allowed), tied_candidates(cr, allowed))
        many = f" ({tied} candidates tied)" if tied > 2 else ""
        if max(gap_b, gap_r) <= EXACT:
            why = "both runs' targets scored the two exactly alike"
        elif step >= prefix:
            why = f"two scores equal before rounding to {dtype} can round {step:.3f} apart here"
        else:
            why = f"on the {at} tokens before, the same scores moved by up to {prefix:.3f} between the runs"
        return RequestComparison(index, run.request_id, "tie", d, *texts,
                                 reason=f"a tie{_in(dtype)}: {shown} {exact}{many}", detail=f"{scored}; {why}")
    clear, gap = ("the baseline", gap_b) if gap_b > allowed + EXACT else ("the run", gap_r)
    return RequestComparison(
        index, run.request_id, "not_a_tie", d, *texts,
        reason=f"NOT a tie: drafting changed the target's choice between {shown}",
        detail=(f"{scored}: {clear}'s margin of {gap:.3f} is more than rounding{_in(dtype)} explains here "
                f"({step:.3f}) or the same scores moved on the {at} tokens before ({prefix:.3f}), and the other "
                "run wrote the other token"))


EXACT = 1e-6  # logprobs closer than this are equal (they are float32 sums of exactly rounded logits)


def candidate_margins(cands: TokenCandidates) -> list[float]:
    """The gaps between a run's best candidate and each other one it recorded: more margins to read the
    dtype's spacing from. (-1.5, -1.5, -1.625, -1.75) -> [0.0, 0.125, 0.25]."""
    return [cands.logprobs[0] - lp for lp in cands.logprobs[1:]]


def tied_candidates(cands: TokenCandidates, allowed: float) -> int:
    """How many recorded candidates lie within `allowed` of the best: (-1.6245, -1.6245, -1.6245, -2.0), 0 -> 3."""
    return sum(1 for lp in cands.logprobs if cands.logprobs[0] - lp <= allowed + EXACT)


# The largest spacing of a dtype's numbers at logits below 128 (2^7): 2^(6 - mantissa bits).
# Language models' logits stay well below that (the demo model's top ones are 10-30).
LARGEST_STEP = {"bfloat16": 2.0 ** (6 - 7), "float16": 2.0 ** (6 - 10), "float32": 2.0 ** (6 - 23)}


def rounding_step(margins: list[float], dtype: str | None) -> float:
    """The spacing of the target's scores at a position, read from the margins the runs reported there.

    Logits in bfloat16 are whole multiples of the spacing of bfloat16 numbers at their size (0.125
    between 16 and 32), and so are the margins between two of them: margins 0.125 and 0.0 -> 0.125;
    0.0625 and 0.125 -> 0.0625. Two logits equal before rounding can round one step apart, so a
    gap of one step is rounding. Capped by the dtype (LARGEST_STEP): a float32
    run's margins never make a step worth counting; unknown dtype -> 0. All margins 0 -> 0.
    """
    cap = LARGEST_STEP.get(dtype or "", 0.0)
    nonzero = [abs(m) for m in margins if abs(m) > 1e-6]
    if not nonzero or cap == 0.0:
        return 0.0
    step = cap
    while step > 2.0 ** -12 and any(abs(m / step - round(m / step)) > 1e-4 for m in nonzero):
        step /= 2
    return step if all(abs(m / step - round(m / step)) <= 1e-4 for m in nonzero) else 0.0


def _texts_at(req: Request, position: int, token_id: int) -> str:
    """The decoded text of the output token at `position`, from the steps' texts when recorded."""
    seen = 0
    for step in req.steps:
        n = len(step.committed_token_ids)
        if seen + n > position and step.sampled_texts:
            return step.sampled_texts[position - seen]
        seen += n
    return f"token {token_id}"


def _lp(value: float | None) -> str:
    return "not in its top candidates" if value is None else f"{value:.3f}"


def _quote(text: str) -> str:
    return repr(text)  # quotes show a token's leading space: ' cart'


def is_greedy(run: Run) -> bool:
    return (run.meta.sampling.get("temperature") or 0.0) == 0.0


def shared_dtype(baseline: Run, run: Run) -> str | None:
    """The dtype both runs' targets ran in; None if unknown or if they differ."""
    return run.meta.dtype if run.meta.dtype == baseline.meta.dtype else None


def compare_runs(baseline: Run, run: Run, decode=None) -> RunComparison:
    """Compare every request of `run` with the baseline's request of the same prompt (see the module docstring)."""
    greedy = is_greedy(baseline) and is_greedy(run)
    dtype = shared_dtype(baseline, run)
    by_prompt = {r.prompt: r for r in baseline.requests if r.output_token_ids}
    out, unmatched = [], 0
    for i, req in enumerate(run.requests):
        base = by_prompt.get(req.prompt)
        if base is None or not req.output_token_ids:
            unmatched += 1
            continue
        out.append(compare_requests(base, req, greedy=greedy, dtype=dtype, index=i, decode=decode))
    return RunComparison(requests=out, dtype=dtype, unmatched=unmatched)
