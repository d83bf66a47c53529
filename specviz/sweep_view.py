"""What the sweep pages show, as plain functions: the Throughput page's columns, captions and
tables of a sweep table (sweep_table.py), and the Tuning page's tables and words of a Prediction
and its confirmed picks (prediction.py, schedule.py). Pure: data in, text and rows out; the pages
only place them.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

import pandas as pd

from .charts import sweeps as sweep_charts
from .config import SpecConfig
from .prediction import Prediction, TuningRefusal
from .prompts import workload_name
from .schedule import Tuned
from .step_cost import StepCostFit
from .sweep import BASELINE, Sweep

# ---- the Throughput page -------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepSide:
    """One sweep as one column of the Throughput page: every cell, and the cells of the prompt set shown."""

    name: str
    sweep: Sweep
    full: pd.DataFrame  # every cell of the sweep
    table: pd.DataFrame  # the cells of the prompt set shown
    prompt_set: str

    @classmethod
    def of(cls, name: str, loaded: tuple[Sweep, pd.DataFrame], prompt_set: str | None) -> SweepSide:
        """The sweep's cells of `prompt_set`, or of its first prompt set when it has no such cells."""
        sweep, full = loaded
        sets = prompt_sets(full)
        shown = prompt_set if prompt_set in sets else sets[0]
        return cls(name, sweep, full, full[full["prompt_set"] == shown], shown)

    @property
    def model(self) -> str:
        return self.sweep.grid.target_model

    def concurrencies(self) -> list[int]:
        return sorted(int(c) for c in self.table["concurrency"].unique())

    def caption(self, concurrency: int | None = None) -> str:
        return sweep_charts.sweep_caption(self.table, concurrency=concurrency, model=self.model)

    def missing(self, concurrency: int) -> str | None:
        """Why this side has no chart at `concurrency`, or None when it has cells there."""
        if concurrency in self.concurrencies():
            return None
        return (f"'{self.name}' has no cells at concurrency {concurrency} (prompt set '{self.prompt_set}'); "
                f"it has {', '.join(map(str, self.concurrencies()))}.")

    def summary(self) -> str:
        """The line under the controls: workload, target, drafters, k, concurrencies, cells."""
        grid = self.sweep.grid
        return (f"**{self.name}** (workload: {workload_name(self.prompt_set)}; a speedup holds for its workload, "
                f"and the Playground's first screen may show another): target {grid.target_model.rstrip('/').split('/')[-1]} · drafters "
                f"{', '.join(sweep_charts.fixed_k_drafters(self.full)) or 'none'} · k {', '.join(map(str, grid.num_speculative_tokens))} "
                f"· concurrency {', '.join(map(str, grid.concurrencies))} · {len(self.sweep.cells)} cells")

    def incomplete(self) -> str | None:
        """How much of an unfinished sweep was measured, or None when it is complete."""
        if self.sweep.complete:
            return None
        return (f"'{self.name}' is incomplete: {len(self.sweep.cells)} of {len(self.sweep.expected_keys())} "
                "cells were measured. Run the same `specviz sweep` command again to finish it.")

    def measured_apart(self) -> str | None:
        return measured_apart_warning(self.sweep, self.name)

    def cpu_only(self) -> bool:
        """Every cell was measured with vLLM on CPU."""
        return bool((self.full["platform"].astype(str).str.lower() == "cpu").all())

    def acceptance_rates(self, drafter: str, k: int, concurrency: int) -> list[float] | str:
        """The cell's acceptance rate per draft position, or why there is nothing to draw."""
        label = sweep_charts.config_label(drafter, k)
        t = self.table
        cell = t[(t["drafter"] == drafter) & (t["num_speculative_tokens"] == k) & (t["concurrency"] == concurrency)]
        if cell.empty:
            return f"'{self.name}' has no cell {label} at concurrency {concurrency}."
        rates = list(cell["acceptance_rate_per_pos"].iloc[0])
        return rates or f"'{self.name}': {label} at concurrency {concurrency} verified no drafts."


