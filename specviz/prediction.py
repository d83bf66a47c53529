"""The prediction: acceptance and throughput at every num_speculative_tokens k <= K from a sweep.

Inputs: a sweep (see `specviz.sweep`). The acceptance at every k <= K comes from one cell of the
drafter at K per concurrency (traced, or untraced with vLLM's counters); the cost of a target pass
comes from a model fitted across all the sweep's cells. The drafter's cells at other k are then
drawn beside the prediction to show how far it is from what was measured.

1. Acceptance at k <= K: the recorded histogram cut at k (acceptance_at_k.py, with worked numbers):
   a step that accepted a of K drafts accepts min(a, k) of k. Without the tracer the histogram comes
   from vLLM's per-position counters, which hold the same information: steps accepting exactly a
   drafts = per_pos[a-1] - per_pos[a] (metrics.counted_step_figures).
2. Tokens per target pass (per request), L(k) (acceptance_at_k.py). Steps without drafts (the prefill,
   and steps where the drafter found nothing) commit 1 token each and happen at the same places in
   the output whatever k is (a development sweep of ngram on SmolLM2 had 88, 88, 88 of them at
   k=1, 3, 5, and L(k) predicted from k=5 was within 3% of the measured one): only the drafted
   steps get fewer when each commits more. In the example there, L(1) = 1.569 and f(1) = 0.759.
   (Holding the drafted share f fixed at its value at K instead, L(k) = 1 + f * E[min(a,k)],
   under-predicts small k for drafters that often find nothing; the benchmark prints both.)
3. Step cost, fitted across all the sweep's cells (step_cost.py, with the knee and worked numbers):
   one target pass over c requests verifies c + Dr tokens, Dr = c * f * k the drafts, and costs
       t = base + per_request * max(0, c - knee) + per_drafted_token[drafter] * Dr
   Worked: base 20 ms, 10 ms per request, knee 0, 5 ms per drafted token -> at c=4, k=1, f=1:
   Dr = 4, t = 20 + 40 + 20 = 80 ms.
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
k above the recorded K, a drafter whose drafts depend on k (acceptance_at_k.drafter_refusal), a cell without acceptance figures
(neither traced nor with vLLM's counters), too few drafted steps, or too few cells to fit the step cost.
"""

from __future__ import annotations

from pydantic import Field

from .acceptance_at_k import (
    MIN_DRAFTED_STEPS,
    acceptance_rate_per_pos,
    drafted_share,
    drafter_refusal,
    fit_leviathan_rate,
    leviathan_tokens_per_step,
    mean_acceptance_length,
    tokens_per_step,
)
from .base import Frozen
from .config import SpecConfig
from .step_cost import StepCostFit, fit_step_cost
from .sweep import BASELINE, Sweep, SweepCell


class TuningRefusal(Frozen):
    """No number, and why: shown plainly instead of a prediction."""

    concurrency: int | None = Field(description="None when the whole drafter is refused")
    num_speculative_tokens: int | None = None
    reason: str

    def __str__(self) -> str:
        where = [f"concurrency {self.concurrency}"] if self.concurrency is not None else []
        where += [f"k={self.num_speculative_tokens}"] if self.num_speculative_tokens is not None else []
        return (f"{', '.join(where)}: " if where else "") + self.reason


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


def fixed_k_drafters(sweep: Sweep) -> list[str]:
    """The sweep's drafters at a fixed k (the ones the tuner can cut); not the baseline, not schedules."""
    return list(dict.fromkeys(c.drafter for c in sweep.cells if c.drafter != BASELINE and not c.scheduled))


def recorded_ks(sweep: Sweep, drafter: str) -> list[int]:
    return sorted({c.num_speculative_tokens for c in sweep.cells if c.drafter == drafter})


def sweep_caption(sweep: Sweep) -> str:
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
        raise ValueError(f"no cells of drafter {drafter!r} at a fixed k in this sweep; it has: {fixed_k_drafters(sweep)}")
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
                      rows=rows, measured=measured, refusals=refusals, provenance=sweep_caption(sweep))
