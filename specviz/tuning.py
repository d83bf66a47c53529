"""The tuner: predict acceptance and throughput at every num_speculative_tokens k <= K from a sweep.

Inputs: a sweep (see `specviz.sweep`). The acceptance at every k <= K comes from one cell of the
drafter at K per concurrency (traced, or untraced with vLLM's counters); the cost of a target pass
comes from a model fitted across all the sweep's cells. The drafter's cells at other k are then
drawn beside the prediction to show how far it is from what was measured.

1. Acceptance at k <= K: the recorded histogram cut at k (acceptance_at_k, with worked numbers):
   a step that accepted a of K drafts accepts min(a, k) of k. Without the tracer the histogram comes
   from vLLM's per-position counters, which hold the same information: steps accepting exactly a
   drafts = per_pos[a-1] - per_pos[a] (metrics.counted_step_figures).
2. Tokens per target pass (per request), L(k) (acceptance_at_k). Steps without drafts (the prefill,
   and steps where the drafter found nothing) commit 1 token each and happen at the same places in
   the output whatever k is (a development sweep of ngram on SmolLM2 had 88, 88, 88 of them at
   k=1, 3, 5, and L(k) predicted from k=5 was within 3% of the measured one): only the drafted
   steps get fewer when each commits more. In the example there, L(1) = 1.569 and f(1) = 0.759.
   (Holding the drafted share f fixed at its value at K instead, L(k) = 1 + f * E[min(a,k)],
   under-predicts small k for drafters that often find nothing; the benchmark prints both.)
3. Step cost, fitted (see StepCostFit and fit_step_cost): one target pass over a batch of c
   requests verifies V = c + Dr tokens, one per request plus the Dr = c * f * k drafts (so
   c * (k + 1) when every request drafts every step), and costs
       t = base + per_request * max(0, c - knee) + per_drafted_token[drafter] * Dr
   a share per request in the batch (its one certain token: the target's work on it, sampling,
   scheduling, streaming) and a share per drafted token (the drafter proposing it and the target
   verifying it; with V = c + Dr the two cannot be told apart from throughput). It is fitted by
   least squares (on relative error) across every cell of the sweep, the baseline's and every
   drafter's, each cell's time per pass taken from its measured throughput: t = c * L / (output
   tokens/s). The knee is the batch below which one more request costs nothing measurable (the pass
   is bound by reading the weights, not by the batch): the recorded chat sweep takes 37-39 ms per
   baseline pass at c = 1, 2 and 4 and 54 ms at c = 8. It is chosen, in steps of half a request,
   as the one whose fit leaves the least squared relative error, and stays 0 (a plain line in c)
   unless the sweep has three or more concurrencies and the knee fits better. On the chat and
   (bfloat16) code sweeps recorded on 2026-12-03 it came out at 3 and 3.5 requests and took the
   median prediction error from 5.9% to 4.0%; the float32 code sweep of 2026-12-05 fits best at 0
   (benchmarks/tuning_accuracy.py). Worked: base 20 ms, 10 ms per request, knee 0, 5 ms per drafted
   token -> at c=4, k=1, f=1: Dr = 4, t = 20 + 40 + 20 = 80 ms; with knee 2 instead, 20 + 20 + 20 = 60 ms.
4. Throughput: c requests each committing L(k) tokens per pass of t(c, k) seconds:
       tput(c, k) = c * L(k) / t(c, k)
   Worked, continuing 3. with L(1) = 1.6: 4 * 1.6 / 0.080 = 80 tokens/s; the baseline (k=0, Dr = 0,
   t = 60 ms) 4 / 0.060 = 66.7 tokens/s, so speedup 1.2. k = 0 is predicted the same way, so
   predictions and their speedups come from one model; the measured cells are drawn beside them.
   On the recorded sweeps this was the most accurate of the models tried (benchmarks/tuning_accuracy.py):
   a line in k per concurrency between the baseline and the K cell, and throughput scaled from the
   measured K cell, both carry that one cell's run-to-run noise into every prediction.
5. Recommendation: per concurrency the k in 0..K with the highest predicted throughput; k = 0 (no
   speculation) when nothing beats the baseline.

Leviathan et al. 2023 give a closed form with one per-token acceptance a: expected tokens per
drafted step (1 - a^(k+1)) / (1 - a). It is drawn as a comparison line with a fitted so that it
equals the measured mean acceptance length at K; real per-position rates fall with position, so
the prediction itself uses the measured histogram.

The tuner refuses, with a reason instead of a number, when the data cannot support a prediction:
k above the recorded K, a drafter whose drafts depend on k, a cell without acceptance figures
(neither traced nor with vLLM's counters), too few drafted steps, or too few cells to fit the step cost.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field

from .acceptance_at_k import (
    acceptance_rate_per_pos,
    drafted_share,
    fit_leviathan_rate,
    leviathan_tokens_per_step,
    mean_acceptance_length,
    tokens_per_step,
)
from .base import Frozen
from .config import SpecConfig, serve_command_text
from .sweep import BASELINE, Sweep, SweepCell

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


class TuningRefusal(Frozen):
    """No number, and why: shown plainly instead of a prediction."""

    concurrency: int | None = Field(description="None when the whole drafter is refused")
    num_speculative_tokens: int | None = None
    reason: str

    def __str__(self) -> str:
        where = [f"concurrency {self.concurrency}"] if self.concurrency is not None else []
        where += [f"k={self.num_speculative_tokens}"] if self.num_speculative_tokens is not None else []
        return (f"{', '.join(where)}: " if where else "") + self.reason


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


# ---- the export -------------------------------------------------------------------------------


def serve_command(target_model: str, spec: SpecConfig | None) -> str:
    """`vllm serve MODEL --speculative-config '<json>'` (no option without drafting), without specviz's tracer."""
    return serve_command_text(target_model, spec, trace=False)