def measured_apart_warning(sweep: Sweep, name: str) -> str | None:
    """What to make of rows measured in rounds of their own, after the rest of the sweep
    (Sweep.rows_measured_apart), or None when every row shares the sweep's rounds."""
    apart = sweep.rows_measured_apart()
    if not apart:
        return None
    rest = [c for c in sweep.cells if (c.drafter, c.num_speculative_tokens) not in apart]
    rows = "; ".join(f"{sweep_charts.config_label(*row)} ({sweep_charts.time_window(*window)})"
                     for row, window in apart.items())
    return (f"In '{name}', measured in rounds of their own, after the rest of the sweep "
            f"({sweep_charts.recorded_on(rest)}): {rows}. What the machine drifted between those times is in no "
            "cell's spread, so these rows may sit above or below the others for that alone. To set them side by side, "
            "measure the whole grid with them into a new --out folder (every row then shares its rounds); a tuned "
            "schedule is measured that way by `specviz tune`, head to head.")


def prompt_sets(table: pd.DataFrame) -> list[str]:
    """The prompt sets of a sweep table, in the order its cells have them."""
    return [str(p) for p in table["prompt_set"].unique()]


def measured_as(table: pd.DataFrame) -> str:
    """How the cells were measured: runs per cell, traced or not, async scheduling on or off."""
    runs = sorted({int(r) for r in table["repeats"]})
    span = str(runs[0]) if len(runs) == 1 else f"{runs[0]}-{runs[-1]}"
    runs_text = ("1 run per cell (no spread)" if runs == [1] else
                 f"{span} runs per cell, interleaved: figures are medians, bars the min-max over runs")
    traced = {bool(t) for t in table["traced"]}
    how = ("traced with the specviz tracer (which needs async scheduling off)" if traced == {True} else
           "untraced, with the server's own defaults: acceptance from vLLM's counters" if traced == {False} else
           "some cells traced (async scheduling off), some untraced (acceptance from vLLM's counters)")
    async_on = {a for a in table["async_scheduling"] if a is not None and a == a}
    scheduling = ("async scheduling on" if async_on == {True} else "async scheduling off" if async_on == {False}
                  else "async scheduling mixed" if async_on else "async scheduling unknown")
    if traced == {True} and async_on == {False}:
        return f"Measured: {runs_text} · {how}."
    return f"Measured: {runs_text} · {how} · {scheduling}."


def breakeven_lines(table: pd.DataFrame) -> list[str]:
    """Per drafter, in words, the concurrency from which no k beats the baseline (markdown)."""
    lines = []
    for d in sweep_charts.fixed_k_drafters(table):
        best = sweep_charts.best_k_rows(table, d)
        if best.empty:
            lines.append(f"**{d}**: no speedup figures (no baseline at its concurrencies).")
            continue
        c = sweep_charts.breakeven_concurrency(table, d)
        top = int(best["concurrency"].max())
        if c is None:
            lines.append(f"**{d}**: some k beats the baseline at every concurrency measured up to {top}.")
        elif c == int(best["concurrency"].min()):
            lines.append(f"**{d}**: no k beats the baseline at any concurrency measured ({c} to {top}).")
        else:
            lines.append(f"**{d}**: drafting stops paying at concurrency {c}: no k beats the baseline "
                         f"from there up to {top}, the highest measured.")
    return lines


def drafter_configs(table: pd.DataFrame, concurrency: int) -> dict[str, tuple[str, int]]:
    """The drafter cells at `concurrency` by their label ('ngram lookup 2-4 k=3'): label -> (drafter, k)."""
    rows = table[(table["concurrency"] == concurrency) & (table["drafter"] != BASELINE)]
    return {sweep_charts.config_label(d, k): (d, int(k)) for d, k in zip(rows["drafter"], rows["num_speculative_tokens"])}


def config_at_k(configs: dict[str, tuple[str, int]], k: int) -> str:
    """The first label at `k`, else the last label (the largest k)."""
    return next((label for label, (_, at) in configs.items() if at == k), list(configs)[-1])


