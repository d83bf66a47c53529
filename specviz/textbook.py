"""The textbook formulas of speculative decoding beside what the engine measured.

Leviathan et al. (2023) give two formulas that every engineer meets first:

1. Tokens per target pass. With k drafts per pass and every draft accepted with the same chance α
   once the drafts before it were, one pass commits on average
       E(k, α) = (1 − α^(k+1)) / (1 − α) = 1 + α + α² + ... + α^k
   tokens, the correction or bonus token included (as vLLM's mean acceptance length counts it).
   Worked: α = 0.6, k = 3 -> (1 − 0.1296) / 0.4 = 2.176 (expected_tokens_per_pass).
2. Speedup over no drafting, with c the cost of drafting one token relative to one target pass:
       S(k, α, c) = E(k, α) / (k·c + 1)
   Worked: α = 0.6, k = 3, c = 0.1 -> 2.176 / 1.3 = 1.674 (textbook_speedup).
   Drafting k tokens pays while E(k, α) > k·c + 1; the break-even α is where they are equal:
   k = 3, c = 0.1 -> α = 0.2330 (1 + 0.2330 + 0.0543 + 0.0127 = 1.3) (break_even_alpha).

What specviz measures instead, and how the two meet:

- α from a run: the share of drafted steps whose FIRST draft was accepted, i.e. the α that solves
  E(1, α) = the run's acceptance length cut at k = 1 (1 + α). Why this one:
    * it is the formula's own α measured where nothing conditions it (no earlier draft to be right
      first), with no assumption about the later positions, so those positions test the formula's
      one assumption (a constant α) instead of being folded into the fit;
    * solving E(K, α) = the mean acceptance length at the recorded K instead makes E(K) equal the
      measurement by construction, which hides exactly the over-promise a newcomer should see;
    * vLLM's "draft acceptance rate" (accepted / drafted) is not α in the formula's own terms: the
      drafts after the first rejection are counted as drafted but can never be accepted, so under a
      constant α it reads (E − 1) / k, 0.393 for α = 0.6, k = 3; taken as α it under-promises.
  Worked (the ngram edit showcase run as recorded in bfloat16 on 2026-12-03, k = 3): per-position
  acceptance 0.779, 0.597, 0.536 -> α = 0.779.
- Per position: vLLM's per-position acceptance j (the share of drafted steps that accepted more
  than j drafts) is what the formula calls α^(j+1). The conditional rate, position j's share over
  position j−1's, is what it holds constant at α: 0.779, 0.766, 0.898 in that run, so there the
  assumption holds (E(k, α) within 2% of the measurement at k = 2 and 3).
- Over-promise at each k <= K: the recorded histogram cut at k (acceptance_at_k: a step that
  accepted a of K drafts accepts min(a, k) of k) gives the measured acceptance length at k; the
  formula's promise is E(k, α). Over-promise = E(k, α) / measured − 1: 0 at k = 1 by construction,
  positive where later drafts are accepted less often than the first, negative where more often.
  Worked: per-position rates 0.8, 0.5, 0.3 (conditional 0.8, 0.625, 0.6) -> measured 1.8, 2.3, 2.6;
  E(k, 0.8) = 1.8, 2.44, 2.952 -> over-promise 0, +6.1%, +13.5% (over_promise).
- c from a sweep: its step-cost fit (step_cost.StepCostFit) prices a pass over C requests as
  t = base + per_request · max(0, C − knee) + per_drafted_token · C · k. With every request drafting
  k tokens each pass, a request's speedup is E · t_baseline / t = E / (k · c(C) + 1) with
       c(C) = C · per_drafted_token / (base + per_request · max(0, C − knee))
  which is the formula's c, and it grows with the batch: drafting is paid per request, the weights
  are read once per pass (draft_cost). Worked: base 20 ms, 10 ms per request, knee 0, 5 ms per
  drafted token -> c(1) = 5 / 30 = 0.167, c(4) = 20 / 60 = 0.333.
- Predicted vs measured speedup per concurrency: S(K, α, c(C)) with the cell's own α, against the
  cell's measured output tokens/s over the baseline's at the same concurrency. The formula knows
  nothing of steps where the drafter proposed nothing (ngram without a match), of a decaying α, nor
  of run-to-run noise (the sweep's min-max): the gap is what those cost.
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
)
from .base import Frozen, SpecvizError
from .metrics import counted_step_figures, summarize
from .prediction import sweep_caption
from .runfile import Run
from .step_cost import StepCostFit, fit_step_cost
from .sweep import BASELINE, Sweep

FORMULA_KS = list(range(1, 9))  # E(k) and the break-even α are drawn for k = 1..8


class TextbookError(SpecvizError, ValueError):
    """The run or sweep cannot be set beside the formulas; the message says why and what to record."""


# ---- the formulas -------------------------------------------------------------------------------


def expected_tokens_per_pass(k: int, alpha: float) -> float:
    """E(k, α) = (1 − α^(k+1)) / (1 − α): α = 0.6, k = 3 -> 2.176; α = 1 -> k + 1; k = 0 -> 1."""
    return leviathan_tokens_per_step(alpha, k)


def textbook_speedup(k: int, alpha: float, draft_cost: float) -> float:
    """E(k, α) / (k·c + 1): α = 0.6, k = 3, c = 0.1 -> 2.176 / 1.3 = 1.674."""
    return expected_tokens_per_pass(k, alpha) / (k * draft_cost + 1)


def break_even_alpha(k: int, draft_cost: float) -> float | None:
    """The α below which drafting k tokens loses: E(k, α) = k·c + 1, solved by bisection.

    k = 1, c = 0.1 -> 1 + α = 1.1 -> α = 0.1; k = 3, c = 0.1 -> 0.2330. None when c >= 1: even
    every draft accepted (E = k + 1) does not pay for k·c + 1 >= k + 1, so no α breaks even.
    """
    if draft_cost >= 1:
        return None
    if draft_cost <= 0:
        return 0.0
    return fit_leviathan_rate(k * draft_cost + 1, k)


def alpha_at_length(mean_acceptance_length_at_k: float, k: int) -> float:
    """The α that solves E(k, α) = a measured acceptance length: 2.176 at k = 3 -> 0.6; at k = 1, length − 1."""
    return fit_leviathan_rate(mean_acceptance_length_at_k, k)


def first_draft_alpha(histogram: list[int]) -> float:
    """α = share of drafted steps whose first draft was accepted = alpha_at_length(cut at k=1, 1).

    Histogram [1, 1, 0, 2] (steps accepting exactly 0..3 drafts): 3 of 4 accepted the first -> 0.75.
    """
    if not sum(histogram):
        raise TextbookError("no drafted steps: nothing says how often a draft is accepted")
    return alpha_at_length(mean_acceptance_length(histogram, 1), 1)


def conditional_rates(rates_per_pos: list[float]) -> list[float | None]:
    """Position j's share of accepted drafts given draft j−1 was accepted: what the formula holds at α.

    vLLM's per-position rates [0.8, 0.5, 0.3] -> [0.8, 0.625, 0.6]; None after a position nobody reached.
    """
    out: list[float | None] = []
    before = 1.0
    for rate in rates_per_pos:
        out.append(rate / before if before else None)
        before = rate
    return out


def over_promise(formula: float, measured: float) -> float:
    """E(k, α) / measured − 1: the formula's 2.44 against a measured 2.3 -> +0.061 (it over-promises 6.1%)."""
    return formula / measured - 1


