"""A sweep as a tidy table (sweep.csv, the pages): one row per cell, speedup over the baseline at
the same concurrency paired by round, medians with their min-max spread.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .config import NO_DRAFTING
from .sweep import BASELINE, Sweep, SweepCell, median_or_none

TABLE_COLUMNS = [
    "drafter", "method", "num_speculative_tokens", "schedule", "concurrency", "prompt_set", "num_requests", "max_tokens",
    "repeats", "traced", "async_scheduling",
    "output_tokens_per_s", "output_tokens_per_s_min", "output_tokens_per_s_max",
    "speedup", "speedup_min", "speedup_max", "request_output_tokens_per_s_p50",
    "time_per_output_token_s_p50", "time_per_output_token_s_p90",
    "time_to_first_token_s_p50", "time_to_first_token_s_p90",
    "mean_acceptance_length", "mean_acceptance_length_low", "mean_acceptance_length_high",
    "draft_acceptance_rate", "acceptance_rate_per_pos", "acceptance_from",
    "num_engine_steps", "engine_step_time_s", "counters_match", "outputs_vs_baseline",
    "platform", "device_name", "vllm_version", "created_at", "run_files",
]


_MEDIANS = ["request_output_tokens_per_s_p50", "time_per_output_token_s_p50", "time_per_output_token_s_p90",
            "time_to_first_token_s_p50", "time_to_first_token_s_p90"]


def speedups(cell: SweepCell, baseline: SweepCell | None) -> list[float]:
    """The cell's output tokens/s over the baseline's, one ratio per repeat round both were measured in.

    Runs of one round ran close in time, so pairing them cancels slow drift. Baseline runs at 30 and
    28 tokens/s in rounds 0 and 1, the cell's at 45 and 40 -> [1.5, 1.429]: speedup 1.464 (the
    median), spread 1.429-1.5. [] without a baseline run in any of the cell's rounds.
    """
    if baseline is None:
        return []
    base = {r.repeat: r.output_tokens_per_s for r in baseline.runs if r.output_tokens_per_s}
    return [r.output_tokens_per_s / base[r.repeat] for r in cell.runs
            if r.repeat in base and r.output_tokens_per_s is not None]


def sweep_table(sweep: Sweep, outputs: dict[tuple[str, int, int], str] | None = None) -> pd.DataFrame:
    """One row per cell, in TABLE_COLUMNS order: medians over its runs with their min-max spread.

    speedup = the median over repeat rounds of the cell's output tokens/s / the baseline's at the
    same concurrency and prompt set in that round (see speedups; None when there is no baseline).
    mean_acceptance_length_low/high: its 90% bootstrap interval over requests (None if not kept).
    acceptance_from: 'trace' (the specviz tracer's steps) or 'vLLM counters' (an untraced cell).
    outputs_vs_baseline: from `outputs` (outputs_vs_baseline, which reads the run files), else None.
    """
    baselines = {(c.concurrency, c.prompt_set): c for c in sweep.cells if c.drafter == BASELINE}
    rows = []
    for cell in sweep.cells:
        ratios = speedups(cell, baselines.get((cell.concurrency, cell.prompt_set)))
        interval = cell.mean_acceptance_length_90
        steps = cell.steps
        rows.append({
            "drafter": cell.drafter, "method": cell.method, "num_speculative_tokens": cell.num_speculative_tokens,
            "schedule": " · ".join(e.text() for e in cell.spec.schedule) if cell.scheduled else None,
            **cell.model_dump(include={"concurrency", "prompt_set", "num_requests", "max_tokens"}),
            "repeats": cell.repeats, "traced": cell.traced, "async_scheduling": cell.async_scheduling,
            "output_tokens_per_s": cell.output_tokens_per_s, "output_tokens_per_s_min": cell.output_tokens_per_s_min,
            "output_tokens_per_s_max": cell.output_tokens_per_s_max,
            "speedup": median_or_none(ratios), "speedup_min": min(ratios, default=None),
            "speedup_max": max(ratios, default=None),
            **{name: cell.median_of(name) for name in _MEDIANS},
            "mean_acceptance_length": cell.mean_acceptance_length,
            "mean_acceptance_length_low": interval[0] if interval else None,
            "mean_acceptance_length_high": interval[1] if interval else None,
            "draft_acceptance_rate": cell.draft_acceptance_rate,
            "acceptance_rate_per_pos": cell.acceptance_rate_per_pos,
            "acceptance_from": None if cell.drafter == BASELINE else ("trace" if cell.traced else "vLLM counters"),
            "num_engine_steps": steps.num_engine_steps, "engine_step_time_s": steps.engine_step_time_s,
            "counters_match": cell.counters_match, "outputs_vs_baseline": (outputs or {}).get(cell.key),
            "platform": cell.platform, "device_name": cell.device_name,
            "vllm_version": cell.vllm_version, "created_at": cell.runs[0].created_at,
            "run_files": " ".join(r.run_file for r in cell.runs),
        })
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def sweep_summary_line(cell: SweepCell) -> str:
    """'ngram lookup 2-4         k=3 c=4     78.3 tok/s (76.0-80.1, 3 runs)  AL 2.12 (trace)'; a schedule's label
    says its k ('ngram lookup 2-4 k by batch 1:5 2-16:4 c=2 ...')."""
    k = "" if cell.scheduled else f"k={cell.num_speculative_tokens} " if cell.num_speculative_tokens else "    "
    al = f"AL {cell.mean_acceptance_length:.2f}" if cell.mean_acceptance_length else "AL  -  "
    spread = (f" ({cell.output_tokens_per_s_min:.1f}-{cell.output_tokens_per_s_max:.1f}, {cell.repeats} runs)"
              if cell.repeats > 1 else "")
    source = "" if cell.drafter == BASELINE else (" (trace)" if cell.traced else " (vLLM counters)")
    return (f"{cell.drafter:<24} {k}c={cell.concurrency:<3} {cell.output_tokens_per_s:7.1f} tok/s{spread}  "
            f"{al}{source}")


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The sweep table as the pages show it: the baseline's method as 'no drafting' (its k is 0), a
    schedule's k as its largest. The CSV keeps the table as it is (the baseline's method empty)."""
    shown = table.copy()
    shown["method"] = shown["method"].fillna(NO_DRAFTING)
    shown["schedule"] = shown["schedule"].fillna("")
    return shown


def outputs_vs_baseline(sweep: Sweep, folder: Path) -> dict[tuple[str, int, int], str]:
    """Per speculative cell, its requests' outputs against the baseline's of the same round and concurrency.

    Reads the cells' run files (specviz.divergence.compare_runs), so it is for the command line and the
    CSV, not for every page redraw. {("ngram lookup 2-4", 3, 4): "48 of 48 requests identical", ...};
    a cell whose runs part says how ("... 2 part at a tie in bfloat16", "... NOT a tie").
    """
    from .divergence import compare_runs
    from .runfile import RunFileError, load_run

    baselines = {(c.concurrency, c.prompt_set): c for c in sweep.cells if c.drafter == BASELINE}
    out = {}
    for cell in sweep.cells:
        base_cell = baselines.get((cell.concurrency, cell.prompt_set))
        if cell.drafter == BASELINE or base_cell is None:
            continue
        base_files = {r.repeat: r.run_file for r in base_cell.runs}
        verdicts: list[str] = []
        dtype = None
        for r in cell.runs:
            if r.repeat not in base_files:
                continue
            try:
                comparison = compare_runs(load_run(folder / base_files[r.repeat]), load_run(folder / r.run_file))
            except RunFileError:
                continue
            dtype = comparison.dtype
            verdicts += [c.verdict for c in comparison.requests]
        out[cell.key] = _verdict_counts(verdicts, dtype)
    return out


def _verdict_counts(verdicts: list[str], dtype: str | None) -> str:
    """['identical', 'identical', 'tie'] -> '2 of 3 requests identical; 1 part at a tie in bfloat16'."""
    if not verdicts:
        return "no run to compare"
    words = [f"{verdicts.count('identical')} of {len(verdicts)} requests identical"]
    for verdict, text in (("tie", f"part at a tie{f' in {dtype}' if dtype else ''}"),
                          ("not_a_tie", "part where the target's choice was clear (NOT a tie)"),
                          ("unexplained", "part where the recorded logprobs cannot say why (not explained)"),
                          ("not_applicable", "sampled: not compared token by token")):
        if n := verdicts.count(verdict):
            words.append(f"{n} {text}")
    return "; ".join(words)