def python_config(target_model: str, spec: SpecConfig | None) -> str:
    """The same for Python: `LLM(model=..., speculative_config={...})`."""
    if spec is None:
        return f"from vllm import LLM\n\nllm = LLM(model={target_model!r})  # no speculative_config: no speculation"
    config = spec.to_python().replace("\n", "\n    ")
    return f"from vllm import LLM\n\nllm = LLM(\n    model={target_model!r},\n    {config},\n)"


# ---- the step cost ------------------------------------------------------------------------------


class StepCostFit(Frozen):
    """Seconds per target pass against the batch's work, fitted across a sweep's cells (module docstring, 3.).

        t = base_s + per_request_s * max(0, c - knee_requests) + per_drafted_token_s[drafter] * Dr,   Dr = c * f * k

    Each cell's t is what its measured throughput implies, t = c * L / (output tokens/s), with L its
    measured tokens per pass and f its drafted share of request-steps (measured_pass; a schedule's cells,
    whose k varies from step to step, are left out). The fit is
    least squares on relative error (each cell weighted by 1 / its t). A cost that comes out below
    zero (noise, or too small to see) is held at 0 and the fit repeated; `held_at_zero` names it. The
    knee is searched in steps of half a request (fit_step_cost).
    Worked: cells (c, k, f, t) = (1, 0, -, 30 ms), (4, 0, -, 60 ms), (1, 2, 1, 40 ms), (4, 2, 1, 100 ms)
    give base 20 ms, 10 ms per request, knee 0, 5 ms per drafted token, exactly (R² = 1, error 0).
    Baseline cells at c = 1, 2, 4, 8 of 40, 40, 40, 80 ms give base 40 ms, 10 ms per request, knee 4.
    """

    base_s: float = Field(description="fixed cost of a pass, whatever the batch")
    per_request_s: float = Field(description="cost of one more request in the batch (its one certain token), "
                                             "above the knee")
    knee_requests: float = Field(0.0, description="requests in the batch below which one more costs nothing; "
                                                  "0: a plain line in c")
    per_drafted_token_s: dict[str, float] = Field(description="drafter label -> cost of one more drafted token "
                                                              "(drafting it and verifying it)")
    held_at_zero: list[str] = Field(default_factory=list, description="terms whose fitted cost was negative")
    r2: float = Field(description="share of the variance of the cells' pass times the fit explains")
    median_relative_error: float = Field(description="median |fitted / measured - 1| over the cells")
    num_cells: int

    def pass_time_s(self, drafter: str, concurrency: int, k: int, share: float) -> float:
        """t at c requests, k drafts, drafted share f: base 20 ms, 10 ms, knee 0, 5 ms at (4, 1, 1) -> 0.080 s."""
        drafted = concurrency * share * k
        batch = max(0.0, concurrency - self.knee_requests)
        return self.base_s + self.per_request_s * batch + self.per_drafted_token_s.get(drafter, 0.0) * drafted


