"""The cost of one target pass, fitted across a sweep's cells (prediction.py's step 3).

One target pass over a batch of c requests verifies V = c + Dr tokens, one per request plus the
Dr = c * f * k drafts (so c * (k + 1) when every request drafts every step), and costs
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
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from .acceptance_at_k import drafted_share, tokens_per_step
from .base import Frozen
from .sweep import BASELINE, SweepCell


class StepCostFit(Frozen):
    """Seconds per target pass against the batch's work, fitted across a sweep's cells (module docstring).

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
            # knees that fit alike down to rounding (exact data fits every knee between two measured
            # concurrencies) keep the smallest: the float noise in their errors must not pick one
            if not isinstance(tried, str) and tried[0] < best[0] * (1 - 1e-9) - 1e-12:
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
