"""How good is the tuner? Predict every cell of the recorded sweeps from the tuner's inputs, and compare.

    .venv/bin/python benchmarks/tuning_accuracy.py [sample_runs/sweeps/NAME/sweep.json ...]

Without arguments: every sweep under sample_runs/sweeps/. For each drafter the acceptance at every
k comes from its cell at the largest k (K) at each concurrency, and the time per target pass from
the step cost fitted across all the sweep's cells (`specviz.prediction.predict`). Its cells at smaller k
were measured too and serve as the truth. Printed, with each sweep's provenance:
  1. how far a cell's runs spread about their median, then the step-cost fit: its terms, R² and median
     relative error over the cells;
  2. per predicted cell (k < K): mean acceptance length, tokens per target pass L(k) (both L models
     of specviz.prediction), time per pass and output tokens/s, predicted against measured (median and
     min-max over the cell's runs), and the prediction with that cell left out of the fit, so an
     error shows whether it came from acceptance or from the step cost;
  3. the median |relative error| of predicted throughput (target: at most 5%), in-sample and left-out;
  4. per concurrency: the recommended k, its measured throughput, the best measured k with its
     spread over repeats, and whether the recommended k's measured median lies within that spread
     (with one run per cell the spread is a point: only the best k itself is within it);
  5. where `specviz tune` confirmed the drafter (<sweep>/confirm/<drafter>/): the k picked on those fresh
     runs, checked against the sweep's own measurement the same way; and where the sweep (or else the
     confirmation) measured the picks' schedule as a row, the schedule against every static k measured
     beside it: within the best's spread at each concurrency, and its output tokens/s summed over the
     concurrencies against each static k's sum; and what is exported (a static config the schedule
     measured better than nowhere replaces it: specviz.schedule, 4.).
The totals over all sweeps close the report.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from specviz.acceptance_at_k import tokens_per_step, tokens_per_step_fixed_share
from specviz.charts import sweeps as sweep_charts
from specviz.config import describe_spec
from specviz.files import REPO_DIR
from specviz.prediction import TuningRefusal, fixed_k_drafters, predict
from specviz.schedule import EngineCost, export_reason, schedule_label, schedule_verdict, tuned
from specviz.step_cost import fit_step_cost, measured_pass
from specviz.sweep import BASELINE, Sweep
from specviz.sweep_files import list_sweep_files, load_confirmation, load_head_to_heads, load_sweep

TARGET_ERROR = 0.05


@dataclass
class Totals:
    errors: list[float] = field(default_factory=list)  # predicted / measured - 1, cells at k < K
    left_out: list[float] = field(default_factory=list)  # the same with the cell left out of the fit
    within_spread: int = 0
    within_5pct: int = 0
    checked: int = 0  # concurrencies whose recommended k was measured
    unmeasured: list[str] = field(default_factory=list)  # where the recommended k was not measured
    among_measured_within: int = 0  # the best predicted of the measured k, within the best's spread
    confirmed_within: int = 0  # the confirmed pick's measured median in the sweep, within the best's spread
    confirmed_checked: int = 0
    confirmed_outside: list[str] = field(default_factory=list)
    confirmed_not_in_sweep: list[str] = field(default_factory=list)  # the pick's k is not a k the sweep recorded
    schedules: list[str] = field(default_factory=list)  # one line per measured schedule row
    points: int = 0  # concurrencies x drafters predicted
    fits: list[str] = field(default_factory=list)


def _med(xs: list[float]) -> str:
    return f"{statistics.median(abs(x) for x in xs):.1%} (n={len(xs)})" if xs else "-"


def _spread(cell) -> str:
    if cell.repeats == 1:
        return f"{cell.output_tokens_per_s:.1f} (1 run)"
    return (f"{cell.output_tokens_per_s:.1f} [{cell.output_tokens_per_s_min:.1f}-{cell.output_tokens_per_s_max:.1f}, "
            f"{cell.repeats} runs]")


def report(sweep: Sweep, folder: Path, name: str, totals: Totals) -> None:
    """The report for one sweep; `folder` holds it and its confirmations (<folder>/confirm/)."""
    cells, g = sweep.cells, sweep.grid
    print(f"sweep: {name}")
    print(f"  hardware: {', '.join(sorted({f'{c.platform} ({c.device_name})' for c in cells}))}")
    print(f"  vLLM: {', '.join(sorted({c.vllm_version for c in cells}))} · target {g.target_model}")
    print(f"  prompt set: {', '.join(sorted({c.prompt_set for c in cells}))} · {g.num_requests} requests per cell "
          f"· max {g.max_tokens} output tokens · temperature {g.temperature}")
    print(f"  concurrency: {', '.join(str(c) for c in sorted({c.concurrency for c in cells}))} · cells: {len(cells)} "
          f"· runs per cell: {', '.join(str(r) for r in sorted({c.repeats for c in cells}))} · traced: "
          f"{', '.join(str(t) for t in sorted({c.traced for c in cells}))} · complete: {sweep.complete}")
    if spread := run_to_run_spread(cells):
        print(f"  run-to-run spread: ±{spread[0]:.1%} (half a cell's min-max range over its median; the median over "
              f"{spread[1]} cells)")
    by_key = {(c.drafter, c.num_speculative_tokens, c.concurrency): c for c in cells}
    fit = fit_step_cost(cells)
    if isinstance(fit, str):
        print(f"  step cost: not fitted: {fit}")
    else:
        costs = ", ".join(f"{d}: {v * 1000:.2f} ms" for d, v in fit.per_drafted_token_s.items())
        line = (f"{fit.base_s * 1000:.1f} ms + {fit.per_request_s * 1000:.2f} ms per request above "
                f"{fit.knee_requests:g} + per drafted token "
                f"({costs}); R² {fit.r2:.3f}, median |error| {fit.median_relative_error:.1%} over {fit.num_cells} "
                "cells" + (f"; held at 0: {', '.join(fit.held_at_zero)}" if fit.held_at_zero else ""))
        print(f"  step cost per target pass: {line}")
        totals.fits.append(f"{name}: {line}")

    for drafter in fixed_k_drafters(sweep):
        p = predict(sweep, drafter)
        print(f"\ndrafter: {drafter}   (acceptance cut from k={sorted(set(p.recorded_k.values()))})")
        for r in p.refusals:
            print(f"  refused: {r}")
        if p.step_cost is None:
            continue
        print("   c  k |  AL pred  meas |  L(k) pred  fixed-f  meas | pass ms pred  meas | "
              "tok/s pred  left-out  measured")
        errors, left_out = [], []
        for m in p.measured:
            if m.used_for_prediction or m.num_speculative_tokens == 0 or m.predicted_output_tokens_per_s is None:
                continue
            c, k = m.concurrency, m.num_speculative_tokens
            row = p.at(c, k)
            assert not isinstance(row, TuningRefusal)
            recorded, cell = by_key[(drafter, p.recorded_k[c], c)], by_key[(drafter, k, c)]
            others = sweep.model_copy(update={"cells": [x for x in cells if x is not cell]})
            loo = predict(others, drafter).at(c, k)
            loo_tput = None if isinstance(loo, TuningRefusal) else loo.output_tokens_per_s
            t_meas = measured_pass(cell)
            errors.append(m.relative_error)
            if loo_tput is not None:
                left_out.append(loo_tput / cell.output_tokens_per_s - 1)
            print(f"  {c:2d} {k:2d} | {row.mean_acceptance_length:5.2f} {cell.mean_acceptance_length or 0:5.2f} | "
                  f"{row.tokens_per_step:9.3f} {tokens_per_step_fixed_share(recorded.steps, k):8.3f} "
                  f"{tokens_per_step(cell.steps, k):5.3f} | {row.pass_time_s * 1000:7.1f} "
                  f"{t_meas[0] * 1000 if t_meas else float('nan'):6.1f} | {row.output_tokens_per_s:6.1f} "
                  f"{loo_tput or float('nan'):8.1f}  {_spread(cell)}")
        totals.errors += errors
        totals.left_out += left_out
        print(f"  median |relative error| of predicted output tokens/s at k < K: {_med(errors)}; "
              f"left out of the fit: {_med(left_out)}")
        print("  per concurrency: recommended k and its measured tok/s · best measured k and its spread · within?")
        for rec in p.recommend():
            c = rec.concurrency
            measured = {k: x for (d, k, cc), x in by_key.items() if cc == c and d in (drafter, BASELINE)}
            best_k = max(measured, key=lambda k: measured[k].output_tokens_per_s)
            best = measured[best_k]
            # the tuner's ranking checked at every point: the best predicted among the k that were measured
            pick = max((r for r in p.rows if r.concurrency == c and r.num_speculative_tokens in measured),
                       key=lambda r: (r.output_tokens_per_s, -r.num_speculative_tokens)).num_speculative_tokens
            pick_inside = measured[pick].output_tokens_per_s >= best.output_tokens_per_s_min
            totals.points += 1
            totals.among_measured_within += pick_inside
            got = measured.get(rec.num_speculative_tokens)
            if got is None:
                totals.unmeasured.append(f"{name} {drafter} c={c} k={rec.num_speculative_tokens}")
                verdict = "k not measured"
            else:
                totals.checked += 1
                inside = got.output_tokens_per_s >= best.output_tokens_per_s_min
                near = got.output_tokens_per_s >= (1 - TARGET_ERROR) * best.output_tokens_per_s
                totals.within_spread += inside
                totals.within_5pct += near
                verdict = (f"{'within' if inside else 'OUTSIDE'} the spread · ratio to best "
                           f"{got.output_tokens_per_s / best.output_tokens_per_s:.3f}")
            print(f"    c={c:<3} recommend k={rec.num_speculative_tokens} (predicted {rec.output_tokens_per_s:.1f}, "
                  f"measured {_spread(got) if got else '-'}) · best measured k={best_k} {_spread(best)} · {verdict}"
                  f" · best predicted of the measured k: k={pick}, {'within' if pick_inside else 'OUTSIDE'}")
        _confirmed(sweep, p, folder, name, by_key, totals)
    print()


def _best_static(by_key: dict, drafter: str, c: int):
    measured = {k: x for (d, k, cc), x in by_key.items() if cc == c and d in (drafter, BASELINE)}
    return measured, max(measured.values(), key=lambda x: x.output_tokens_per_s)


def _confirmed(sweep: Sweep, pred, folder: Path, name: str, by_key: dict, totals: Totals) -> None:
    """Report 5 (module docstring): the confirmation's picks and the schedule row, against the sweep."""
    confirmation = load_confirmation(folder, pred.drafter)
    head_to_heads = load_head_to_heads(folder, pred.drafter)
    result = tuned(pred, sweep, confirmation, head_to_heads)
    if confirmation is None:
        print(f"  no confirmation (run: specviz tune {folder} --drafter '{pred.drafter}'); picks on the sweep's own "
              "cells are within its spread by construction, so they are not counted")
    else:
        print(f"  confirmed by specviz tune ({confirmation.grid.repeats} runs per cell, "
              f"{EngineCost.of(confirmation.cells).text()}; the grid of static k: "
              f"{EngineCost.of([c for c in sweep.cells if not c.scheduled]).text()}):")
        machines = [sweep_charts.machines(s.cells) for s in (sweep, confirmation)]
        if machines[0] != machines[1]:
            print(f"    measured on other hardware than the sweep ({', '.join(machines[1])} against "
                  f"{', '.join(machines[0])}): the check below compares the two machines as well as the picks")
        for row in result.rows:
            measured, best = _best_static(by_key, pred.drafter, row.concurrency)
            got = measured.get(row.confirmed_k)
            point = f"{name} {pred.drafter} c={row.concurrency} k={row.confirmed_k}"
            if got is None:
                totals.confirmed_not_in_sweep.append(point)
                verdict = "k not in the sweep"
            else:
                inside = got.output_tokens_per_s >= best.output_tokens_per_s_min
                totals.confirmed_checked += 1
                totals.confirmed_within += inside
                verdict = "within" if inside else "OUTSIDE"
                if not inside and best.num_speculative_tokens == 0 and row.idle:
                    # a schedule that drafts anywhere keeps the drafter loaded everywhere: its k=0 is the idle row
                    idle = (f"no drafting is best here, but a schedule's k=0 is the drafter idle, "
                            f"{row.idle.output_tokens_per_s:.1f} in the confirmation")
                    point, verdict = f"{point} ({idle})", f"{verdict} ({idle}, below the pick)"
                if not inside:
                    totals.confirmed_outside.append(point)
            print(f"    c={row.concurrency:<3} confirmed k={row.confirmed_k} ({row.confirmed.text()} in the "
                  f"confirmation) · in the sweep {_spread(got) if got else 'not measured'} · best k="
                  f"{best.num_speculative_tokens} {_spread(best)} · {verdict}")
    if result.schedule is None or not result.schedule.schedule:
        print(f"  exported: {describe_spec(result.exported)} (no schedule row to measure)")
        return
    label = schedule_label(result.schedule)
    print(f"  the picks' schedule: {describe_spec(result.schedule)} · exported: {describe_spec(result.exported)}")
    if reason := export_reason(result):
        print(f"    {reason}")
    if rows := {c.concurrency: c for c in sweep.cells if c.drafter == label}:
        _schedule_against_static(result.schedule, rows, by_key, pred.drafter, f"{name} {pred.drafter}", totals)
        return
    print("    not measured in this sweep's own rounds" + (f"; measured in the {result.schedule_measured_in}:"
                                                          if result.schedule_measured_in else " (specviz tune measures it)"))
    if result.schedule_measured_in in ("confirmation", "head-to-head"):
        rows = {c.concurrency: c for c in result.schedule_cells if c.drafter == label}
        beside = {(c.drafter, c.num_speculative_tokens, c.concurrency): c for c in result.schedule_cells}
        rounds = ("side by side in the same rounds" if result.schedule_measured_in == "head-to-head"
                  else "same machine, its own rounds after the candidates'")
        print(f"    in the {result.schedule_measured_in}, against the static k measured beside the schedule ({rounds}; "
              "the baseline is k=0):")
        _schedule_against_static(result.schedule, rows, beside, pred.drafter,
                                 f"{name} {pred.drafter} ({result.schedule_measured_in})", totals)
        for line in schedule_verdict(result):
            print(f"    {line}")
        if result.exported != result.schedule:  # the static config the export rule put in its place, the same check
            k = result.exported.k if result.exported else 0
            rows = {c.concurrency: c for c in result.schedule_cells if not c.scheduled and c.num_speculative_tokens == k
                    and c.drafter in (BASELINE, pred.drafter) and c.concurrency in rows}
            print(f"    the export, {describe_spec(result.exported)}, against the same static configs:")
            _schedule_against_static(result.exported, rows, beside, pred.drafter,
                                     f"{name} {pred.drafter} export ({result.schedule_measured_in})", totals,
                                     name="export")