PER_REQUEST = "per request"  # the name of that term in StepCostFit.held_at_zero


def measured_pass(cell: SweepCell) -> tuple[float, float] | None:
    """(t, Dr) of a measured cell: the seconds per pass its throughput implies, and the drafts per pass.

    Baseline at c=4, 120 tokens/s: L = 1, t = 4 * 1 / 120 = 33.3 ms, Dr = 0. ngram at k=3, c=2,
    60 tokens/s, histogram [1, 1, 0, 2] with 2 steps without drafts: L = 13/6, f = 4/6, t = 72.2 ms,
    Dr = 2 * 4/6 * 3 = 4. None when the cell has no throughput or no acceptance figures (untraced
    without vLLM's counters).
    """
    k = cell.num_speculative_tokens
    if cell.scheduled or not cell.output_tokens_per_s or len(cell.steps.accepted_histogram) != k + 1:
        return None
    if sum(cell.steps.accepted_histogram) + cell.steps.num_steps_without_drafts == 0:
        return None
    c = cell.concurrency
    return c * tokens_per_step(cell.steps, k) / cell.output_tokens_per_s, c * drafted_share(cell.steps, k) * k


def fit_step_cost(cells: list[SweepCell]) -> StepCostFit | str:
    """Fit StepCostFit to the cells (baseline and drafters together); a reason instead when it cannot.

    The knee is tried at 0 and at every half request from 1.5 below the largest concurrency, and kept
    where the squared relative error is least; 0 (a line in c) unless three or more concurrencies
    were measured and there is a cell to spare for it.
    """
    points = [(cell.drafter, cell.concurrency, m) for cell in cells if (m := measured_pass(cell)) is not None]
    terms = [PER_REQUEST, *dict.fromkeys(d for d, _, _ in points if d != BASELINE)]
    best = _fit_at_knee(points, terms, 0.0)
    if isinstance(best, str):
        return best
    concurrencies = sorted({c for _, c, _ in points})
    if len(concurrencies) >= 3 and len(points) >= len(terms) + 3:
        for knee in np.arange(1.5, concurrencies[-1], 0.5):
            tried = _fit_at_knee(points, terms, float(knee))
            if not isinstance(tried, str) and tried[0] < best[0] * (1 - 1e-9):
                best = tried
    _, fit = best
    return fit


def _fit_at_knee(points: list, terms: list[str], knee: float) -> tuple[float, StepCostFit] | str:
    """(sum of squared relative errors, the fit) with the knee held where given."""
    held: list[str] = []
    t = np.array([m[0] for _, _, m in points])
    while True:
        free = [name for name in terms if name not in held]
        if len(points) < len(free) + 2:
            return (f"too few cells to fit the step cost: {len(points)} with throughput and acceptance figures, "
                    f"{len(free) + 2} needed (the baseline and each drafter at two or more concurrencies or k)")
        X = np.array([[1.0] + [max(0.0, c - knee) if name == PER_REQUEST else dr if d == name else 0.0
                               for name in free]
                      for d, c, (_, dr) in points])
        coef = np.linalg.lstsq(X / t[:, None], np.ones(len(t)), rcond=None)[0]
        negative = [(value, name) for value, name in zip(coef[1:], free) if value < 0]
        if not negative:
            break
        held.append(min(negative)[1])
    fitted = X @ coef
    costs = dict(zip(free, (float(v) for v in coef[1:]))) | {name: 0.0 for name in held}
    ss_tot = float(((t - t.mean()) ** 2).sum())
    relative = fitted / t - 1
    return float((relative ** 2).sum()), StepCostFit(
        base_s=float(coef[0]), per_request_s=costs.pop(PER_REQUEST), knee_requests=knee,
        per_drafted_token_s=costs, held_at_zero=held,
        r2=1 - float(((t - fitted) ** 2).sum()) / ss_tot if ss_tot else 1.0,
        median_relative_error=float(np.median(np.abs(relative))), num_cells=len(points),
    )


