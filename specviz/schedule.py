"""From the tuner's picks to what ships: confirm the picks by measurement, then a per-batch-size schedule.

    pred = prediction.predict(sweep, "ngram lookup 2-4")
    grid = confirmation_grid(sweep, pred, repeats=3)      # the cells that decide
    confirm = sweep_runner.run_sweep(grid, folder)          # measured (resumable), every cell once per round
    rows = confirmation_rows(pred, confirm)                 # per concurrency: predicted, confirmed, baseline
    spec = picks_schedule(pred.spec, {r.concurrency: r.confirmed_k for r in rows})
    h2h = sweep_runner.run_sweep(head_to_head_grid(confirm.grid, rows, spec, repeats=3), h2h_folder)
    result = tuned(pred, sweep, confirm, [h2h])             # what to export, and how the schedule measured
    # sweep_runner.run_confirmation does all this (and measures the drafter idle where the baseline wins, 2.)

The picks can also be made on a sweep that measured every k (confirmation_rows(pred, sweep)): the
tuner's prediction then only says which k to measure first.

1. Candidates (confirmation_candidates): at each concurrency the predicted best k and its neighbours
   (k - 1 and k + 1 within 0..the recorded K), and always k = 0, the baseline. The argmax of noisy
   predictions is biased up where the curve is flat, so the neighbours are measured too.
2. The pick (pick_on_measurement): the candidate with the highest median output tokens/s; then the
   smallest k whose median and the best's each lie within the other's min-max spread, since a
   smaller k costs less when the batch grows and measures the same. Worked: k=2 at 83.1 (81.0-84.0),
   k=3 at 84.0 (82.5-86.0) -> 84.0 lies in 81.0-84.0 and 83.1 in 82.5-86.0, so k=2.
   A k = 0 range of a schedule is not the baseline: the drafter stays loaded and vLLM calls it every
   step. Where the baseline wins a concurrency, the confirmation measures the drafter idle
   (SpecConfig.idle(), k = 0 at every batch size) as a row, and k = 0 then competes with that row's
   figure, not the baseline's (ConfirmationRow.idle). Worked (chat, ngram, c=4): no drafting 130.4,
   k=2 125.9 (119.7-129.1), ngram loaded at k=0 118.7 (117.5-120.7) (the picks' schedule's row there,
   where its k is 0) -> k=2: the best median, and k=0 lies outside its spread.
3. The schedule (schedule_for): vLLM's num_speculative_tokens_per_batch_size takes inclusive
   batch-size ranges. Each measured concurrency c_i covers the batch sizes above the previous one
   up to c_i (a run at concurrency c_i schedules c_i requests per step until its last requests
   finish); equal neighbours merge; vLLM keeps the last k for every larger batch. Picks {1: 4, 2: 2,
   4: 2, 8: 1, 16: 0} -> [[1, 1, 4], [2, 4, 2], [5, 8, 1], [9, 16, 0]]. One k everywhere is a static
   config, and k = 0 everywhere is no speculative config at all: a k = 0 range of a drafter with a
   model (EAGLE, draft model, MTP) still runs the drafter's forward pass every step, and even ngram's
   measured below no speculative config inside a traced schedule (docs/schedule-cost.md).
4. The head-to-head (head_to_head_grid): the schedule, no drafting and each picked k at every concurrency,
   measured side by side in the same rounds. A row measured in rounds of its own, after the candidates',
   is compared with them across whatever changed in between: the code sweep's schedule 1: k=5 · 2-16: k=4
   measured that way 2.3% and 4.2% below static k=4 at c=2 and 4 (102.0 against 104.4, 135.8 against
   141.8) while drafting 4 in 134 of 146 steps; head to head it measured 101.1 against 100.0 and 137.3
   against 136.7 (sample_runs/README.md).
5. The export (tuned): the schedule, until it is measured as a row (picks of one k everywhere are a
   static config, measured beside the baseline in the confirmation already). Then every static config
   measured beside it at all the same concurrencies (each k, and no drafting) competes with it, and
   replaces it (the highest sum over the concurrencies first) where either
   - it sums measurably more output tokens/s over the concurrencies than the schedule: its medians'
     sum above the sum of the schedule's maxes. The picks are each concurrency's best only as measured
     one at a time, and the schedule as one server may not keep them; or
   - the schedule's median lies at or below its max at every concurrency (the schedule is nowhere
     measurably better), since one config is simpler to serve.
   Worked (chat, ngram, head-to-head): the schedule 1: k=1 · 2-4: k=2 · 5-16: k=0 measured 33.1, 61.4,
   125.9, 182.4, 230.0 tok/s at c=1..16, 632.8 (622.3-636.0) summed; no drafting 34.2, 60.1, 129.2, 196.5,
   248.0, 667.9 summed: export no speculative config (the schedule measured better at c=2 alone). Code, ngram,
   head-to-head on the AMD EPYC: the schedule 1: k=5 · 2-16: k=4 summed 618.4 against static k=4's 616.2, and
   at c=1 its 60.1 lies above k=4's 57.0 max: it stays (on the Intel Xeon, 3 runs each: 378.9 against 381.9,
   and at c=1 31.7 above k=4's 30.4 max: it stays; 5 runs each: 435.7 against 434.8).
"""

