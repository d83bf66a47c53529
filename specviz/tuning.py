"""The tuner: predict acceptance and throughput at every num_speculative_tokens k <= K from one run at K.

Inputs per concurrency c: the baseline cell (no speculation) and one traced cell of the drafter at
num_speculative_tokens = K (see `specviz.sweep`). Nothing else: other cells of the same drafter are
only used to show how far the prediction is from what was measured.

1. Acceptance: cut the recorded histogram at k. For drafters whose first j drafts do not depend on
   k (ngram, suffix, draft_model, eagle, eagle3, mtp, medusa: see `drafter_refusal`), running at
   k <= K proposes exactly the first k of the drafts the run at K proposed, and the target accepts
   the same prefix of them, so a step that accepted a of K drafts accepts min(a, k) of k.
   Worked example, K=3, accepted_histogram [1, 1, 0, 2] (4 drafted steps accepting 0, 1, 3, 3):
       k=1: min(a,1) = 0,1,1,1 -> mean acceptance length 1 + 3/4 = 1.75
       k=2: min(a,2) = 0,1,2,2 -> 1 + 5/4 = 2.25
       k=3: min(a,3) = 0,1,3,3 -> 1 + 7/4 = 2.75   (the recorded value)
   Per-position acceptance rates for positions < k are unchanged ([0.75, 0.5, 0.5] here).
2. Tokens per target pass (per request), L(k). Steps without drafts (the prefill, and steps where
   the drafter found nothing, e.g. no n-gram match) commit 1 token each, and they happen at the same
   places in the output whatever k is (a development sweep of ngram on SmolLM2 had 88, 88, 88 of
   them at k=1, 3, 5, and L(k) predicted from k=5 was within 3% of the measured one): only the
   drafted steps get fewer when each commits more. With U steps without drafts and D drafted steps
   at K, the output is N = U + D * (1 + E[min(a,K)]) tokens, and at k
       L(k) = N / (U + (N - U) / (1 + E[min(a, k)]))
   With U=2 more steps in the example: N = 2 + 4 * 2.75 = 13 and L(3) = 13/6 = 2.167 (as recorded),
   L(2) = 13 / (2 + 11/2.25) = 1.887, L(1) = 13 / (2 + 11/1.75) = 1.569; the baseline has L(0) = 1.
   (Holding the share f = D / (U + D) of drafted steps fixed instead, L(k) = 1 + f * E[min(a,k)],
   under-predicts small k for drafters that often find nothing; the benchmark prints both.)
3. Step cost (an assumption, not a measurement): the engine step time is linear in k between the
   two measured points, t(c,k) = t(c,0) + (t(c,K) - t(c,0)) * k / K, because drafting k tokens and
   verifying k+1 per request both grow with k. t(c,0) = 0.030 s, t(c,5) = 0.045 s -> t(c,1) = 0.033 s.
4. Throughput: engine steps needed for the same output scale as 1 / L(k), each costs t(c,k):
       recorded anchor (default)  tput(c,k) = tput(c,K) * L(k) / L(K) * t(c,K) / t(c,k)
       baseline anchor            tput(c,k) = tput(c,0) * L(k) * t(c,0) / t(c,k)
       both                       the baseline anchor times r ** (k / K), r = measured tput(c,K) /
                                  baseline-anchor tput(c,K): equal to both measured cells.
   Worked: tput(c,5) = 66 tok/s, L(5) = 2.37, L(1) = 1.55, t(c,5) = 0.0356 s, t(c,1) = 0.0331 s
   -> recorded anchor tput(c,1) = 66 * 1.55/2.37 * 0.0356/0.0331 = 46.4 tok/s.
   The recorded anchor is the default: the K cell ran the speculative engine (proposer, rejection
   sampler, spec-decode batch shapes), whose per-step overhead beyond the linear term the baseline
   engine never pays, and it was the most accurate on a development sweep (ngram, SmolLM2, 2-core
   CPU, 8 requests of 48 tokens: median error 34% against 52% for the baseline anchor and 48% for
   both). There the step time, disturbed by other work on the machine, carried the error, not the
   acceptance (5%) or L(k) (3%).
   Re-check on a new sweep with benchmarks/tuning_accuracy.py, which prints all three.
   k = 0 is the measured baseline under every anchor.
5. Recommendation: per concurrency the k in 0..K with the highest predicted throughput; k = 0 (no
   speculation) when nothing beats the measured baseline.

Leviathan et al. 2023 give a closed form with one per-token acceptance a: expected tokens per
drafted step (1 - a^(k+1)) / (1 - a). It is drawn as a comparison line with a fitted so that it
equals the measured mean acceptance length at K; real per-position rates fall with position, so
the prediction itself uses the measured histogram.

The tuner refuses, with a reason instead of a number, when the data cannot support a prediction:
k above the recorded K, a drafter whose drafts depend on k, no baseline at that concurrency, no
traced steps, too few drafted steps, or no step timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .config import SpecConfig, serve_command_text
from .metrics import StepFigures
from .sweep import BASELINE, Sweep, SweepCell

Anchor = Literal["baseline", "recorded", "both"]
ANCHOR_FORMULA = {
    "recorded": "tput(k) = tput(K) · L(k)/L(K) · t(K)/t(k)",
    "baseline": "tput(k) = tput(0) · L(k) · t(0)/t(k)",
    "both": "tput(k) = tput(0) · L(k) · t(0)/t(k) · r^(k/K), r making it equal the measured tput(K)",
}
DEFAULT_ANCHOR: Anchor = "recorded"  # the most accurate on the dev sweep; see benchmarks/tuning_accuracy.py

# Below this many drafted steps one lucky or unlucky request moves the mean acceptance length by
# more than the differences between neighbouring k: refuse rather than recommend from noise.
MIN_DRAFTED_STEPS = 30

SWEEPS_DIR = Path(__file__).resolve().parent.parent / "sample_runs" / "sweeps"

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


class TuningRefusal(BaseModel):
    """No number, and why: shown plainly instead of a prediction."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int | None = Field(description="None when the whole drafter is refused")
    num_speculative_tokens: int | None = None
    reason: str

    def __str__(self) -> str:
        where = [f"concurrency {self.concurrency}"] if self.concurrency is not None else []
        where += [f"k={self.num_speculative_tokens}"] if self.num_speculative_tokens is not None else []
        return (f"{', '.join(where)}: " if where else "") + self.reason