# ---- the prediction -----------------------------------------------------------------------------


class PredictionRow(Frozen):
    """Predicted figures at one (concurrency, k); k=0 is the baseline, predicted by the same model."""

    concurrency: int
    num_speculative_tokens: int
    mean_acceptance_length: float | None = Field(description="1 + E[min(a,k)] over drafted steps; None at k=0")
    acceptance_rate_per_pos: list[float]
    tokens_per_step: float = Field(description="L(k): tokens one request commits per target pass")
    pass_time_s: float = Field(description="seconds per target pass from the fitted step cost")
    output_tokens_per_s: float
    speedup: float = Field(description="predicted output_tokens_per_s / predicted baseline at this concurrency")
    leviathan_mean_acceptance_length: float | None


class MeasuredPoint(Frozen):
    """A measured sweep cell of the drafter (or the baseline at k=0), and the prediction's gap to it."""

    concurrency: int
    num_speculative_tokens: int
    output_tokens_per_s: float = Field(description="median over the cell's runs")
    output_tokens_per_s_min: float
    output_tokens_per_s_max: float
    repeats: int
    traced: bool = Field(description="acceptance from the tracer's steps; False: from vLLM's counters")
    async_scheduling: bool | None
    mean_acceptance_length: float | None
    predicted_output_tokens_per_s: float | None
    relative_error: float | None = Field(description="(predicted - measured) / measured; None if not predicted")
    used_for_prediction: bool = Field(description="the cell whose acceptance was cut at every k")


class Recommendation(Frozen):
    concurrency: int
    num_speculative_tokens: int = Field(description="0: no speculation")
    output_tokens_per_s: float
    speedup: float
    spec: SpecConfig | None = Field(description="the drafter at that k; None: serve without drafting")


class Prediction(Frozen):
    drafter: str
    method: str | None
    target_model: str
    recorded_k: dict[int, int] = Field(description="concurrency -> K of the cell whose acceptance was cut")
    spec: SpecConfig = Field(description="the drafter's config as recorded (at one of its k)")
    step_cost: StepCostFit | None = Field(description="None when it could not be fitted (see refusals)")
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
                                      spec=self.spec.with_k(best.num_speculative_tokens)))
        return out


def predict_concurrency(recorded: SweepCell, fit: StepCostFit) -> list[PredictionRow] | TuningRefusal:
    """Rows for k = 0..K at the recorded cell's concurrency (module docstring, 1.-4.), or why not."""
    c, K = recorded.concurrency, recorded.num_speculative_tokens
    hist = recorded.steps.accepted_histogram
    if len(hist) != K + 1:
        return TuningRefusal(concurrency=c, reason=(
            f"the k={K} cell has no acceptance figures: it was recorded without the specviz tracer and without "
            "vLLM's spec-decode counters"))
    if sum(hist) < MIN_DRAFTED_STEPS:
        return TuningRefusal(concurrency=c, reason=(
            f"only {sum(hist)} drafted steps in the k={K} run (at least {MIN_DRAFTED_STEPS} needed): "
            "record more requests or longer outputs"))
    a = fit_leviathan_rate(mean_acceptance_length(hist, K), K)
    rows = []
    for k in range(K + 1):
        L = tokens_per_step(recorded.steps, k)
        t = fit.pass_time_s(recorded.drafter, c, k, drafted_share(recorded.steps, k))
        if t <= 0:
            return TuningRefusal(concurrency=c, reason=f"the fitted step cost is not positive at k={k}: "
                                                       "the sweep's cells do not pin it down")
        tput = c * L / t
        rows.append(PredictionRow(
            concurrency=c, num_speculative_tokens=k,
            mean_acceptance_length=mean_acceptance_length(hist, k) if k else None,
            acceptance_rate_per_pos=acceptance_rate_per_pos(hist, k), tokens_per_step=L, pass_time_s=t,
            output_tokens_per_s=tput, speedup=tput / rows[0].output_tokens_per_s if rows else 1.0,
            leviathan_mean_acceptance_length=leviathan_tokens_per_step(a, k) if k else None,
        ))
    return rows