def draft_cost(fit: StepCostFit, drafter: str, concurrency: int) -> float:
    """c(C) = C · per drafted token / baseline pass time at C: the formula's c, read off the step-cost fit.

    base 20 ms, 10 ms per request, knee 0, 5 ms per drafted token -> c(1) = 0.167, c(4) = 0.333.
    """
    baseline_pass_s = fit.pass_time_s(BASELINE, concurrency, 0, 0.0)
    return concurrency * fit.per_drafted_token_s.get(drafter, 0.0) / baseline_pass_s


# ---- a run beside the formula -------------------------------------------------------------------


class LengthAtK(Frozen):
    """Tokens per drafted pass at one k: the formula's promise and, for k <= K, the measured cut."""

    num_speculative_tokens: int
    formula: float = Field(description="E(k, α) with the run's α")
    measured: float | None = Field(description="the recorded histogram cut at k; None above the recorded K "
                                               "or for a drafter whose drafts depend on k")
    over_promise: float | None = Field(description="formula / measured − 1")


class RunVsFormula(Frozen):
    """One speculative run set beside E(k, α) (module docstring)."""

    num_speculative_tokens: int = Field(description="the recorded K")
    alpha: float = Field(description="share of drafted steps whose first draft was accepted")
    draft_acceptance_rate: float = Field(description="accepted / drafted, as vLLM reports it (not α)")
    acceptance_rate_per_pos: list[float] = Field(description="vLLM's per-position rates; the formula: α^(j+1)")
    conditional_rate_per_pos: list[float | None] = Field(description="the formula holds these at α")
    lengths: list[LengthAtK] = Field(description="k = 1..max(8, K)")
    num_drafts: int
    cut_refused: str | None = Field(description="why the histogram cannot be cut below K (then only k = K "
                                                "is measured)")

    def at(self, k: int) -> LengthAtK:
        return next(x for x in self.lengths if x.num_speculative_tokens == k)

    @property
    def measured_length(self) -> float:
        """The run's mean acceptance length at its recorded K."""
        return self.at(self.num_speculative_tokens).measured

    @property
    def formula_positions(self) -> list[float]:
        """What the formula expects at each position: α, α², ..., α^K."""
        return [self.alpha ** (j + 1) for j in range(self.num_speculative_tokens)]