from __future__ import annotations

import math

from pydantic import Field

from .base import Frozen
from .config import BatchSizeRange, SpecConfig, describe_spec
from .prediction import Prediction
from .sweep import BASELINE, Sweep, SweepCell, SweepError, SweepGrid, drafter_label


class Measured(Frozen):
    """A cell's output tokens/s over its runs: the median and the min-max spread."""

    k: int = Field(description="0: the baseline (no drafting)")
    output_tokens_per_s: float = Field(description="median over the runs")
    low: float
    high: float
    repeats: int

    @classmethod
    def of(cls, cell: SweepCell) -> Measured:
        return cls(k=cell.num_speculative_tokens, output_tokens_per_s=cell.output_tokens_per_s,
                   low=cell.output_tokens_per_s_min, high=cell.output_tokens_per_s_max, repeats=cell.repeats)

    def level_with(self, other: Measured) -> bool:
        """Each median lies within the other's spread: the runs cannot tell the two apart."""
        return (other.low <= self.output_tokens_per_s <= other.high
                and self.low <= other.output_tokens_per_s <= self.high)

    def short(self) -> str:
        """'83.1 (81.0-84.0)', or '83.1' for one run."""
        return f"{self.output_tokens_per_s:.1f}" + (f" ({self.low:.1f}-{self.high:.1f})" if self.repeats > 1 else "")

    def text(self) -> str:
        """'83.1 (81.0-84.0, 3 runs)'."""
        spread = f"{self.low:.1f}-{self.high:.1f}, {self.repeats} runs" if self.repeats > 1 else "1 run"
        return f"{self.output_tokens_per_s:.1f} ({spread})"


def pick_on_measurement(candidates: list[Measured]) -> Measured:
    """The best median, or the smallest k level with it (module docstring, 2.)."""
    best = max(candidates, key=lambda m: (m.output_tokens_per_s, -m.k))
    return min((m for m in candidates if m is best or m.level_with(best)), key=lambda m: m.k)


def schedule_for(picks: dict[int, int]) -> list[BatchSizeRange]:
    """Concurrency -> k as vLLM's batch-size ranges (module docstring, 3.)."""
    ranges: list[BatchSizeRange] = []
    first = 1
    for c in sorted(picks):
        if ranges and ranges[-1].k == picks[c]:
            ranges[-1] = ranges[-1].model_copy(update={"last": c})
        else:
            ranges.append(BatchSizeRange(first=first, last=c, k=picks[c]))
        first = c + 1
    return ranges


def picks_schedule(spec: SpecConfig, picks: dict[int, int]) -> SpecConfig | None:
    """The drafter with the picks' schedule; a static k when one k fits all, None when no k pays anywhere."""
    return spec.with_schedule(schedule_for(picks))


def confirmation_candidates(pred: Prediction, neighbours: int = 1) -> dict[int, list[int]]:
    """Concurrency -> the k to measure: the predicted best, its neighbours within 0..K, and 0 (module docstring, 1.).
    Predicted best k=2 with K=5 -> [0, 1, 2, 3]; best k=0 -> [0, 1]."""
    out = {}
    for rec in pred.recommend():
        K = pred.recorded_k[rec.concurrency]
        best = rec.num_speculative_tokens
        out[rec.concurrency] = sorted({0} | set(range(max(0, best - neighbours), min(K, best + neighbours) + 1)))
    return out


