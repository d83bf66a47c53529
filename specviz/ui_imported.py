"""The sweep pages' edge for sweeps opened from a path: a specviz sweep folder, or vLLM's own `bench sweep serve`
experiment folder, imported on the spot (vllm_import) into a scratch folder and then opened like any other.

    paths = ui_imported.with_opened(ui_sweeps.recorded_sweeps(), key="tp_open")   # the recorded ones, plus one

Not offered in viewer mode: nothing a visitor types reaches a server-side path.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import streamlit as st

from .sweep import SweepError
from .sweep_files import save_sweep
from .viewer import viewer_mode
from .vllm_import import import_into

# where a vLLM folder opened on a page is imported to: a scratch copy, never the checkout
IMPORTED_DIR = Path(tempfile.gettempdir()) / "specviz-imported"
OPEN_HELP = ("A folder holding a specviz sweep.json, or the folder vLLM's `bench sweep serve` wrote "
             "(output_dir/experiment_name), read as an untraced sweep (the same as `specviz import`).")


def opened_sweep_path(text: str) -> Path:
    """The sweep.json a typed folder opens: its own, or an import of the vLLM folder (redone when it changes).
    Raises SweepError saying why the folder cannot be opened."""
    folder = Path(text).expanduser()
    if (folder / "sweep.json").is_file():
        return folder / "sweep.json"
    if not folder.is_dir():
        raise SweepError(f"{folder}: no such folder")
    stamp = max((p.stat().st_mtime_ns for p in folder.rglob("*.json")), default=0)
    digest = hashlib.sha256(f"{folder.resolve()}:{stamp}".encode()).hexdigest()[:12]
    out = IMPORTED_DIR / f"{folder.name}-{digest}"
    if not (out / "sweep.json").is_file():
        sweep, _ = import_into([folder], out)
        save_sweep(sweep, out / "sweep.json")
    return out / "sweep.json"


def with_opened(paths: dict[str, Path], *, key: str, select_key: str) -> dict[str, Path]:
    """`paths` (the recorded sweeps by name), with the folder typed in the sidebar added first when it opens;
    a folder newly typed is chosen in the page's sweep selectbox (`select_key`)."""
    if viewer_mode():
        return paths
    with st.sidebar:
        text = st.text_input("Open a sweep folder", key=key, help=OPEN_HELP,
                             placeholder="results/my-experiment (vLLM) or a specviz sweep folder").strip()
    if not text:
        return paths
    try:
        path = opened_sweep_path(text)
    except (SweepError, OSError) as e:
        st.sidebar.error(f"Cannot open {text}: {e}")
        return paths
    name = f"opened: {Path(text).name}"
    if st.session_state.get(f"{key}:chosen") != text:  # typed just now: show it, once; the user may then switch
        st.session_state[f"{key}:chosen"] = text
        st.session_state[select_key] = name
    return {name: path, **paths}


def imported_section(sweep, pred, drafter: str) -> None:
    """On Tuning, for a sweep read from vLLM's files: where its figures come from, the prediction it cannot make
    (if any), and the best measured k per concurrency, which needs no prediction."""
    from .vllm_import import best_measured_k, imported_lines, is_imported

    if not is_imported(sweep):
        return
    whole = next((r.reason for r in pred.refusals if r.concurrency is None), None)
    for line in imported_lines(sweep, whole):
        st.info(line)
    st.markdown(f"**Best measured k per concurrency** ({drafter}, from vLLM's runs; k=0: the baseline won)")
    st.dataframe(best_measured_k(sweep, drafter), key="tune_imported_best_k", hide_index=True)