def drafter_refusal(method: str | None, speculative_config: dict | None) -> str | None:
    """Why runs of this drafting configuration cannot be cut at a smaller k, or None if they can."""
    config = speculative_config or {}
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
    if config.get("num_speculative_tokens_per_batch_size"):
        return "num_speculative_tokens_per_batch_size is set: the run did not draft a fixed K per step"
    return None


# ---- the pieces, each with its worked numbers in the module docstring -------------------------


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


def step_time_s(t0: float, t_recorded: float, recorded_k: int, k: int) -> float:
    """Linear in k (an assumption): t0=0.030, t(5)=0.045 -> t(1)=0.033, t(3)=0.039."""
    return t0 + (t_recorded - t0) * k / recorded_k


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


def with_k(speculative_config: dict | None, k: int) -> dict | None:
    """The recorded config at another k; k=0 means no speculation (None)."""
    if k == 0 or speculative_config is None:
        return None
    return dict(speculative_config) | {"num_speculative_tokens": k}


def serve_command(target_model: str, speculative_config: dict | None) -> str:
    """`vllm serve MODEL --speculative-config '<json>'` (no option for k=0), without specviz's tracer."""
    spec = SpecConfig.from_dict(speculative_config) if speculative_config else None
    return serve_command_text(target_model, spec, trace=False)


def python_config(target_model: str, speculative_config: dict | None) -> str:
    """The same for Python: `LLM(model=..., speculative_config={...})`."""
    if not speculative_config:
        return f"from vllm import LLM\n\nllm = LLM(model={target_model!r})  # no speculative_config: no speculation"
    spec = SpecConfig.from_dict(speculative_config).to_python().replace("\n", "\n    ")
    return f"from vllm import LLM\n\nllm = LLM(\n    model={target_model!r},\n    {spec},\n)"


# ---- the prediction -----------------------------------------------------------------------------


class PredictionRow(BaseModel):
    """Predicted figures at one (concurrency, k). k=0 is the measured baseline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int
    num_speculative_tokens: int
    mean_acceptance_length: float | None = Field(description="1 + E[min(a,k)] over drafted steps; None at k=0")
    acceptance_rate_per_pos: list[float]
    tokens_per_step: float = Field(description="L(k): tokens one request commits per target pass")
    engine_step_time_s: float
    output_tokens_per_s: float
    speedup: float = Field(description="predicted output_tokens_per_s / measured baseline at this concurrency")
    leviathan_mean_acceptance_length: float | None


class MeasuredPoint(BaseModel):
    """A measured sweep cell of the drafter (or the baseline at k=0), and the prediction's gap to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int
    num_speculative_tokens: int
    output_tokens_per_s: float
    mean_acceptance_length: float | None
    predicted_output_tokens_per_s: float | None
    relative_error: float | None = Field(description="(predicted - measured) / measured; None if not predicted")
    used_for_prediction: bool


