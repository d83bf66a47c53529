"""What the sweep pages (Throughput, Tuning) share on screen: the recorded sweeps, or how to record one."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from . import sweep_files, ui
from .config import SpecConfig, describe_spec

NO_SWEEPS = ("No recorded sweeps in `sample_runs/sweeps/`. Record one (the baseline plus a drafter at a few k, at "
             "the concurrencies you serve) with `python -m specviz sweep --model PATH --drafter '{\"method\": "
             "\"ngram\", \"prompt_lookup_max\": 4}' --k 1,3,5 --concurrency 1,4,16 --prompts builtin:code "
             "--out sample_runs/sweeps/NAME`.")


HEAD_TO_HEAD_CAPTION = ("A head-to-head from `specviz tune`: the tuner's schedule (its k follows the batch size: the row "
                        "named 'k by batch') measured beside no drafting and each k it picked, in the same rounds. "
                        "The Tuning page shows it against its sweep's predictions and exports it.")
GRID = "the sweep's grid (every k)"


def recorded_sweeps() -> dict[str, Path]:
    """The recorded sweeps by folder name; with none, say how to record one and stop the page."""
    files = sweep_files.list_sweep_files()  # looked up on the module each run, so a test can replace it
    if not files:
        st.info(NO_SWEEPS)
        st.stop()
    return {p.parent.name: p for p in files}


def measured_in(sweep_path: Path) -> dict[str, Path]:
    """Where a sweep's figures can come from: its grid (GRID), then each head-to-head `specviz tune` measured
    for it, a sweep of its own (the picks' schedule beside no drafting and each picked k, in the same rounds),
    named by the schedule it measured: 'head-to-head: ngram k by batch size (1: k=5 · 2-16: k=4)'."""
    found = {GRID: sweep_path}
    for path in sweep_files.list_head_to_head_files(sweep_path.parent):
        sweep = ui.sweep_quietly(path)  # an unreadable one keeps its folder name; opening it says why
        schedule = describe_spec(SpecConfig.from_dict(sweep.grid.schedules[0])) if sweep and sweep.grid.schedules else None
        found[f"head-to-head: {schedule or path.parent.name}"] = path
    return found