def by_prompt_set(sides: list[SweepSide]) -> pd.DataFrame | None:
    """Every side's cells in one table, each prompt set named with its sweep when there are two sides;
    None when they hold one prompt set only (nothing to compare)."""
    parts = []
    for side in sides:
        t = side.full.copy()
        if len(sides) > 1:
            t["prompt_set"] = [f"{p} · {side.name}" for p in t["prompt_set"]]
        parts.append(t)
    combined = pd.concat(parts, ignore_index=True)
    return combined if combined["prompt_set"].nunique() > 1 else None


def csv_bytes(table: pd.DataFrame) -> bytes:
    """The table as the CSV the pages offer for download."""
    return table.to_csv(index=False).encode()


# ---- the Tuning page ---------------------------------------------------------------------------

NOT_MEASURED = "not measured"  # a k the sweep did not record
MEASURED_IN_SWEEP = "measured tok/s (sweep)"  # the Explore table's measured column: the sweep grid's cells


def table_at_k(pred: Prediction, k: int) -> list[dict]:
    """The Tuning page's table at one k: per concurrency the predicted figures, the measured cell as 'median
    (min-max)' output tokens/s ('· untraced, async' where vLLM's counters gave its acceptance, with how it
    scheduled) and the gap
    (predicted - measured) / measured, or why there is no number. Short headers (the page gives each its
    help), so the table fits a 1280 px screen."""
    measured = {(m.concurrency, m.num_speculative_tokens): m for m in pred.measured}
    rows = []
    for c in pred.concurrencies:
        row, m = pred.at(c, k), measured.get((c, k))
        spread = f" ({m.output_tokens_per_s_min:.1f}-{m.output_tokens_per_s_max:.1f})" if m and m.repeats > 1 else ""
        untraced = ""
        if m and not m.traced:  # how it ran matters on GPUs, where vLLM schedules asynchronously by default
            untraced = {True: " · untraced, async", False: " · untraced, sync"}.get(m.async_scheduling, " · untraced")
        figures = {MEASURED_IN_SWEEP: f"{m.output_tokens_per_s:.1f}{spread}{untraced}" if m else NOT_MEASURED}
        if isinstance(row, TuningRefusal):
            rows.append({"concurrency": c, **figures, "refused": row.reason})
            continue
        rows.append({
            "concurrency": c,
            "acceptance length": row.mean_acceptance_length,
            "tokens per pass": row.tokens_per_step,
            "ms per pass": row.pass_time_s * 1000,
            "predicted tok/s": row.output_tokens_per_s,
            "speedup": row.speedup,
            **figures,
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


def recommendation_table(result: Tuned) -> list[dict]:
    """The Tuning page's table, one row per concurrency, output tokens/s as 'median (min-max)'; k and its
    figure in one cell ('k=5: 42.7 (39.2-44.1)'), and the predicted best k's prediction and measurement in one
    ('k=5: 44.0 → 42.7', medians only, as the drafter idle), so the table fits a 1280 px screen. Every
    predicted and confirmed figure has the measured baseline beside it; the drafter idle (k=0 of a schedule)
    where the confirmation measured it; the schedule's column only when the picks make one. Each header names
    the measurement set its figures come from ('confirmed (confirmation)', 'schedule (head-to-head)'), so a
    config measured in two sets is never two unlabelled numbers."""
    scheduled = result.schedule is not None and bool(result.schedule.schedule)
    idle_measured = any(r.idle for r in result.rows)
    picked, measured_in = result.confirmed_by, result.schedule_measured_in or "not measured"
    rows = []
    for r in result.rows:
        base, at_predicted = r.baseline, r.at(r.predicted_k)
        row = {
            "concurrency": r.concurrency,
            f"baseline ({picked})": base.short() if base else NOT_MEASURED,
            f"predicted → measured ({picked})": f"k={r.predicted_k}: {r.predicted_output_tokens_per_s:.1f} → "
                                    + (f"{at_predicted.output_tokens_per_s:.1f}" if at_predicted else NOT_MEASURED),
            f"confirmed ({picked})": f"k={r.confirmed_k}: {r.confirmed.short()}",
            "speedup": round(r.confirmed.output_tokens_per_s / base.output_tokens_per_s, 2)
            if base and base.output_tokens_per_s else None,
        }
        if idle_measured:
            row[f"k=0, idle ({picked})"] = f"{r.idle.output_tokens_per_s:.1f}" if r.idle else NOT_MEASURED
        if scheduled:
            row[f"schedule ({measured_in})"] = (f"k={result.schedule.k_at(r.concurrency)}: "
                                                + (r.schedule.short() if r.schedule else NOT_MEASURED))
        rows.append(row)
    return rows


def schedule_column_source(result: Tuned, picked_on: Sweep) -> str | None:
    """Where the table's schedule column was measured, when not with the rest of the table: the head-to-head
    is a sweep of its own, and may have run on another machine than the confirmation the picks came from.
    None when the schedule's row was measured among the picks' cells (or not at all)."""
    if result.schedule_measured_in != "head-to-head":
        return None
    other = sweep_charts.machines(picked_on.cells) != sweep_charts.machines(result.schedule_cells)
    runs = runs_text({len(c.runs) for c in result.schedule_cells})
    return (f"The schedule column was measured in the head-to-head ({sweep_charts.recorded_on(result.schedule_cells)}; "
            f"{runs} per cell),"
            f" the other columns in the {result.confirmed_by} ({sweep_charts.recorded_on(picked_on.cells)})"
            + (", on other hardware" if other else "")
            + ": set the schedule against the static configs measured beside it (the chart and the verdict below), "
              "not against the confirmed column.")


def refusals_at_k(pred: Prediction, k: int) -> list[TuningRefusal]:
    """The refusals at one k beyond the prediction's own (a k above a concurrency's recorded K)."""
    found = (pred.at(c, k) for c in pred.concurrencies)
    return [r for r in found if isinstance(r, TuningRefusal) and r.concurrency is not None and r not in pred.refusals]


def untraced_note(pred: Prediction) -> str | None:
    """What the untraced cells' acceptance comes from, when some cells were measured untraced."""
    untraced = [m for m in pred.measured if not m.traced]
    if not untraced:
        return None
    return (f"{len(untraced)} of the {len(pred.measured)} cells shown were measured untraced, with the server's own "
            "defaults: their acceptance comes from vLLM's spec-decode counters (per draft position), which the "
            "tuner cuts at k as it cuts a traced histogram.")


def traced_note(pred: Prediction) -> str | None:
    """Why traced cells' throughput can differ from serving, when some cells were traced."""
    if not any(m.traced for m in pred.measured):
        return None
    return ("Traced cells ran with async scheduling off (the tracer needs it): on GPUs, where vLLM schedules "
            "asynchronously by default, serving throughput can differ. Record an untraced sweep "
            "(`specviz sweep --untraced`) to measure it as served.")


def runs_per_cell(result: Tuned) -> str:
    """'3 runs', '1 run' or '1, 3 runs': the runs per measured candidate."""
    return runs_text({m.repeats for r in result.rows for m in r.candidates})


def runs_text(counts) -> str:
    """Runs per cell: {3} -> '3 runs', {1} -> '1 run', {3, 1} -> '1, 3 runs'."""
    counts = sorted(counts)
    return ", ".join(map(str, counts)) + (" run" if counts == [1] else " runs")


def tune_command(sweep_name: str, drafter: str) -> str:
    """`python -m specviz tune` for a sweep in sample_runs/sweeps/, quoted for the shell."""
    return f"python -m specviz tune {shlex.quote(f'sample_runs/sweeps/{sweep_name}')} --drafter {shlex.quote(drafter)}"


def schedule_option(spec: SpecConfig) -> str:
    """`--schedule '<json>'`: the option that measures `spec` as a row of the sweep."""
    return f"--schedule {shlex.quote(json.dumps(spec.to_vllm()))}"


def _k_name(k: int, idle: bool = False) -> str:
    """'k=4'; k = 0 is 'no drafting', or 'k=0 (drafter loaded)' for the drafter's idle row."""
    return f"k={k}" if k else "k=0 (drafter loaded)" if idle else "no drafting"


def _and(items: list[str]) -> str:
    """['a'] -> 'a'; ['a', 'b', 'c'] -> 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def confidence_sentence(result: Tuned, picked_on: Sweep) -> str | None:
    """How sure the export is, in one sentence: per concurrency, which configs lie within each other's spread
    (Measured.level_with the best median) in the measurement set that decided the export, with its runs and
    when it was measured. The set is the one that measured the schedule beside the static configs (a
    head-to-head) when it holds two or more of them, else the cells the picks were made on (`picked_on`).

    Worked (code, ngram, head-to-head, 5 runs): c=1 k=5 35.0 (34.7-35.3), k=4 33.9 (32.8-34.3): k=5 clear;
    c=2 k=4 57.7 (56.5-58.4), k=5 57.6 (56.9-57.9): level -> "... k=5 leads clear of the others' spread at
    concurrency 1; k=4 and k=5 lie within each other's spread at 2; ..."
    None when nothing was measured."""
    if len(result.static_beside) > 1:
        by_c: dict[int, list[tuple[str, object]]] = {}
        for k, cells in sorted(result.static_beside.items()):
            for c, m in cells.items():
                by_c.setdefault(c, []).append((_k_name(k), m))
        cells, where = result.schedule_cells, f"the {result.schedule_measured_in}"
    else:
        by_c = {r.concurrency: [(_k_name(m.k, idle=r.idle is not None), m) for m in r.pick_candidates]
                for r in result.rows}
        cells, where = picked_on.cells, f"the {result.confirmed_by}"
    if not by_c:
        return None
    groups: dict[tuple[str, ...], list[int]] = {}
    for c in sorted(by_c):
        best_name, best = max(by_c[c], key=lambda nm: nm[1].output_tokens_per_s)
        level = tuple(n for n, m in by_c[c] if m is best or m.level_with(best))
        groups.setdefault(level if len(level) > 1 else (best_name,), []).append(c)
    parts = []
    for names, cs in groups.items():
        at = "concurrency " + _and([str(c) for c in cs])
        parts.append(f"{_and(list(names))} lie within each other's spread at {at}" if len(names) > 1
                     else f"{names[0]} leads clear of the others' spread at {at}")
    runs = runs_text({m.repeats for ms in by_c.values() for _, m in ms})
    return (f"**How sure:** in {where} ({runs} per config, {sweep_charts.recorded_on(cells)}), "
            + "; ".join(parts) + ".")


def explore_vs_export(pred: Prediction, result: Tuned) -> str:
    """Why the Explore chart's stars (the predicted best k) may differ from the export (picked on measurement),
    naming the concurrencies where they differ. Worked (code, ngram): stars at k=5 everywhere, export
    1: k=5 · 2-16: k=4 -> 'The stars mark the predicted best k. The export differs at concurrency 2, 4, 8
    and 16 (it serves k=4 there): it was picked on measurement, ...'."""
    exported = result.exported

    def served(c: int) -> int:
        return 0 if exported is None else exported.k_at(c)

    differ: dict[int, list[int]] = {}
    for rec in pred.recommend():
        if rec.num_speculative_tokens != served(rec.concurrency):
            differ.setdefault(served(rec.concurrency), []).append(rec.concurrency)
    if not differ:
        return "The stars mark the predicted best k; the export above serves the same k at every concurrency."
    where = "; ".join(f"{_k_name(k, idle=exported is not None)} at concurrency {_and([str(c) for c in cs])}"
                      for k, cs in sorted(differ.items()))
    return (f"The stars mark the predicted best k, not what to serve: the export above serves {where}, "
            f"picked on measurement ({'the confirmation' if result.confirmed_by == 'confirmation' else 'the sweep'}"
            f"{' and the head-to-head' if result.schedule_measured_in == 'head-to-head' else ''}), which a "
            "prediction from one cell cannot overrule.")