class Recommendation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int
    num_speculative_tokens: int = Field(description="0: no speculation")
    output_tokens_per_s: float
    speedup: float
    speculative_config: dict | None


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    drafter: str
    method: str | None
    target_model: str
    anchor: Anchor
    recorded_k: dict[int, int] = Field(description="concurrency -> K of the run predicted from")
    speculative_config: dict | None = Field(description="the drafter's config as recorded")
    rows: list[PredictionRow]
    measured: list[MeasuredPoint]
    refusals: list[TuningRefusal]
    provenance: str

    @property
    def concurrencies(self) -> list[int]:
        return sorted({r.concurrency for r in self.rows} | {r.concurrency for r in self.refusals
                                                             if r.concurrency is not None})

    def at(self, concurrency: int, k: int) -> PredictionRow | TuningRefusal:
        """The row at (c, k), or why there is none."""
        whole = [r for r in self.refusals if r.concurrency in (None, concurrency)]
        if whole:
            return whole[0]
        K = self.recorded_k[concurrency]
        if k > K:
            return TuningRefusal(concurrency=concurrency, num_speculative_tokens=k, reason=(
                f"k={k} is above the recorded num_speculative_tokens={K}: that run never proposed draft "
                f"{K + 1}, so nothing says how often it would be accepted. Predict from a run at k >= {k}."))
        return next(r for r in self.rows if r.concurrency == concurrency and r.num_speculative_tokens == k)

    def recommend(self) -> list[Recommendation]:
        """Per predicted concurrency, the k with the highest predicted throughput (ties: the smaller k)."""
        out = []
        for c in sorted({r.concurrency for r in self.rows}):
            rows = [r for r in self.rows if r.concurrency == c]
            best = max(rows, key=lambda r: (r.output_tokens_per_s, -r.num_speculative_tokens))
            out.append(Recommendation(concurrency=c, num_speculative_tokens=best.num_speculative_tokens,
                                      output_tokens_per_s=best.output_tokens_per_s, speedup=best.speedup,
                                      speculative_config=with_k(self.speculative_config, best.num_speculative_tokens)))
        return out

    def serve_command(self, k: int) -> str:
        return serve_command(self.target_model, with_k(self.speculative_config, k))

    def python_config(self, k: int) -> str:
        return python_config(self.target_model, with_k(self.speculative_config, k))


def _cell_refusal(cell: SweepCell, what: str) -> str | None:
    if cell.steps.num_engine_steps == 0:
        return f"the {what} run has no traced steps (recorded without the specviz tracer)"
    if cell.steps.engine_step_time_s is None:
        return f"the {what} run has too few engine steps to time one"
    return None


def predict_concurrency(baseline: SweepCell | None, recorded: SweepCell, anchor: Anchor = DEFAULT_ANCHOR,
                        ) -> list[PredictionRow] | TuningRefusal:
    """Rows for k = 0..K at the recorded cell's concurrency, or why not."""
    c, K = recorded.concurrency, recorded.num_speculative_tokens or 0

    def refuse(reason: str) -> TuningRefusal:
        return TuningRefusal(concurrency=c, reason=reason)

    if baseline is None:
        return refuse("no baseline run at this concurrency: the step cost without drafting is unknown")
    for cell, what in ((baseline, "baseline"), (recorded, f"k={K}")):
        if reason := _cell_refusal(cell, what):
            return refuse(reason)
    if not baseline.output_tokens_per_s:
        return refuse("the baseline run at this concurrency produced no output to measure")
    hist = recorded.steps.accepted_histogram
    if sum(hist) < MIN_DRAFTED_STEPS:
        return refuse(f"only {sum(hist)} drafted steps in the k={K} run (at least {MIN_DRAFTED_STEPS} needed): "
                      "record more requests or longer outputs")
    t0, tK = baseline.steps.engine_step_time_s, recorded.steps.engine_step_time_s
    tput0 = baseline.output_tokens_per_s
    L_K = tokens_per_step(recorded.steps, K)
    r = recorded.output_tokens_per_s / (tput0 * L_K * t0 / tK)
    a = fit_leviathan_rate(mean_acceptance_length(hist, K), K)
    rows = []
    for k in range(K + 1):
        L, t = tokens_per_step(recorded.steps, k), step_time_s(t0, tK, K, k)
        tput = tput0 if k == 0 else {  # k=0 is the baseline itself: measured, not predicted
            "baseline": tput0 * L * t0 / t,
            "recorded": recorded.output_tokens_per_s * L / L_K * tK / t,
            "both": tput0 * L * t0 / t * r ** (k / K)}[anchor]
        rows.append(PredictionRow(
            concurrency=c, num_speculative_tokens=k,
            mean_acceptance_length=mean_acceptance_length(hist, k) if k else None,
            acceptance_rate_per_pos=acceptance_rate_per_pos(hist, k), tokens_per_step=L,
            engine_step_time_s=t, output_tokens_per_s=tput, speedup=tput / tput0,
            leviathan_mean_acceptance_length=leviathan_tokens_per_step(a, k) if k else None,
        ))
    return rows