def histogram_of(run: Run) -> list[int]:
    """Drafted steps accepting exactly 0..K drafts: from the tracer's steps, or vLLM's counters without it."""
    return counted_step_figures(summarize(run)).accepted_histogram


def run_vs_formula(run: Run) -> RunVsFormula:
    """The run's α, E(k) for k = 1..8 and the measured acceptance length cut at each k <= K.

    Raises TextbookError for a run without drafts or with fewer than MIN_DRAFTED_STEPS drafted steps.
    """
    spec = run.meta.spec
    if spec is None:
        raise TextbookError("a run without speculative decoding has no acceptance to set beside the formula")
    return histogram_vs_formula(histogram_of(run), spec.num_speculative_tokens, refusal=drafter_refusal(spec))


def histogram_vs_formula(hist: list[int], K: int, refusal: str | None = None) -> RunVsFormula:
    """run_vs_formula from an accepted histogram at K.

    [6, 6, 6, 12] at K = 3 (30 drafted steps; per position 0.8, 0.6, 0.4): α = 0.8, measured 1.8, 2.4,
    2.8; E(k, 0.8) = 1.8, 2.44, 2.952 -> over-promise 0, +1.7%, +5.4%.
    """
    drafted = sum(hist)
    if len(hist) != K + 1 or drafted == 0:
        raise TextbookError(f"the run at k={K} has no acceptance figures (neither traced nor with vLLM's counters)")
    if drafted < MIN_DRAFTED_STEPS:
        raise TextbookError(f"only {drafted} drafted steps (at least {MIN_DRAFTED_STEPS} needed): record more "
                       "requests or longer outputs")
    alpha = first_draft_alpha(hist)
    lengths = []
    for k in range(1, max(FORMULA_KS[-1], K) + 1):
        formula = expected_tokens_per_pass(k, alpha)
        measured = mean_acceptance_length(hist, k) if k <= K and (refusal is None or k == K) else None
        lengths.append(LengthAtK(num_speculative_tokens=k, formula=formula, measured=measured,
                                 over_promise=None if measured is None else over_promise(formula, measured)))
    rates = acceptance_rate_per_pos(hist, K)
    accepted = sum(a * n for a, n in enumerate(hist))
    return RunVsFormula(num_speculative_tokens=K, alpha=alpha, draft_acceptance_rate=accepted / (drafted * K),
                        acceptance_rate_per_pos=rates, conditional_rate_per_pos=conditional_rates(rates),
                        lengths=lengths, num_drafts=drafted, cut_refused=refusal)