def confirmation_grid(sweep: Sweep, pred: Prediction, *, repeats: int = 3, neighbours: int = 1,
                      schedules: list[SpecConfig] = ()) -> SweepGrid:
    """The sweep's grid narrowed to the candidates (and the baseline at every concurrency), measured
    `repeats` times in rounds; `schedules` (a confirmation's picks' schedules) as rows of their own.
    Raises SweepError, with the tuner's reasons, when it predicted no concurrency."""
    candidates = confirmation_candidates(pred, neighbours)
    if not candidates:
        raise SweepError("the tuner predicted no concurrency, so there is nothing to confirm: " + "; ".join(
            f"c={r.concurrency}: {r.reason}" for r in pred.refusals))
    cells_at_k: dict[int, list[int]] = {}
    for c, ks in sorted(candidates.items()):
        for k in ks:
            cells_at_k.setdefault(k, []).append(c)
    drafter = {key: v for key, v in pred.spec.with_k(1).to_vllm().items() if key != "num_speculative_tokens"}
    return SweepGrid.model_validate(sweep.grid.model_dump() | dict(
        drafters=[drafter], num_speculative_tokens=sorted(k for k in cells_at_k if k), concurrencies=sorted(candidates),
        repeats=repeats, cells_at_k=cells_at_k, schedules=[s.to_vllm() for s in schedules if s.schedule]))


class ConfirmationRow(Frozen):
    """One concurrency: what the tuner predicted, what measurement picked, and what stands beside it."""

    concurrency: int
    predicted_k: int
    predicted_output_tokens_per_s: float
    candidates: list[Measured] = Field(description="the measured candidates, by k (k=0: the baseline)")
    confirmed_k: int
    schedule: Measured | None = Field(default=None, description="the picks' schedule's row here, if measured")
    idle: Measured | None = Field(default=None, description=(
        "k=0 with the drafter loaded (its idle row, SpecConfig.idle()) here, if measured; it stands for k=0 in "
        "the pick, since that is what a k = 0 range of a schedule serves (module docstring, 2.)"))

    @property
    def baseline(self) -> Measured | None:
        return self.at(0)

    @property
    def confirmed(self) -> Measured:
        return self.idle if self.confirmed_k == 0 and self.idle else self.at(self.confirmed_k)

    @property
    def pick_candidates(self) -> list[Measured]:
        """What the pick chooses from: the measured k > 0, and k = 0 as the idle row where measured, else the baseline."""
        zero = [self.idle] if self.idle else [m for m in self.candidates if m.k == 0]
        return zero + [m for m in self.candidates if m.k]

    def at(self, k: int) -> Measured | None:
        return next((m for m in self.candidates if m.k == k), None)


def confirmation_rows(pred: Prediction, measured: Sweep) -> list[ConfirmationRow]:
    """Per predicted concurrency that `measured` has cells at: the prediction, the measured candidates
    (every k of the drafter there, and the baseline) and the pick on measurement. `measured` is a
    confirmation, or a sweep that measured every k itself."""
    out = []
    idle = idle_row(pred, measured)
    for rec in pred.recommend():
        candidates = [Measured.of(cell) for cell in measured.cells if cell.concurrency == rec.concurrency
                      and not cell.scheduled and cell.drafter in (BASELINE, pred.drafter)]
        if candidates:
            row = ConfirmationRow(
                concurrency=rec.concurrency, predicted_k=rec.num_speculative_tokens,
                predicted_output_tokens_per_s=rec.output_tokens_per_s,
                candidates=sorted(candidates, key=lambda m: m.k), confirmed_k=0, idle=idle.get(rec.concurrency))
            out.append(row.model_copy(update={"confirmed_k": pick_on_measurement(row.pick_candidates).k}))
    return out


def idle_row(pred: Prediction, measured: Sweep) -> dict[int, Measured]:
    """Concurrency -> the drafter's idle row (k = 0 at every batch size) measured there, as k = 0."""
    label = schedule_label(pred.spec.idle())
    return {c.concurrency: Measured.of(c).model_copy(update={"k": 0}) for c in measured.cells
            if c.drafter == label and c.spec is not None and c.spec.drafts_nothing}


def needs_idle_row(rows: list[ConfirmationRow]) -> bool:
    """The baseline won a concurrency where the idle drafter was not measured: measure it before picking k = 0."""
    return any(r.confirmed_k == 0 and r.idle is None for r in rows)