def drafters(sweep: Sweep) -> list[str]:
    """The sweep's drafters at a fixed k (the ones the tuner can cut); not the baseline, not schedules."""
    return list(dict.fromkeys(c.drafter for c in sweep.cells if c.drafter != BASELINE and not c.scheduled))


def recorded_ks(sweep: Sweep, drafter: str) -> list[int]:
    return sorted({c.num_speculative_tokens for c in sweep.cells if c.drafter == drafter})


def provenance(sweep: Sweep) -> str:
    g, cells = sweep.grid, sweep.cells
    first = cells[0] if cells else None
    hardware = f"{first.platform} ({first.device_name})" if first else "no cells"
    versions = ", ".join(sorted({c.vllm_version for c in cells})) or "?"
    prompt_sets = ", ".join(sorted({c.prompt_set for c in cells})) or g.prompts
    concurrencies = ", ".join(str(c) for c in sorted({c.concurrency for c in cells}))
    repeats = sorted({c.repeats for c in cells})
    runs = f"{repeats[0]}" if len(repeats) == 1 else f"{repeats[0]}-{repeats[-1]}"
    traced = {c.traced for c in cells}
    how = "traced" if traced == {True} else "untraced (vLLM's counters)" if traced == {False} else "traced and untraced"
    return (f"concurrency {concurrencies} · prompt set '{prompt_sets}' · {g.num_requests} requests · "
            f"max {g.max_tokens} output tokens · temperature {g.temperature} · {runs} run(s) per cell · {how} · "
            f"{hardware} · vLLM {versions} · {g.target_model.rstrip('/').split('/')[-1]}")


def predict(sweep: Sweep, drafter: str, recorded_k: int | None = None) -> Prediction:
    """Predict every k <= K at every concurrency of the drafter: acceptance cut from its cell at K, pass
    times from the step cost fitted across all the sweep's cells (fit_step_cost).

    recorded_k: the K whose acceptance is cut (default: the drafter's largest k at each concurrency).
    """
    mine = [c for c in sweep.cells if c.drafter == drafter and not c.scheduled]
    if not mine:
        raise ValueError(f"no cells of drafter {drafter!r} at a fixed k in this sweep; it has: {drafters(sweep)}")
    baselines = {c.concurrency: c for c in sweep.cells if c.drafter == BASELINE}
    spec = mine[0].spec
    rows: list[PredictionRow] = []
    refusals: list[TuningRefusal] = []
    used: dict[int, int] = {}
    fit = fit_step_cost(sweep.cells)
    if reason := drafter_refusal(spec):
        refusals.append(TuningRefusal(concurrency=None, reason=reason))
    elif not baselines:
        refusals.append(TuningRefusal(concurrency=None, reason=(
            "no baseline cells: the cost of a target pass without drafts is unknown")))
    elif isinstance(fit, str):
        refusals.append(TuningRefusal(concurrency=None, reason=fit))
    else:
        for c in sorted({x.concurrency for x in mine}):
            at_c = [x for x in mine if x.concurrency == c]
            pick = [x for x in at_c if x.num_speculative_tokens == recorded_k] if recorded_k else at_c
            if not pick:
                refusals.append(TuningRefusal(concurrency=c, reason=f"no run of {drafter} at k={recorded_k} "
                                                                    "at this concurrency"))
                continue
            cell = max(pick, key=lambda x: x.num_speculative_tokens)
            result = predict_concurrency(cell, fit)
            if isinstance(result, TuningRefusal):
                refusals.append(result)
            else:
                used[c] = cell.num_speculative_tokens
                rows += result
    predicted = {(r.concurrency, r.num_speculative_tokens): r.output_tokens_per_s for r in rows}
    measured = []
    for cell in sorted(mine + list(baselines.values()), key=lambda x: (x.concurrency, x.num_speculative_tokens)):
        k = cell.num_speculative_tokens
        p = predicted.get((cell.concurrency, k))
        measured.append(MeasuredPoint(
            concurrency=cell.concurrency, num_speculative_tokens=k, output_tokens_per_s=cell.output_tokens_per_s,
            output_tokens_per_s_min=cell.output_tokens_per_s_min, output_tokens_per_s_max=cell.output_tokens_per_s_max,
            repeats=cell.repeats, traced=cell.traced, async_scheduling=cell.async_scheduling,
            mean_acceptance_length=cell.mean_acceptance_length, predicted_output_tokens_per_s=p,
            relative_error=(p - cell.output_tokens_per_s) / cell.output_tokens_per_s
            if p is not None and cell.output_tokens_per_s else None,
            used_for_prediction=k > 0 and used.get(cell.concurrency) == k,
        ))
    return Prediction(drafter=drafter, method=spec.method, target_model=sweep.grid.target_model, recorded_k=used,
                      spec=spec, step_cost=fit if isinstance(fit, StepCostFit) else None,
                      rows=rows, measured=measured, refusals=refusals, provenance=provenance(sweep))