def over_promise_text(result: RunVsFormula) -> str:
    """One sentence per run: how far E(k, α) is from the measured length at each k <= K.

    "At k=2 the formula promises 2.44 tokens per pass and the run gave 2.40 (+1.7%); at k=3 2.95 against
    2.80 (+5.4%): the later drafts are accepted less often than the first, so the formula over-promises."
    """
    K = result.num_speculative_tokens
    if result.cut_refused is not None:
        at_k = result.at(K)
        return (f"The run cannot be cut below k={K} ({result.cut_refused}): at k={K} the formula promises "
                f"{at_k.formula:.2f} tokens per pass and the run gave {at_k.measured:.2f} ({at_k.over_promise:+.1%}).")
    shown = [x for x in result.lengths if x.measured is not None and x.num_speculative_tokens > 1]
    if not shown:
        return (f"A run at k={K} cannot test the formula's constant α: α is its first draft's rate, so the "
                "formula matches it by construction. Record at k >= 2 to see more.")
    parts = [f"at k={x.num_speculative_tokens} the formula promises {x.formula:.2f} tokens per pass and the run "
             f"gave {x.measured:.2f} ({x.over_promise:+.1%})" if i == 0 else
             f"at k={x.num_speculative_tokens} {x.formula:.2f} against {x.measured:.2f} ({x.over_promise:+.1%})"
             for i, x in enumerate(shown)]
    worst = shown[-1].over_promise
    if worst > 0.02:
        verdict = "the later drafts are accepted less often than the first, so the formula over-promises"
    elif worst < -0.02:
        verdict = ("the later drafts are accepted more often than the first (once the first is right, the rest "
                   "follow), so the formula under-promises")
    else:
        verdict = "the formula's constant α holds on this run (within 2%)"
    text = "; ".join(parts)
    return f"{text[0].upper()}{text[1:]}: {verdict}."


# ---- a sweep beside the formula -----------------------------------------------------------------


class SpeedupAtConcurrency(Frozen):
    """At one concurrency: the formula's speedup with the fitted c and the cell's α, and the measured one."""

    concurrency: int
    draft_cost: float = Field(description="c(C) from the step-cost fit")
    alpha: float = Field(description="the cell's first-draft acceptance")
    formula_tokens_per_pass: float = Field(description="E(K, α)")
    measured_mean_acceptance_length: float
    drafted_share: float = Field(description="share of request-steps that had drafts; the formula assumes 1")
    predicted_speedup: float = Field(description="E(K, α) / (K·c + 1)")
    output_tokens_per_s: float
    baseline_output_tokens_per_s: float
    measured_speedup: float
    relative_gap: float = Field(description="predicted / measured − 1")
    repeats: int


class SweepVsFormula(Frozen):
    drafter: str
    num_speculative_tokens: int
    alpha: float = Field(description="first-draft acceptance over all the drafter's cells at K")
    step_cost: StepCostFit
    rows: list[SpeedupAtConcurrency]
    break_even: dict[int, list[float | None]] = Field(description="concurrency -> break-even α at k = 1..8")
    skipped: list[str] = Field(description="concurrencies left out, and why")
    provenance: str

    def break_even_at(self, concurrency: int, k: int) -> float | None:
        return self.break_even[concurrency][FORMULA_KS.index(k)]