def _schedule_against_static(schedule, rows: dict, by_key: dict, drafter: str, point: str, totals: Totals,
                             name: str = "schedule") -> None:
    """The schedule's row (or the export's, `name`; None: no drafting) against every static k measured beside
    it (k=0: no drafting): within the best's spread at each concurrency, and summed over the concurrencies
    against each k measured at all of them."""
    sums = {}
    for c, cell in sorted(rows.items()):
        measured, best = _best_static(by_key, drafter, c)
        for k, x in measured.items():
            sums.setdefault(k, []).append(x.output_tokens_per_s)
        inside = cell.output_tokens_per_s >= best.output_tokens_per_s_min
        print(f"    c={c:<3} {name} k={schedule.k_at(c) if schedule else 0} {_spread(cell)} · best static k="
              f"{best.num_speculative_tokens} {_spread(best)} · {'within' if inside else 'OUTSIDE'}")
    total = sum(x.output_tokens_per_s for x in rows.values())
    full = {k: sum(v) for k, v in sums.items() if len(v) == len(rows)}
    beaten = [k for k, v in full.items() if v > total]
    # beaten by a sum the schedule's own runs reach (its maxes summed) is a gap no bigger than its run-to-run spread
    high = sum(x.output_tokens_per_s_max for x in rows.values())
    noise = (f" (every one at or below the {name}'s maxes summed, {high:.1f})" if beaten and max(full[k] for k in beaten)
             <= high else "")
    line = (f"{point}: {name} sum {total:.1f} tok/s over c={sorted(rows)} against static k measured at every one "
            + ", ".join(f"{k}: {v:.1f}" for k, v in sorted(full.items()))
            + (f" · BEATEN by k={beaten}{noise}" if beaten else " · at or above every static k"))
    totals.schedules.append(line)
    print(f"    summed: {line}")