class Tuned(Frozen):
    """The Tuning page's answer for one drafter: per concurrency predicted, confirmed and measured; the
    confirmed picks' schedule; and the spec to export (module docstring, 5.)."""

    rows: list[ConfirmationRow]
    schedule: SpecConfig | None = Field(description="the confirmed picks as vLLM's schedule (a static config when "
                                                    "one k fits all; None: no drafting pays at any concurrency)")
    exported: SpecConfig | None = Field(description="what to serve: the schedule, or the static config of replaced_by")
    confirmed_by: str = Field(description="'confirmation' (specviz tune measured it) or 'sweep' (its own cells)")
    schedule_measured_in: str | None = Field(default=None, description="'head-to-head', 'sweep' or 'confirmation': "
                                                                       "where the schedule was measured as a row; "
                                                                       "None: not yet")
    schedule_cells: list[SweepCell] = Field(default_factory=list, description=(
        "every cell of the sweep that holds the schedule's row (the row and what was measured beside it in the "
        "same rounds), for where and when it was recorded"))
    static_beside: dict[int, dict[int, Measured]] = Field(
        default_factory=dict, description="k (0: no drafting) -> concurrency -> the static config measured in the "
                                          "same sweep as the schedule's row, at the row's concurrencies")
    schedule_sum: Measured | None = Field(default=None, description="the schedule's row summed over the "
                                                                    "concurrencies it was measured at")
    replaced_by: Measured | None = Field(default=None, description="the static config (k; 0: no drafting) exported "
                                                                   "instead, summed over the same concurrencies")


def tuned(pred: Prediction, sweep: Sweep, confirmation: Sweep | None, head_to_heads: list[Sweep] = ()) -> Tuned:
    """Pick on the confirmation when there is one, else on the sweep's own cells; the schedule's measured
    row from its head-to-head (the one of `head_to_heads` that measured it), else the sweep (beside every
    static k), else the confirmation; the export (module docstring, 5.)."""
    rows = confirmation_rows(pred, confirmation or sweep)
    schedule = picks_schedule(pred.spec, {r.concurrency: r.confirmed_k for r in rows}) if rows else None
    found: dict = {}
    if schedule is not None and schedule.schedule:
        label = schedule_label(schedule)
        sources = [*(("head-to-head", h) for h in head_to_heads), ("sweep", sweep), ("confirmation", confirmation)]
        for name, source in sources:
            cells = {c.concurrency: Measured.of(c) for c in (source.cells if source else []) if c.drafter == label}
            if cells:
                rows = [r.model_copy(update={"schedule": cells.get(r.concurrency)}) for r in rows]
                static: dict[int, dict[int, Measured]] = {}
                for c in source.cells:
                    if c.drafter in (BASELINE, pred.drafter) and not c.scheduled and c.concurrency in cells:
                        static.setdefault(c.num_speculative_tokens, {})[c.concurrency] = Measured.of(c)
                found = dict(schedule_measured_in=name, schedule_cells=source.cells, static_beside=static,
                             schedule_sum=summed(list(cells.values()), schedule.num_speculative_tokens),
                             replaced_by=replacing_config(cells, static))
                break
    elif schedule is not None and all(r.at(schedule.k) and r.baseline for r in rows):
        # one k everywhere: its candidates are its row, measured beside the baseline in the same rounds
        cells = {r.concurrency: r.at(schedule.k) for r in rows}
        static = {0: {r.concurrency: r.baseline for r in rows}}
        found = dict(schedule_measured_in="confirmation" if confirmation else "sweep",
                     schedule_cells=(confirmation or sweep).cells, static_beside=static,
                     schedule_sum=summed(list(cells.values()), schedule.k), replaced_by=replacing_config(cells, static))
    instead = found.get("replaced_by")
    return Tuned(rows=rows, schedule=schedule, exported=schedule.with_k(instead.k) if instead else schedule,
                 confirmed_by="confirmation" if confirmation else "sweep", **found)


def head_to_head_grid(confirmation: SweepGrid, rows: list[ConfirmationRow], schedule: SpecConfig, *,
                      repeats: int = 3) -> SweepGrid:
    """The picks' schedule beside the static configs it must beat, in the same rounds (module docstring, 4.):
    no drafting and each picked k > 0 at every confirmed concurrency. Picks {1: 5, 2: 4, 4: 4} -> the
    baseline, k=4 and k=5 at c=1, 2 and 4, and the schedule 1: k=5 · 2-4: k=4."""
    return SweepGrid.model_validate(confirmation.model_dump() | dict(
        num_speculative_tokens=sorted({r.confirmed_k for r in rows} - {0}),
        concurrencies=[r.concurrency for r in rows], repeats=repeats, cells_at_k=None,
        schedules=[schedule.to_vllm()]))


