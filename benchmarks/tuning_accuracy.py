"""How good is the tuner? Predict the smaller k from the largest-k cells of a recorded sweep, and compare.

    .venv/bin/python benchmarks/tuning_accuracy.py [sample_runs/sweeps/NAME/sweep.json]

For each drafter, only its cells at the largest k (K) and the baseline cells go into the prediction
(`specviz.tuning.predict`); its cells at every smaller k were measured too and serve as the truth.
Printed, with the sweep's provenance:
  1. per predicted cell: mean acceptance length, tokens per target pass L(k) (both L models of
     specviz.tuning), engine step time and output tokens/s, predicted against measured, so the source
     of an error (acceptance or step cost) is visible;
  2. the median |relative error| of predicted throughput for each anchor (baseline, recorded, both);
  3. per concurrency: the recommended k, its measured throughput, the best measured k's throughput,
     and their ratio (target: >= 0.95 at every concurrency).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specviz.sweep import BASELINE, Sweep, load_sweep  # noqa: E402
from specviz.trace import load_run  # noqa: E402
from specviz.tuning import (DEFAULT_ANCHOR, TuningRefusal, drafters, list_sweep_files, predict,  # noqa: E402
                            tokens_per_step, tokens_per_step_fixed_share)

ANCHORS = ("baseline", "recorded", "both")


def _pct(x: float | None) -> str:
    return "   -  " if x is None else f"{x:+6.1%}"


def stall_ratio(folder: Path, cell) -> float | None:
    """Mean / median gap between engine steps in the cell's run: near 1 on a quiet machine; stalls
    (other work on the CPU, a slow request turnaround) raise the mean, and with it the measured cost."""
    path = folder / cell.run_file
    if not path.exists():
        return None
    run = load_run(path)
    times = sorted({(s.engine_step, s.time_s) for r in run.requests for s in r.steps})
    gaps = [b[1] - a[1] for a, b in zip(times, times[1:])]
    return statistics.mean(gaps) / statistics.median(gaps) if len(gaps) > 1 else None


def report(sweep: Sweep, name: str) -> None:
    cells = sweep.cells
    g = sweep.grid
    print(f"sweep: {name}")
    print(f"  hardware: {', '.join(sorted({f'{c.platform} ({c.device_name})' for c in cells}))}")
    print(f"  vLLM: {', '.join(sorted({c.vllm_version for c in cells}))} · target {g.target_model}")
    print(f"  prompt set: {', '.join(sorted({c.prompt_set for c in cells}))} · {g.num_requests} requests per cell "
          f"· max {g.max_tokens} output tokens · temperature {g.temperature}")
    print(f"  concurrency: {', '.join(str(c) for c in sorted({c.concurrency for c in cells}))} "
          f"· cells: {len(cells)} · complete: {sweep.complete}")
    folder = Path(name).parent
    stalls = {c.key: stall_ratio(folder, c) for c in cells}
    print("  engine step time, mean / median gap (1 = steady; higher = stalls): " + ", ".join(
        f"{c.drafter if c.drafter == BASELINE else 'k=' + str(c.num_speculative_tokens)} c={c.concurrency} "
        f"{stalls[c.key]:.2f}" for c in cells if stalls[c.key] is not None))
    by_key = {(c.drafter, c.num_speculative_tokens or 0, c.concurrency): c for c in cells}

    for drafter in drafters(sweep):
        preds = {a: predict(sweep, drafter, anchor=a) for a in ANCHORS}
        p = preds[DEFAULT_ANCHOR]
        print(f"\ndrafter: {drafter}   (predicted from k={sorted(set(p.recorded_k.values()))} + baseline; "
              f"default anchor '{DEFAULT_ANCHOR}')")
        for r in p.refusals:
            print(f"  refused: {r}")
        print("   c  k |  AL pred  meas |  L(k) pred  fixed-f  meas | step s pred   meas | "
              "tok/s " + "  ".join(f"{a:>8}" for a in ANCHORS) + "    meas")
        errors: dict[str, list[float]] = {a: [] for a in ANCHORS}
        al_err, L_err, Lf_err, t_err = [], [], [], []
        for m in p.measured:
            if m.used_for_prediction or m.predicted_output_tokens_per_s is None:
                continue
            c, k = m.concurrency, m.num_speculative_tokens
            row = p.at(c, k)
            assert not isinstance(row, TuningRefusal)
            K = p.recorded_k[c]
            recorded, cell = by_key[(drafter, K, c)], by_key[(drafter, k, c)]
            L_meas = tokens_per_step(cell.steps, k)  # its own histogram at its own k: the measured L
            L_fixed = tokens_per_step_fixed_share(recorded.steps, k)
            t_meas = cell.steps.engine_step_time_s
            al_err.append(row.mean_acceptance_length / cell.mean_acceptance_length - 1)
            L_err.append(row.tokens_per_step / L_meas - 1)
            Lf_err.append(L_fixed / L_meas - 1)
            t_err.append(row.engine_step_time_s / t_meas - 1)
            tputs = []
            for a in ANCHORS:
                pa = preds[a].at(c, k)
                errors[a].append(pa.output_tokens_per_s / m.output_tokens_per_s - 1)
                tputs.append(f"{pa.output_tokens_per_s:8.1f}")
            print(f"  {c:2d} {k:2d} | {row.mean_acceptance_length:5.2f} {cell.mean_acceptance_length:5.2f} | "
                  f"{row.tokens_per_step:9.3f} {L_fixed:8.3f} {L_meas:5.3f} | {row.engine_step_time_s:.4f} "
                  f"{t_meas:.4f} | {' '.join(tputs)}  {m.output_tokens_per_s:6.1f}")
        if not al_err:
            print("  no smaller-k cells measured: nothing to compare with")
            continue

        def med(xs: list[float]) -> str:
            return f"{statistics.median(abs(x) for x in xs):.1%} (n={len(xs)})"

        print(f"  median |relative error|: mean acceptance length {med(al_err)}, L(k) {med(L_err)} "
              f"[fixed drafted-step share: {med(Lf_err)}], step time {med(t_err)}")
        print("  median |relative error| of predicted output tokens/s by anchor: "
              + ", ".join(f"{a} {med(errors[a])}" for a in ANCHORS))
        print("  per concurrency (default anchor): recommended k, its measured tok/s, best measured k, tok/s, ratio")
        for rec in p.recommend():
            c = rec.concurrency
            measured = {k: cell.output_tokens_per_s for (d, k, cc), cell in by_key.items()
                        if cc == c and (d == drafter or d == BASELINE)}
            best_k = max(measured, key=measured.get)
            got = measured.get(rec.num_speculative_tokens)
            ratio = f"{got / measured[best_k]:.3f}" if got is not None else "k not measured"
            others = []
            for a in ANCHORS:
                ka = next(r.num_speculative_tokens for r in preds[a].recommend() if r.concurrency == c)
                others.append(f"{a} k={ka}" + (f" {measured[ka] / measured[best_k]:.3f}" if ka in measured else ""))
            print(f"    c={c:<3} recommend k={rec.num_speculative_tokens} (predicted {rec.output_tokens_per_s:.1f}, "
                  f"measured {got if got is None else round(got, 1)}) · best measured k={best_k} "
                  f"{measured[best_k]:.1f} · ratio {ratio}   [by anchor: {', '.join(others)}]")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", nargs="?", help="a sweep.json (default: the first under sample_runs/sweeps/)")
    args = ap.parse_args(argv)
    path = Path(args.sweep) if args.sweep else next(iter(list_sweep_files()), None)
    if path is None:
        print("no sweep given and none under sample_runs/sweeps/", file=sys.stderr)
        return 2
    report(load_sweep(path), str(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