def run_to_run_spread(cells) -> tuple[float, int] | None:
    """The median over cells of two or more runs of (max - min) / 2 / median output tokens/s, and how many
    cells: what a prediction error is to be read against. Runs at 30, 32, 33 -> 0.047 for that cell."""
    widths = [(max(v) - min(v)) / 2 / statistics.median(v) for c in cells
              if len(v := [r.output_tokens_per_s for r in c.runs]) > 1]
    return (statistics.median(widths), len(widths)) if widths else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="*", help="sweep.json files (default: every sweep under sample_runs/sweeps/)")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.sweeps] or list_sweep_files()
    if not paths:
        print("no sweep given and none under sample_runs/sweeps/", file=sys.stderr)
        return 2
    totals = Totals()
    for path in paths:
        shown = path.resolve().relative_to(REPO_DIR) if path.resolve().is_relative_to(REPO_DIR) else path
        report(load_sweep(path), path.parent, str(shown), totals)
    print("== totals over", len(paths), "sweep(s) ==")
    for line in totals.fits:
        print(f"  {line}")
    print(f"  recommended k's measured throughput within the best measured k's spread: {totals.within_spread} of "
          f"{totals.checked} points; within 5% of the best: {totals.within_5pct} of {totals.checked}"
          + (f"; recommended k not measured at {len(totals.unmeasured)} more: {'; '.join(totals.unmeasured)}"
             if totals.unmeasured else ""))
    print(f"  the best predicted of the measured k within the best measured k's spread: {totals.among_measured_within} "
          f"of {totals.points} points (every drafter at every concurrency)")
    print(f"  the confirmed pick's measured throughput in the sweep within the best's spread: "
          f"{totals.confirmed_within} of {totals.confirmed_checked} confirmed points"
          + (f"; outside: {'; '.join(totals.confirmed_outside)}" if totals.confirmed_outside else "")
          + (f"; the pick's k not in the sweep at {len(totals.confirmed_not_in_sweep)} more: "
             f"{'; '.join(totals.confirmed_not_in_sweep)}" if totals.confirmed_not_in_sweep else ""))
    for line in totals.schedules:
        print(f"  {line}")
    print(f"  median |relative error| of predicted output tokens/s (cells at k < K): {_med(totals.errors)}, "
          f"left out of the fit: {_med(totals.left_out)} (target: at most {TARGET_ERROR:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