def sweep_vs_formula(sweep: Sweep, drafter: str, k: int) -> SweepVsFormula:
    """The formula's speedup at each concurrency of the drafter's cells at k, beside the measured speedup.

    Raises TextbookError when the step cost cannot be fitted or no concurrency has both a baseline and
    a cell of the drafter at k with enough drafted steps.
    """
    cells = {c.concurrency: c for c in sweep.cells if c.drafter == drafter and c.num_speculative_tokens == k}
    if not cells:
        raise TextbookError(f"no cell of {drafter!r} at k={k} in this sweep")
    baselines = {c.concurrency: c for c in sweep.cells if c.drafter == BASELINE}
    fit = fit_step_cost(sweep.cells)
    if isinstance(fit, str):
        raise TextbookError(f"the step cost cannot be fitted: {fit}")
    rows, skipped, pooled = [], [], [0] * (k + 1)
    for conc, cell in sorted(cells.items()):
        hist, base = cell.steps.accepted_histogram, baselines.get(conc)
        if base is None or not base.output_tokens_per_s:
            skipped.append(f"concurrency {conc}: no baseline cell")
            continue
        if len(hist) != k + 1 or sum(hist) < MIN_DRAFTED_STEPS or not cell.output_tokens_per_s:
            skipped.append(f"concurrency {conc}: too few drafted steps or no acceptance figures")
            continue
        pooled = [a + b for a, b in zip(pooled, hist)]
        alpha, c = first_draft_alpha(hist), draft_cost(fit, drafter, conc)
        predicted = textbook_speedup(k, alpha, c)
        measured = cell.output_tokens_per_s / base.output_tokens_per_s
        rows.append(SpeedupAtConcurrency(
            concurrency=conc, draft_cost=c, alpha=alpha, formula_tokens_per_pass=expected_tokens_per_pass(k, alpha),
            measured_mean_acceptance_length=mean_acceptance_length(hist, k),
            drafted_share=drafted_share(cell.steps, k), predicted_speedup=predicted,
            output_tokens_per_s=cell.output_tokens_per_s, baseline_output_tokens_per_s=base.output_tokens_per_s,
            measured_speedup=measured, relative_gap=predicted / measured - 1, repeats=cell.repeats))
    if not rows:
        raise TextbookError(f"no concurrency of {drafter!r} at k={k} can be compared: " + "; ".join(skipped))
    return SweepVsFormula(
        drafter=drafter, num_speculative_tokens=k, alpha=first_draft_alpha(pooled), step_cost=fit, rows=rows,
        break_even={r.concurrency: [break_even_alpha(j, r.draft_cost) for j in FORMULA_KS] for r in rows},
        skipped=skipped, provenance=sweep_caption(sweep))


def speedup_gap_text(result: SweepVsFormula) -> str:
    """Where the formula's speedup and the sweep's part, with the figures that say why.

    Rows with 44% of steps drafted, E(K) 2.86 against 2.91 measured, 3 runs per cell ->
    "The formula assumes every step drafts k=3 tokens; this drafter drafted at 44% of the steps (the others
    commit one token and cost no drafting). With one α, its tokens per drafted pass are -2% off the
    measured ones. Measured speedups are medians of 3 run(s) per cell: read small gaps as noise."
    """
    k = result.num_speculative_tokens
    shares = [r.drafted_share for r in result.rows]
    gaps = [over_promise(r.formula_tokens_per_pass, r.measured_mean_acceptance_length) for r in result.rows]
    share = f"{min(shares):.0%}" if max(shares) - min(shares) < 0.005 else f"{min(shares):.0%}-{max(shares):.0%}"
    drafting = (f"The formula assumes every step drafts k={k} tokens; this drafter drafted at {share} of the steps "
                "(the others commit one token and cost no drafting)." if min(shares) < 0.9 else
                f"The formula assumes every step drafts k={k} tokens; this drafter did at {share} of the steps.")
    lo, hi = min(gaps), max(gaps)
    spread = f"{lo:+.0%}" if abs(hi - lo) < 0.005 else f"{lo:+.0%} to {hi:+.0%}"
    repeats = sorted({r.repeats for r in result.rows})
    runs = f"{repeats[0]}" if len(repeats) == 1 else f"{repeats[0]}-{repeats[-1]}"
    return (f"{drafting} With one α, its tokens per drafted pass are {spread} off the measured ones. "
            f"Measured speedups are medians of {runs} run(s) per cell: read small gaps as noise.")


def closest_drafter(sweeps: dict[str, Sweep], method: str | None, k: int | None) -> tuple[str, str] | None:
    """(sweep name, drafter) to open beside a run of `method` at k: of that method's drafters with cells at k,
    the one that drafted at the largest share of its steps (the formula assumes every step drafts).

    ngram at k=3 in a chat sweep (6% of steps drafted) and a code sweep (44%) -> the code sweep's. None when
    no sweep has the method at k.
    """
    best, best_share = None, -1.0
    for name, sweep in sweeps.items():
        for cell in sweep.cells:
            if cell.method != method or cell.num_speculative_tokens != k or not k or cell.scheduled:
                continue
            share = drafted_share(cell.steps, k) if len(cell.steps.accepted_histogram) == k + 1 else 0.0
            if share > best_share:
                best, best_share = (name, cell.drafter), share
    return best