def best_beside(result: Tuned, concurrency: int) -> Measured | None:
    """The static config (k; 0: no drafting) with the best median at `concurrency` among those measured
    beside the schedule's row."""
    at_c = [by_c[concurrency] for by_c in result.static_beside.values() if concurrency in by_c]
    return max(at_c, key=lambda m: (m.output_tokens_per_s, -m.k), default=None)


def summed(measured: list[Measured], k: int) -> Measured:
    """One config's output tokens/s summed over concurrencies: the medians, and the runs' mins and maxes
    summed as its spread. k=4 at 58.7 (55.5-59.3) and 104.4 (104.2-105.9) -> 163.1 (159.7-165.2)."""
    return Measured(k=k, output_tokens_per_s=sum(m.output_tokens_per_s for m in measured),
                    low=sum(m.low for m in measured), high=sum(m.high for m in measured),
                    repeats=min(m.repeats for m in measured))


def replacing_config(schedule_row: dict[int, Measured], static: dict[int, dict[int, Measured]]) -> Measured | None:
    """The static config (k; 0: no drafting) measured at every concurrency of the schedule's row that sums
    measurably more than the schedule there (its medians above the schedule's maxes, summed), or that the
    schedule is nowhere measurably better than (its median at or below the config's max at each), summed
    over them (the highest sum first); None: neither holds for any (module docstring, 5.)."""
    schedule_high = sum(m.high for m in schedule_row.values())

    def replaces(by_c: dict[int, Measured]) -> bool:
        more = sum(m.output_tokens_per_s for m in by_c.values()) > schedule_high
        return more or all(schedule_row[c].output_tokens_per_s <= m.high for c, m in by_c.items())

    instead = [summed(list(by_c.values()), k) for k, by_c in static.items()
               if by_c.keys() == schedule_row.keys() and replaces(by_c)]
    return max(instead, key=lambda m: (m.output_tokens_per_s, -m.k), default=None)


def export_reason(result: Tuned) -> str | None:
    """Why a static config is exported in place of the picks' schedule; None when it is not."""
    if result.replaced_by is None or result.schedule_sum is None:
        return None
    instead = describe_spec(result.exported)
    picks = ("the picks' schedule" if result.schedule.schedule
             else f"the picks ({describe_spec(result.schedule)} at every concurrency)")
    sums = f"summed over the concurrencies, {instead} {result.replaced_by.short()} against {picks} {result.schedule_sum.short()}"
    if result.replaced_by.output_tokens_per_s > result.schedule_sum.high:
        return (f"Measured beside {picks} in the {result.schedule_measured_in}, {instead} served measurably more in "
                f"total ({sums}: its median sum above the picks' maxes summed). So the export is {instead}.")
    return (f"Measured beside {picks} in the {result.schedule_measured_in}, {instead} was nowhere measurably worse: "
            f"at every concurrency the picks' median lies at or below its max ({sums}). So the export is "
            f"{instead}: one config everywhere, simpler to serve.")