def drafters(sweep: Sweep) -> list[str]:
    return list(dict.fromkeys(c.drafter for c in sweep.cells if c.drafter != BASELINE))


def recorded_ks(sweep: Sweep, drafter: str) -> list[int]:
    return sorted({c.num_speculative_tokens for c in sweep.cells if c.drafter == drafter})


def provenance(sweep: Sweep) -> str:
    g, cells = sweep.grid, sweep.cells
    first = cells[0] if cells else None
    hardware = f"{first.platform} ({first.device_name})" if first else "no cells"
    versions = ", ".join(sorted({c.vllm_version for c in cells})) or "?"
    prompt_sets = ", ".join(sorted({c.prompt_set for c in cells})) or g.prompts
    concurrencies = ", ".join(str(c) for c in sorted({c.concurrency for c in cells}))
    return (f"concurrency {concurrencies} · prompt set '{prompt_sets}' · {g.num_requests} requests · "
            f"max {g.max_tokens} output tokens · temperature {g.temperature} · {hardware} · vLLM {versions} · "
            f"{g.target_model.rstrip('/').split('/')[-1]}")


def predict(sweep: Sweep, drafter: str, recorded_k: int | None = None,
            anchor: Anchor = DEFAULT_ANCHOR) -> Prediction:
    """Predict every k <= K at every concurrency of the sweep from the drafter's cells at K plus the baseline.

    recorded_k: the K to predict from (default: the drafter's largest k at each concurrency).
    Cells of the drafter at other k are not used, only compared with (Prediction.measured).
    """
    mine = [c for c in sweep.cells if c.drafter == drafter]
    if not mine:
        raise ValueError(f"no cells of drafter {drafter!r} in this sweep; it has: {drafters(sweep)}")
    baselines = {c.concurrency: c for c in sweep.cells if c.drafter == BASELINE}
    concurrencies = sorted({c.concurrency for c in mine} | set(baselines))
    method, config = mine[0].method, mine[0].speculative_config
    rows: list[PredictionRow] = []
    refusals: list[TuningRefusal] = []
    used: dict[int, int] = {}
    if reason := drafter_refusal(method, config):
        refusals.append(TuningRefusal(concurrency=None, reason=reason))
    else:
        for c in concurrencies:
            at_c = [x for x in mine if x.concurrency == c]
            pick = [x for x in at_c if x.num_speculative_tokens == recorded_k] if recorded_k else at_c
            if not pick:
                want = f"at k={recorded_k}" if recorded_k else ""
                refusals.append(TuningRefusal(concurrency=c, reason=f"no run of {drafter} {want} at this concurrency"))
                continue
            cell = max(pick, key=lambda x: x.num_speculative_tokens or 0)
            result = predict_concurrency(baselines.get(c), cell, anchor)
            if isinstance(result, TuningRefusal):
                refusals.append(result)
            else:
                used[c] = cell.num_speculative_tokens or 0
                rows += result
    predicted = {(r.concurrency, r.num_speculative_tokens): r.output_tokens_per_s for r in rows}
    measured = []
    for cell in sorted(mine + list(baselines.values()), key=lambda x: (x.concurrency, x.num_speculative_tokens or 0)):
        k = cell.num_speculative_tokens or 0
        p = predicted.get((cell.concurrency, k))
        measured.append(MeasuredPoint(
            concurrency=cell.concurrency, num_speculative_tokens=k, output_tokens_per_s=cell.output_tokens_per_s,
            mean_acceptance_length=cell.mean_acceptance_length, predicted_output_tokens_per_s=p,
            relative_error=(p - cell.output_tokens_per_s) / cell.output_tokens_per_s
            if p is not None and cell.output_tokens_per_s else None,
            used_for_prediction=used.get(cell.concurrency) == k or (k == 0 and cell.concurrency in used),
        ))
    return Prediction(drafter=drafter, method=method, target_model=sweep.grid.target_model, anchor=anchor,
                      recorded_k=used, speculative_config=config, rows=rows, measured=measured,
                      refusals=refusals, provenance=provenance(sweep))


def list_sweep_files(folder: Path = SWEEPS_DIR) -> list[Path]:
    """Recorded sweeps: `<folder>/<name>/sweep.json`, sorted by name."""
    return sorted(folder.glob("*/sweep.json"))
