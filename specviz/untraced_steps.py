"""Verify steps without the tracer: vLLM's own per-step arrays, placed on the streamed tokens.

A server started with `--per-request-spec-decode-metrics detailed` sends, on each request's final
usage chunk, two arrays (vllm/v1/metrics/stats.py, RequestSpecDecodeMetrics; filled in the V1
scheduler's update_from_output):

    per_step_accepted[i]  drafts the target accepted at the request's i-th verify step
    per_step_drafted[i]   drafts vLLM counted at that step (grammar-invalid drafts left out;
                          placeholder slots vLLM padded the step with counted in, all rejected)

That is every step that *scheduled drafts*, under any scheduler class, async scheduling and model
runner. It says nothing of the draft texts, and it leaves out the steps that scheduled none (the
prefill, and an ngram step that found no match). The stream adds the committed tokens: while the
client keeps up, one chunk per engine step; a client that reads slower than the engine steps gets
several steps merged into one chunk. A verify step commits accepted + 1 tokens (the accepted drafts,
then the target's correction or bonus token), a step without drafts commits 1, and the last step
of a request may commit fewer (it stopped inside the step; vLLM still counts those drafts accepted).

Placing the arrays on the stream is a tiling: cut the output into steps, in order, such that the
verify steps take accepted + 1 tokens each (in array order), the others 1 token, and no step
straddles two chunks. The first step is the prefill (no drafts), or a step vLLM padded (accepted 0,
drafted k: a prompt cached up to one token past a block boundary). Worked example, k=3:

    chunks (token counts)   [1, 3, 4, 1]          arrays accepted [2, 3, 0], drafted [3, 3, 3]
    tiling                  1 = prefill           3 = verify 1 (2 accepted + the target's correction)
                            4 = verify 2 (3 accepted + bonus)
                            1 = verify 3 (0 accepted: the target's correction; 3 drafts rejected)

Only one tiling exists, so every step is placed exactly. Two things make several possible:

    chunks [1, 3, 1, 1]     accepted [2, 0], drafted [3, 3]     (no-draft steps: 6 - (3 + 1) = 2)
    the last two 1-token chunks hold a verify step that accepted nothing and a step without drafts,
    in an order the arrays cannot tell -> verify 2 is approximate (verify 1 stays exact);

    chunks [1, 5]           accepted [1, 1], drafted [2, 2]     (merged: the client lagged)
    the 5 tokens are verify 1 (2) + verify 2 (2) + a step without drafts (1), in some order;

    a request that stopped (max_tokens, a stop token) inside its last verify step committed fewer
    than accepted + 1 tokens there: chunks [1, 4, 2] with accepted [3, 3] end in a cut step of 2.

A stream whose chunks fit the arrays one step each is read that way (the sums prove each chunk is
one step: chunk size = accepted + 1); only when no such reading exists has the client fallen behind,
and then chunks may hold several steps. Without that rule the last chunk of almost every request
that stopped by itself would be ambiguous (a verify step, or a step without drafts and a cut one).

A model drafter (draft_model, eagle, eagle3) drafts at every step after the prefill, so for its runs
the prefill is read as the only step without drafts when the stream fits that; otherwise (a
preempted request recomputes without drafts) the general rules apply.

`place_steps` finds every tiling at once (which start each verify step can take in some tiling),
shows one of them, and marks a step exact when it can start at one place only. The draft texts are
never invented: a rejected draft is a count, shown text-less.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from .base import Frozen
from .metrics import Acceptance
from .runfile import Request, RequestSpecDecodeMetrics

Placement = Literal["exact", "approximate", "unaligned", "no arrays"]
# The most places (verify steps placed, token reached) place_steps explores for one request, so that a file cannot
# make a visitor's page slow: 2,000 verify steps each merged with a step without drafts in one chunk reach about
# 2,000 x 2,000 (21 s on a busy 2-core CPU); one step per chunk reaches about one place per chunk.
PLACEMENT_BUDGET = 150_000
# Drafters that run a model at every decode step: after the prefill every step of theirs verifies drafts
# (a preempted request that resumes recomputes without drafts, which the tiling then finds by itself)
MODEL_DRAFTERS = ("draft_model", "eagle", "eagle3")
# Finish reasons the engine decides on a step's output, and so can cut inside a step (an abort cannot)
STOPPED_BY_THE_ENGINE = ("length", "stop")


class UntracedStep(Frozen):
    """One step of a request as the arrays and the stream show it (no draft texts)."""

    verify_index: int | None  # its index in vLLM's per-step arrays; None for a step that verified no drafts
    num_drafts: int  # as vLLM counts them (padded slots included); 0 for a step without drafts
    num_accepted: int
    token_ids: list[int]  # what it committed, as placed in the stream
    token_texts: list[str]  # decoded token_ids when the run carries them, else the ids as text
    chunk_index: int  # the stream chunk that carried it
    time_s: float  # when that chunk reached the client
    exact: bool  # every tiling puts this step on these tokens

    @property
    def num_rejected(self) -> int:
        """Drafts not accepted: the first rejected one (replaced by the correction) and the discarded tail."""
        return self.num_drafts - self.num_accepted

    @property
    def all_accepted(self) -> bool:
        return self.num_drafts > 0 and self.num_accepted == self.num_drafts

    @property
    def truncated(self) -> bool:
        """The request stopped inside this step: it committed fewer than accepted + 1 tokens."""
        return self.verify_index is not None and len(self.token_ids) < self.num_accepted + 1


class UntracedSteps(Frozen):
    """A request's steps rebuilt from vLLM's arrays and its stream, with how sure the placement is."""

    placement: Placement
    why: str  # why the placement is what it is, one sentence
    per_step_accepted: list[int]
    per_step_drafted: list[int]
    steps: list[UntracedStep]  # one tiling of the output (empty when unaligned or without arrays)
    num_exact_verify_steps: int  # verify steps that can sit at one place only
    num_merged_chunks: int  # chunks that carry more than one step in the tiling shown
    one_step_per_chunk: bool  # the chunks fit the arrays one step each, so they were read that way
    only_prefill_without_drafts: bool = False  # a model drafter's stream fitted with its prefill the only such step

    @property
    def num_verify_steps(self) -> int:
        return len(self.per_step_accepted)


def has_step_arrays(req: Request) -> bool:
    """True when vLLM sent this request's per-step arrays (the server ran with `detailed`).

    vLLM leaves the arrays out when they are empty, so a request that verified no drafts
    (num_spec_steps 0) has them, empty, whichever level the server ran at.
    """
    m = req.spec_decode_metrics
    return m is not None and ((m.per_step_accepted is not None and m.per_step_drafted is not None)
                              or m.num_spec_steps == 0)


def arrays_acceptance(metrics: RequestSpecDecodeMetrics, k: int | None = None) -> Acceptance:
    """One request's acceptance from its arrays, as vLLM counts it (padded slots are rejected drafts).

    accepted [2, 0, 3], drafted [3, 3, 3] -> num_drafts 3, num_draft_tokens 9, accepted 5,
    per position [2, 2, 1] (steps that accepted more than j drafts), acceptance length 1 + 5/3 = 2.67.
    """
    accepted = metrics.per_step_accepted or []
    drafted = metrics.per_step_drafted or []
    width = k if k is not None else max(drafted, default=0)
    return Acceptance(num_drafts=len(accepted), num_draft_tokens=sum(drafted), num_accepted_tokens=sum(accepted),
                      num_accepted_tokens_per_pos=[sum(1 for a in accepted if a > j) for j in range(width)])


def place_steps(req: Request, k: int | None = None, method: str | None = None) -> UntracedSteps:
    """The request's verify steps from vLLM's arrays, placed on its stream (see the module docstring).

    `k` is num_speculative_tokens: a first step that accepted 0 of k drafts may be one vLLM padded;
    with k unknown, the largest count drafted stands in for it. With a `method` in MODEL_DRAFTERS
    the prefill is taken as the only step without drafts when the stream fits that: it rules out
    reading "prefill, then a verify step that accepted nothing" as "a padded first step, then a step
    without drafts", which a model drafter does not make.
    """
    if not has_step_arrays(req):
        return _without_steps("no arrays", "no per-step arrays: start vLLM with --per-request-spec-decode-metrics "
                              "detailed", [], [])
    m = req.spec_decode_metrics
    accepted, drafted = list(m.per_step_accepted or []), list(m.per_step_drafted or [])
    if len(accepted) != len(drafted) or any(a > d for a, d in zip(accepted, drafted)):
        return _without_steps("unaligned", "vLLM's arrays disagree with each other (lengths, or more accepted "
                              "than drafted)", accepted, drafted)
    sizes = [len(c.token_ids) for c in req.stream_chunks]
    if not sizes:
        return _without_steps("unaligned", "the request streamed no tokens", accepted, drafted)
    k = k if k is not None else max(drafted, default=0)
    rules = dict(first_may_be_padded=bool(accepted) and accepted[0] == 0 and drafted[0] == k,
                 may_stop_inside_last=req.finish_reason in STOPPED_BY_THE_ENGINE)
    # the strictest reading that fits: one step per chunk before merged chunks (the client fell behind)
    readings = [(per_chunk, only_prefill) for per_chunk in (True, False)
                for only_prefill in ((True, False) if method in MODEL_DRAFTERS else (False,))]
    for one_step_per_chunk, only_prefill in readings:
        try:
            tiling = _Tiling(sizes, accepted, one_step_per_chunk=one_step_per_chunk,
                             only_prefill_without_drafts=only_prefill, **rules)
        except _TooLong:
            return _without_steps("unaligned", f"too long to place on the stream: its {len(accepted):,} verify steps "
                                  f"in {len(sizes):,} chunks can sit at more than specviz's {PLACEMENT_BUDGET:,} "
                                  "places per request (the counts per step are vLLM's own, shown without their "
                                  "tokens)", accepted, drafted)
        if tiling.feasible():
            break
    else:
        return _without_steps(
            "unaligned", f"the {sum(sizes)} streamed tokens in {len(sizes)} chunks cannot be cut into these "
            f"{len(accepted)} verify steps (accepted + 1 tokens each) and 1-token steps: the stream is cut "
            "short, or the server changed tokens after the engine", accepted, drafted)
    starts = tiling.verify_starts()
    shown = tiling.one_tiling()
    steps = _steps_of(req, shown, accepted, drafted, starts)
    exact = sum(1 for s in starts if len(s) == 1)
    merged = sum(1 for n in _steps_per_chunk(steps, len(sizes)) if n > 1)
    placement: Placement = "exact" if exact == len(accepted) else "approximate"
    why = _why(placement, len(accepted), exact, merged, len(steps), one_step_per_chunk)
    if only_prefill:
        why += f" ({method} drafts at every step after the prefill)"
    return UntracedSteps(placement=placement, why=why, per_step_accepted=accepted, per_step_drafted=drafted, steps=steps,
                         num_exact_verify_steps=exact, num_merged_chunks=merged,
                         one_step_per_chunk=one_step_per_chunk, only_prefill_without_drafts=only_prefill)


def _without_steps(placement: Placement, why: str, accepted: list[int], drafted: list[int]) -> UntracedSteps:
    return UntracedSteps(placement=placement, why=why, per_step_accepted=accepted, per_step_drafted=drafted,
                         steps=[], num_exact_verify_steps=0, num_merged_chunks=0, one_step_per_chunk=False)


def _why(placement: Placement, n_verify: int, exact: int, merged: int, n_steps: int, one_per_chunk: bool) -> str:
    no_draft = n_steps - n_verify
    how = ("each stream chunk is one step (its size is accepted + 1, or 1 for a step without drafts)" if one_per_chunk
           else f"the client fell behind: {merged} chunks merge several steps")
    if placement == "exact":
        return f"{how}, and the {n_verify} verify steps and {no_draft} steps without drafts fit one way only"
    causes = []
    if not one_per_chunk:
        causes.append("the order of the steps inside a merged chunk is not in vLLM's arrays")
    if no_draft:
        causes.append("steps that drafted nothing are not in vLLM's arrays, so a 1-token chunk can be such a step "
                      "or a verify step that accepted nothing")
    return (f"{how}, but {n_verify - exact} of {n_verify} verify steps could sit at more than one "
            f"place: " + "; ".join(causes or ["the first step may be one vLLM padded"]) + ". The counts per step "
            "are exact; the tokens shown for those steps are one possibility, marked ≈")


class _TooLong(Exception):
    """The tiling would place more than PLACEMENT_BUDGET states."""


class _Tiling:
    """Every way to cut the output into steps (see the module docstring), by reachability both ways.

    A state (i, p): the first i verify steps are placed and the steps so far end at token p. From it
    a step without drafts takes 1 token, verify step i takes accepted[i] + 1; no step may cross a
    chunk boundary. The last step may take fewer tokens when the request stopped inside it. States
    are kept per i as sets of p, so the work is (verify steps) x (steps without drafts), not N².
    """

    def __init__(self, sizes: Sequence[int], accepted: Sequence[int], *, first_may_be_padded: bool,
                 may_stop_inside_last: bool, one_step_per_chunk: bool, only_prefill_without_drafts: bool) -> None:
        self.one_step_per_chunk = one_step_per_chunk
        self.only_prefill_without_drafts = only_prefill_without_drafts
        self.n_tokens = sum(sizes)
        self.accepted = accepted
        self.m = len(accepted)
        self.first_may_be_padded = first_may_be_padded
        self.may_stop_inside_last = may_stop_inside_last
        # chunk_end[p]: the end of the chunk that token p is in; a step starting at p must end by it
        self.chunk_end: list[int] = []
        for size in sizes:
            end = len(self.chunk_end) + size
            self.chunk_end += [end] * size
        self.forward = self._forward()
        self.backward = self._backward()

    def _moves(self, i: int, p: int) -> list[tuple[int, int, bool]]:
        """(next i, next p, is a verify step) for the steps that can start at token p with i verify steps placed."""
        if p >= self.n_tokens:
            return []
        limit = self.chunk_end[p]
        fits = (lambda end: end == limit) if self.one_step_per_chunk else (lambda end: end <= limit)
        moves = []
        if fits(p + 1) and (p == 0 or not self.only_prefill_without_drafts):
            moves.append((i, p + 1, False))  # a step without drafts (the prefill when p == 0)
        if i < self.m and (p > 0 or self.first_may_be_padded):
            size = self.accepted[i] + 1
            if fits(p + size):
                moves.append((i + 1, p + size, True))
            elif self.may_stop_inside_last and i == self.m - 1 and limit == self.n_tokens < p + size:
                moves.append((i + 1, self.n_tokens, True))  # stopped inside its last step
        return moves

    def _forward(self) -> list[set[int]]:
        reach: list[set[int]] = [set() for _ in range(self.m + 1)]
        reach[0].add(0)
        states = 0
        for i in range(self.m + 1):
            frontier = sorted(reach[i])
            seen = set(frontier)
            states += len(frontier)
            if states > PLACEMENT_BUDGET:
                raise _TooLong
            while frontier:  # steps without drafts stay at i; verify steps move on to i + 1
                p = frontier.pop()
                for ni, np_, _ in self._moves(i, p):
                    if ni == i and np_ not in seen:
                        seen.add(np_)
                        reach[i].add(np_)
                        frontier.append(np_)
                    elif ni > i:
                        reach[ni].add(np_)
        return reach

    def _backward(self) -> list[set[int]]:
        """done[i]: the p from which the rest (verify steps i.. and the 1-token steps) ends exactly at the end."""
        done: list[set[int]] = [set() for _ in range(self.m + 1)]
        for i in range(self.m, -1, -1):
            for p in sorted(self.forward[i], reverse=True):  # later p first: a 1-token step leads to p + 1
                if (i == self.m and p == self.n_tokens) or any(
                        np_ in done[ni] for ni, np_, _ in self._moves(i, p)):
                    done[i].add(p)
        return done

    def feasible(self) -> bool:
        return 0 in self.backward[0]

    def verify_starts(self) -> list[list[int]]:
        """For each verify step, every token it can start at in some tiling."""
        starts = []
        for i in range(self.m):
            starts.append(sorted(p for p in self.forward[i] if p in self.backward[i] and any(
                ni == i + 1 and np_ in self.backward[i + 1] for ni, np_, _ in self._moves(i, p))))
        return starts

    def one_tiling(self) -> list[tuple[int, int, int | None]]:
        """(start, end, verify index or None) per step, one tiling among those possible.

        Where both fit, the prefill comes first and then a verify step before a step without drafts:
        drafters find drafts in runs (an ngram match goes on until the target leaves it), so a verify
        step that accepted nothing most often comes right after the others, and the steps without
        drafts follow it. Only a guess: such steps are marked inexact.
        """
        i, p, out = 0, 0, []
        while p < self.n_tokens or i < self.m:
            moves = [mv for mv in self._moves(i, p) if mv[1] in self.backward[mv[0]]]
            ni, np_, verify = next((mv for mv in moves if mv[2] == (p > 0)), moves[0])
            out.append((p, np_, i if verify else None))
            i, p = ni, np_
        return out


def _steps_of(req: Request, tiling: list[tuple[int, int, int | None]], accepted: list[int], drafted: list[int],
              starts: list[list[int]]) -> list[UntracedStep]:
    tokens = req.output_token_ids
    texts = list(req.output_token_texts) if len(req.output_token_texts) == len(tokens) else [str(t) for t in tokens]
    chunk_of: list[int] = [j for j, c in enumerate(req.stream_chunks) for _ in c.token_ids]
    # A token no verify step can cover in any tiling is a step without drafts in every tiling.
    coverable = {q for v, begins in enumerate(starts) for p in begins
                 for q in range(p, min(p + accepted[v] + 1, len(tokens)))}
    steps = []
    for start, end, v in tiling:
        chunk = chunk_of[start]
        exact = start not in coverable if v is None else len(starts[v]) == 1
        steps.append(UntracedStep(
            verify_index=v, num_drafts=drafted[v] if v is not None else 0,
            num_accepted=accepted[v] if v is not None else 0, token_ids=tokens[start:end],
            token_texts=texts[start:end], chunk_index=chunk, time_s=req.stream_chunks[chunk].time_s, exact=exact))
    return steps


def _steps_per_chunk(steps: list[UntracedStep], n_chunks: int) -> list[int]:
    counts = [0] * n_chunks
    for s in steps:
        counts[s.chunk_index] += 1
    return counts