def schedule_verdict(result: Tuned) -> list[str]:
    """What the picks' schedule's measured row says against the static configs measured beside it, as
    sentences; [] when the picks make no schedule or its row is not measured yet.

    One sentence naming each concurrency where the schedule's median falls below the spread of the best
    static config measured beside it (the check benchmarks/tuning_accuracy.py makes), one on what a k=0
    range costs when any of those is one, then the sums over the concurrencies: the schedule, no drafting,
    the best single static k, and each concurrency's best static config.
    Worked (chat, EAGLE-3, 1: k=3 · 2-4: k=1 · 5-16: k=0, head-to-head): at c=16 the schedule (k=0)
    measured 227.1 (215.9-238.4) against no speculative config at 240.7 (238.7-243.3): short, as at c=4
    and 8; EAGLE-3's k=0 range still runs the drafter (docs/schedule-cost.md). Summed over c=1..16:
    schedule 646.2, no drafting 639.7, static k=1 576.9, k=3 486.2: at or above every single static config.
    A single static config that sums above the schedule is named, and whether its sum lies inside the schedule's
    runs summed (code, ngram, head-to-head on the Intel Xeon, 3 runs each: static k=4 381.9 against the schedule's 378.9
    (361.9-387.0): 0.8% below it, inside).
    Where a drafting range is short of no drafting and the idle row measured no better than its k (chat in
    float32, EAGLE-3, c=16: k=0 loaded 99.4 against k=1's 101.6), a sentence says k=0 would not close it.
    """
    rows = [r for r in result.rows if r.schedule]
    if not rows or result.schedule is None or not result.schedule.schedule:
        return []
    best = {r.concurrency: best_beside(result, r.concurrency) or r.confirmed for r in rows}
    short = short_of_best(result)
    out = []
    where = f"in the {result.schedule_measured_in}"
    if short:
        out.append(f"Below the spread of the best static config measured beside it ({where}) at concurrency " + "; ".join(
            f"{r.concurrency}: the schedule (k={result.schedule.k_at(r.concurrency)}) {r.schedule.short()} against "
            f"{k_text(best[r.concurrency].k)} {best[r.concurrency].short()}" for r in short)
            + " (output tokens/s, median (min-max)).")
    else:
        out.append(f"At every concurrency measured the schedule's median lies within or above the spread of the best "
                   f"static config measured beside it ({where}).")
    if same_k := [r for r in short if result.schedule.k_at(r.concurrency) == best[r.concurrency].k > 0]:
        runs = {m.repeats for r in same_k for m in (r.schedule, best[r.concurrency])}
        one_in = alike_miss_chance(min(runs)) if len(runs) == 1 else None
        out.append("At concurrency " + ", ".join(str(r.concurrency) for r in same_k) + " the schedule serves the k of "
                   "the static config beside it; the two differ only at the smaller batches a cell passes through as its "
                   "requests finish." + (f" Two configs that serve alike, {min(runs)} runs each, fall below each other's "
                                         f"spread like this 1 time in {one_in}." if one_in else ""))
    if any(result.schedule.k_at(r.concurrency) == 0 for r in short):
        out.append("Where its k is 0 the schedule drafts nothing but still serves with the speculative config, and "
                   "that cost this much here (docs/schedule-cost.md measures it by itself).")
    if idle_no_better := [r for r in short if result.schedule.k_at(r.concurrency) and best[r.concurrency].k == 0
                          and r.idle is not None and r.idle.output_tokens_per_s <= r.confirmed.output_tokens_per_s]:
        out.append("A k=0 range would not close that gap: in the confirmation the drafter loaded at k=0 measured "
                   + "; ".join(f"{r.idle.short()} at concurrency {r.concurrency} against k={r.confirmed_k}'s "
                               f"{r.confirmed.short()}" for r in idle_no_better)
                   + ". Only no speculative config serves faster there, and one server cannot drop it for some "
                     "batch sizes and keep it for others (docs/schedule-cost.md).")
    concurrencies = [r.concurrency for r in rows]
    whole = static_sums(result)
    if len(rows) == len(result.rows) and whole:
        schedule_sum = sum(r.schedule.output_tokens_per_s for r in rows)
        sums = [f"schedule {schedule_sum:.1f}"] + [f"{k_text(k)} {m.output_tokens_per_s:.1f}" for k, m in sorted(whole.items())]
        top, spread = summed_above_schedule(result), summed([r.schedule for r in rows], 0)
        verdict = ("at or above every single static config" if top is None else
                   f"{1 - schedule_sum / top.output_tokens_per_s:.1%} below {k_text(top.k)}"
                   + (f", whose sum lies inside the schedule's runs summed ({spread.low:.1f}-{spread.high:.1f})"
                      if top.output_tokens_per_s <= spread.high else ""))
        out.append(f"Summed over concurrency {', '.join(map(str, concurrencies))} (medians, {where}): "
                   f"{', '.join(sums)}; each concurrency's best static config "
                   f"{sum(best[c].output_tokens_per_s for c in concurrencies):.1f}. The schedule is {verdict}.")
    return out


def single_run_caveat(result: Tuned) -> str | None:
    """What a reader must know when the picks, the checks or the export rest on cells of one run: no spread was
    measured, so "within", "below" and "measurably" compare single runs. None when every cell has two or more.

    Worked (tune from one ngram k=5 code run, --repeats 1): the schedule's 33.0 at c=1 read as "below" static
    k=5's 33.1, and k=4's 166.1 summed as "measurably more" than the schedule's 163.2.
    """
    measured = [m for r in result.rows for m in (*r.candidates, r.idle, r.schedule) if m is not None]
    measured += [m for by_c in result.static_beside.values() for m in by_c.values()]
    if not measured or min(m.repeats for m in measured) > 1:
        return None
    return ("Some cells here are a single run: with no spread measured, the picks, the checks against the static "
            "configs and the export follow single runs, whose noise they cannot show. `specviz tune --repeats 3` "
            "measures each cell three times, in rounds.")