NOT_MEASURED = "not measured"  # a k the sweep did not record


def table_at_k(pred: Prediction, k: int) -> list[dict]:
    """The Tuning page's table at one k: per concurrency the predicted figures, the measured cell (median,
    min-max, how it was measured) and the gap (predicted - measured) / measured, or why there is no number."""
    measured = {(m.concurrency, m.num_speculative_tokens): m for m in pred.measured}
    rows = []
    for c in pred.concurrencies:
        row, m = pred.at(c, k), measured.get((c, k))
        figures = {
            "output tokens/s (measured)": f"{m.output_tokens_per_s:.1f}" if m else NOT_MEASURED,
            "measured min-max": (("1 run" if m.repeats == 1 else f"{m.output_tokens_per_s_min:.1f}-"
                                  f"{m.output_tokens_per_s_max:.1f} ({m.repeats} runs)") if m else NOT_MEASURED),
        }
        if isinstance(row, TuningRefusal):
            rows.append({"concurrency": c, **figures, "refused": row.reason})
            continue
        scheduling = {True: "async scheduling on", False: "async scheduling off", None: "async scheduling unknown"}
        rows.append({
            "concurrency": c,
            "mean acceptance length": row.mean_acceptance_length,
            "tokens per target pass": row.tokens_per_step,
            "time per pass (ms, fitted)": row.pass_time_s * 1000,
            "output tokens/s (predicted)": row.output_tokens_per_s,
            "speedup vs baseline (predicted)": row.speedup,
            **figures,
            "measured as": (f"{'traced' if m.traced else 'untraced, vLLM counters'}, {scheduling[m.async_scheduling]}"
                            if m else NOT_MEASURED),
            # at the recorded k too: the fitted step cost's own miss
            "gap": f"{m.relative_error:+.1%}" if m and m.relative_error is not None else NOT_MEASURED,
        })
    return rows


def step_cost_text(fit: StepCostFit) -> str:
    """The fitted step cost in words (markdown), with how well it fits."""
    drafted = ", ".join(f"{d} {v * 1000:.2f} ms" for d, v in fit.per_drafted_token_s.items()) or "none"
    held = f" Held at 0 (fitted below zero): {', '.join(fit.held_at_zero)}." if fit.held_at_zero else ""
    knee = f" beyond the first {fit.knee_requests:g}" if fit.knee_requests else ""
    return (f"Time per target pass = **{fit.base_s * 1000:.1f} ms + {fit.per_request_s * 1000:.2f} ms per request in "
            f"the batch{knee} + per drafted token** ({drafted}). Least squares on relative error over the sweep's "
            f"{fit.num_cells} cells (baseline and every drafter): R² **{fit.r2:.3f}**, median error "
            f"**{fit.median_relative_error:.1%}** per cell.{held}")


def list_sweep_files(folder: Path = SWEEPS_DIR) -> list[Path]:
    """Recorded sweeps: `<folder>/<name>/sweep.json`, sorted by name."""
    return sorted(folder.glob("*/sweep.json"))
