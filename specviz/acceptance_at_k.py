"""Acceptance and tokens per target pass at a smaller k, cut from a run at K (prediction.py's steps 1 and 2).

1. Acceptance: cut the recorded histogram at k. For drafters whose first j drafts do not depend on
   k (see drafter_refusal below), running at k <= K proposes exactly the first k of the drafts the
   run at K proposed, and the target accepts the same prefix of them, so a step that accepted a of
   K drafts accepts min(a, k) of k.
   Worked example, K=3, accepted_histogram [1, 1, 0, 2] (4 drafted steps accepting 0, 1, 3, 3):
       k=1: min(a,1) = 0,1,1,1 -> mean acceptance length 1 + 3/4 = 1.75
       k=2: min(a,2) = 0,1,2,2 -> 1 + 5/4 = 2.25
       k=3: min(a,3) = 0,1,3,3 -> 1 + 7/4 = 2.75   (the recorded value)
   Per-position acceptance rates for positions < k are unchanged ([0.75, 0.5, 0.5] here).
2. Tokens per target pass (per request), L(k): with U steps without drafts and D drafted steps at
   K, the output is N = U + D * (1 + E[min(a,K)]) tokens, and at k
       L(k) = N / (U + (N - U) / (1 + E[min(a, k)]))
   With U=2: N = 13, L(3) = 13/6 = 2.167, L(2) = 1.887, L(1) = 1.569; the baseline has L(0) = 1.
   The drafted share of the steps at k is f(k) = D(k) / (U + D(k)): f(3) = 0.667, f(1) = 0.759.

The cut is valid only for drafters whose first j drafts do not depend on k: drafter_refusal says
why a configuration is refused (dflash, dspark, parallel drafting, ...), CUT_IS_VALID why it
is valid for the others, and MIN_DRAFTED_STEPS how many drafted steps a histogram needs before it is cut.

Leviathan et al. 2023's closed form with one per-token acceptance a, (1 - a^(k+1)) / (1 - a)
tokens per drafted step, is here for the comparison line (fit_leviathan_rate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .metrics import StepFigures

if TYPE_CHECKING:
    from .config import SpecConfig

# Below this many drafted steps one lucky or unlucky request moves the mean acceptance length by
# more than the differences between neighbouring k: refuse rather than recommend from noise.
MIN_DRAFTED_STEPS = 30


def expected_accepted(histogram: list[int], k: int) -> float:
    """E[min(a, k)] over drafted steps: [1, 1, 0, 2] at k=2 -> (0+1+2+2)/4 = 1.25."""
    n = sum(histogram)
    return sum(count * min(a, k) for a, count in enumerate(histogram)) / n


def mean_acceptance_length(histogram: list[int], k: int) -> float:
    """1 + E[min(a, k)], as vLLM reports it: [1, 1, 0, 2] at k=1 -> 1.75, k=2 -> 2.25, k=3 -> 2.75."""
    return 1 + expected_accepted(histogram, k)


def acceptance_rate_per_pos(histogram: list[int], k: int) -> list[float]:
    """Share of drafted steps accepting more than j drafts, j < k: [1, 1, 0, 2] -> [0.75, 0.5, 0.5]."""
    n = sum(histogram)
    return [sum(histogram[j + 1:]) / n for j in range(k)]


def tokens_per_step(steps: StepFigures, k: int) -> float:
    """L(k) = N / (U + (N - U) / (1 + E[min(a, k)])): tokens one request commits per target pass.

    [1, 1, 0, 2] at K=3 with U=2 steps without drafts: N = 13; k=1 -> 1.569, k=2 -> 1.887, k=3 -> 2.167.
    """
    drafted, undrafted = sum(steps.accepted_histogram), steps.num_steps_without_drafts
    if k == 0 or drafted == 0:
        return 1.0
    K = len(steps.accepted_histogram) - 1
    n = undrafted + drafted * mean_acceptance_length(steps.accepted_histogram, K)
    return n / (undrafted + (n - undrafted) / mean_acceptance_length(steps.accepted_histogram, k))


def tokens_per_step_fixed_share(steps: StepFigures, k: int) -> float:
    """The simpler L(k) = 1 + f * E[min(a, k)], f = D / (U + D) held at its value at K (for comparison).

    [1, 1, 0, 2] at K=3 with U=2: f = 4/6, k=1 -> 1 + 2/3 * 3/4 = 1.5, k=3 -> 1 + 2/3 * 7/4 = 2.167.
    """
    drafted = sum(steps.accepted_histogram)
    if k == 0 or drafted == 0:
        return 1.0
    f = drafted / (drafted + steps.num_steps_without_drafts)
    return 1 + f * expected_accepted(steps.accepted_histogram, k)


def drafted_share(steps: StepFigures, k: int) -> float:
    """f(k) = D(k) / (U + D(k)), D(k) = (N - U) / (1 + E[min(a, k)]): the share of request-steps with drafts.

    [1, 1, 0, 2] at K=3 with U=2: N = 13; k=3 -> 4/6 = 0.667, k=1 -> 6.286 / 8.286 = 0.759, k=0 -> 0.
    """
    drafted, undrafted = sum(steps.accepted_histogram), steps.num_steps_without_drafts
    if k == 0 or drafted == 0:
        return 0.0
    K = len(steps.accepted_histogram) - 1
    n = undrafted + drafted * mean_acceptance_length(steps.accepted_histogram, K)
    d_k = (n - undrafted) / mean_acceptance_length(steps.accepted_histogram, k)
    return d_k / (undrafted + d_k)


def leviathan_tokens_per_step(a: float, k: int) -> float:
    """Leviathan et al. 2023: (1 - a^(k+1)) / (1 - a) = 1 + a + ... + a^k; a=0.5, k=3 -> 1.875."""
    return float(k + 1) if a >= 1 else (1 - a ** (k + 1)) / (1 - a)


def fit_leviathan_rate(length: float, k: int) -> float:
    """The one per-token acceptance a for which the closed form gives `length` at k (bisection)."""
    if length >= k + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if leviathan_tokens_per_step(mid, k) < length else (lo, mid)
    return (lo + hi) / 2


# ---- when the cut is valid ---------------------------------------------------------------------

# Why a method's drafts at k are not the first k drafts of a run at K (decided from vLLM's V1 code).
_METHOD_REFUSALS = {
    "dflash": "dflash drafts a whole block in one forward pass: one bonus query plus k mask queries "
              "that can attend to each other, trained at one block size, so the draft at position j "
              "depends on k; a run at K says nothing about a run at k",
    "dspark": "dspark drafts k tokens in parallel (parallel drafting, block width tied to the "
              "checkpoint's block_size) and can size verification adaptively, so its drafts depend on k",
    "mlp_speculator": "vLLM's V1 engine has no mlp_speculator proposer (the model runner rejects the "
                      "method), so there is no traced run to predict from",
    "custom_class": "a custom proposer can draft anything for any k; specviz cannot know that its first "
                    "j drafts do not depend on k",
}
# Why the cut is valid (shown in the page's explanation).
CUT_IS_VALID = {
    "ngram": "prompt lookup copies the tokens after the longest match; at k it copies the first k of them",
    "ngram_gpu": "prompt lookup copies the tokens after the longest match; at k it copies the first k of them",
    "suffix": "suffix decoding follows the most likely path of its suffix tree; k caps the path's length",
    "draft_model": "the draft model proposes one token at a time; the first j do not see k",
    "eagle": "the EAGLE head proposes one token at a time from the previous one; the first j do not see k",
    "eagle3": "the EAGLE-3 head proposes one token at a time from the previous one; the first j do not see k",
    "mtp": "MTP layers propose one token at a time (reused autoregressively); the first j do not see k",
    "medusa": "vLLM builds k Medusa heads and head j predicts position j from the target's hidden state "
              "alone, so the first k heads of a run at K propose the same drafts",
}


def drafter_refusal(spec: SpecConfig | None) -> str | None:
    """Why runs of this drafting configuration cannot be cut at a smaller k, or None if they can."""
    if spec is None:
        return "no drafting: there is nothing to cut"
    method, config = spec.method, spec.to_vllm()
    if method in _METHOD_REFUSALS:
        return _METHOD_REFUSALS[method]
    if method not in CUT_IS_VALID:
        return f"method {method!r}: specviz does not know whether its first j drafts depend on k"
    if config.get("parallel_drafting"):
        return ("parallel_drafting is on: all k drafts come from one pass with mask tokens (P-EAGLE, PARD), "
                "so the draft at position j depends on k")
    if config.get("rejection_sample_method") in ("block", "synthetic"):
        return (f"rejection_sample_method={config['rejection_sample_method']!r}: acceptance is not decided one "
                "draft at a time by the target, so cutting the recorded acceptance at k is not valid")
    if spec.schedule:
        return ("num_speculative_tokens_per_batch_size is set: k followed the batch size, so the run did not "
                "draft a fixed K per step; it is measured as a row of its own, not cut")
    return None