def static_sums(result: Tuned) -> dict[int, Measured]:
    """Each static config (k; 0: no drafting) measured beside the schedule at every concurrency of its row,
    summed over them."""
    concurrencies = [r.concurrency for r in result.rows if r.schedule]
    return {k: summed([by_c[c] for c in concurrencies], k) for k, by_c in result.static_beside.items()
            if concurrencies and all(c in by_c for c in concurrencies)}


def summed_above_schedule(result: Tuned) -> Measured | None:
    """The single static config whose medians, summed over the concurrencies, top the schedule's (the highest
    one); None when the schedule sums at or above each, or its row is not measured at every concurrency."""
    measured = [r.schedule for r in result.rows]
    if not measured or None in measured:
        return None
    schedule_sum = sum(m.output_tokens_per_s for m in measured)
    above = [m for m in static_sums(result).values() if m.output_tokens_per_s > schedule_sum]
    return max(above, key=lambda m: m.output_tokens_per_s, default=None)


def short_of_best(result: Tuned) -> list[ConfirmationRow]:
    """The concurrencies where the schedule's measured median lies below the spread of the best static config
    measured beside it (the confirmed pick where nothing was).

    Read one such concurrency with care (alike_miss_chance): two configs that serve alike fail this check 1
    time in 5 at 3 runs each (the median of 3 below the lowest of 3 others: the slowest 2 of the 6 runs both
    the schedule's, 4 of the 20 equally likely orderings), 1 time in 12 at 5 runs each (21 of 252); at one
    of 4 such concurrencies or more, 59% and 29% of the time; more often still when the best is picked as
    the highest median. The code sweep's schedule runs k=4 at batch sizes 2-16, as static k=4 does: on the
    AMD EPYC it measured 0.3% below k=4's spread at c=16; on the Intel Xeon, 3 runs each, within it at every
    concurrency; 5 runs each, 0.2 tok/s below it at c=8."""
    return [r for r in result.rows if r.schedule and r.schedule.output_tokens_per_s
            < (best_beside(result, r.concurrency) or r.confirmed).low]


def alike_miss_chance(runs: int) -> int | None:
    """How often short_of_best flags one of two configs that serve alike, `runs` runs each, as N in "1 time in
    N": when the slowest (runs + 1) // 2 of all 2 * runs runs are all its own, every ordering equally likely.
    3 -> 5 (4 of 20 orderings); 5 -> 12 (21 of 252). None for an even count, whose median is a mean."""
    if runs % 2 == 0:
        return None
    below = (runs + 1) // 2
    return round(math.comb(2 * runs, runs) / math.comb(2 * runs - below, runs - below))


def k_text(k: int) -> str:
    """'static k=4', or 'no drafting' for k = 0."""
    return f"static k={k}" if k else "no drafting"


def schedule_label(spec: SpecConfig) -> str:
    """The sweep's label of a schedule row (sweep.drafter_label)."""
    return drafter_label(spec.to_vllm())


class EngineCost(Frozen):
    """What a sweep cost in engine time: starts, measured runs, and the seconds those runs took."""

    engine_starts: int = Field(description="one per configuration per repeat round")
    runs: int
    run_seconds: float = Field(description="sum of the measured runs' wall times (warm-ups and starts not counted)")
    start_seconds: float = Field(description="sum of the engines' start-up times, as recorded with each cell")

    @property
    def seconds(self) -> float:
        return self.run_seconds + self.start_seconds

    def text(self) -> str:
        """'57 runs, 12 engine starts, 1843 s'."""
        return f"{self.runs} runs, {self.engine_starts} engine starts, {self.seconds:.0f} s"

    @classmethod
    def of(cls, cells: list[SweepCell]) -> EngineCost:
        runs = [r for c in cells for r in c.runs]
        starts = {(c.drafter, c.num_speculative_tokens, r.repeat): r.engine_ready_after_s or 0.0
                  for c in cells for r in c.runs}
        return cls(engine_starts=len(starts), runs=len(runs), run_seconds=sum(r.wall_time_s for r in runs),
                   start_seconds=sum(starts.values()))
