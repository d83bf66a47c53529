"""What the sweep pages (Throughput, Tuning) share on screen: the recorded sweeps, or how to record one."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from . import sweep_files

NO_SWEEPS = ("No recorded sweeps in `sample_runs/sweeps/`. Record one (the baseline plus a drafter at a few k, at "
             "the concurrencies you serve) with `python -m specviz sweep --model PATH --drafter '{\"method\": "
             "\"ngram\", \"prompt_lookup_max\": 4}' --k 1,3,5 --concurrency 1,4,16 --prompts builtin:code "
             "--out sample_runs/sweeps/NAME`.")


def recorded_sweeps() -> dict[str, Path]:
    """The recorded sweeps by folder name; with none, say how to record one and stop the page."""
    files = sweep_files.list_sweep_files()  # looked up on the module each run, so a test can replace it
    if not files:
        st.info(NO_SWEEPS)
        st.stop()
    return {p.parent.name: p for p in files}
