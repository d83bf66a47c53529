"""What the Playground page (app_pages/playground.py) works out, as plain functions: the speculative config its
controls describe, the dtype to serve in, which runs it keeps, and its two tables. No Streamlit.

The page reads its widgets, calls these, and places what they return.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .config import SpecConfig
from .runfile import SAMPLE_RUNS_DIR, Run, list_run_files

if TYPE_CHECKING:  # types only: the page imports these modules itself
    from .serving.attached import View
    from .verify import DraftVerification

PLAYGROUND_METHODS = ["none", "ngram", "draft_model", "eagle", "eagle3", "mtp", "suffix"]
DEFAULT_DTYPE = "specviz's default"  # demo_model.default_dtype: float32 for the demo model, else vLLM's auto
DTYPES = [DEFAULT_DTYPE, "float32", "bfloat16", "auto"]


def spec_from_choices(method: str, k: int, lookup_min: int, lookup_max: int, draft_model: str) -> SpecConfig | None:
    """The speculative config the Playground's controls describe (None for "none": no drafting).

    ngram takes its lookup window; a drafter's model folder is passed when one is typed. Raises ConfigError
    if vLLM would refuse it, or if a local engine cannot run it (SpecConfig.check_local_engine).
    """
    if method == "none":
        return None
    d = {"method": method, "num_speculative_tokens": k}
    if method == "ngram":
        d |= {"prompt_lookup_min": lookup_min, "prompt_lookup_max": lookup_max}
    elif draft_model:
        d["model"] = draft_model
    spec = SpecConfig.from_dict(d)
    spec.check_local_engine()
    return spec


def target_for_method(method: str, model: str) -> str:
    """The target folder to serve `method` with: native MTP needs MTP layers, so the demo model becomes its MiMo form.

        target_for_method("mtp", "<...>/SmolLM2-135M-Instruct")  -> "<...>/SmolLM2-135M-Instruct-MiMo"
        target_for_method("ngram", "<...>/SmolLM2-135M-Instruct") -> unchanged; any other target: unchanged
    """
    from .demo_model import demo_mimo_model_dir, demo_model_dir

    if method == "mtp" and model and Path(model).expanduser().resolve() == demo_model_dir().resolve():
        return str(demo_mimo_model_dir())
    return model


def engine_dtype(choice: str) -> str | None:
    """The dtype to start the engine with: None (specviz's default) or the one chosen."""
    return None if choice == DEFAULT_DTYPE else choice


def sample_runs() -> dict[str, Path]:
    """Every run file in sample_runs/, by its name relative to that folder."""
    return {str(p.relative_to(SAMPLE_RUNS_DIR)): p for p in list_run_files()}


def shown_run_name(name: str, width: int = 34) -> str:
    """A run file's name as a narrow selector shows it: without '.json.gz', and elided in the middle when longer
    than `width`, so its folder and its end (the k, prompt set and concurrency that tell runs apart) stay
    visible where a selectbox would cut the end off.
    'drafters/smollm2-eagle3-k5-heldout-chat-c8.json.gz' -> 'drafters/…agle3-k5-heldout-chat-c8'."""
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if len(name) <= width:
        return name
    folder, sep, rest = name.rpartition("/")
    head = f"{folder}{sep}" if len(folder) < width // 2 else ""
    return f"{head}…{rest[-(width - len(head) - 1):] if head else name[-(width - 1):]}"


def with_run(runs: list[Run], run: Run) -> list[Run]:
    """`runs` with `run` appended, unless a run of its id is there already (a page rerun draws it again)."""
    return runs if any(r.meta.run_id == run.meta.run_id for r in runs) else [*runs, run]


def last_run_from(server_url: str, runs: Sequence[Run]) -> Run | None:
    """The latest run, if it was generated on the server at `server_url` (it tells what that server sends)."""
    last = runs[-1] if runs else None
    return last if last is not None and last.meta.server_url == server_url else None


def views_table(views: Sequence[View]) -> pd.DataFrame:
    """What specviz can show for an attached server: one row per view, available or not, and why."""
    return pd.DataFrame({"view": [v.name for v in views], "available": ["yes" if v.available else "no" for v in views],
                         "why": [v.why for v in views]})


def verify_table(v: DraftVerification) -> pd.DataFrame:
    """One row per draft token: its verdict, the target's own token there and the target's top alternatives."""
    return pd.DataFrame({
        "position": [p.index + 1 for p in v.positions],
        "draft token": [repr(p.draft.text) for p in v.positions],
        "verdict": [p.status for p in v.positions],
        "target's token": [repr(p.target.token.text) for p in v.positions],
        "target's top alternatives (logprob)": [
            ", ".join(f"{t.text!r} ({t.logprob:.2f})" for t in p.target.top) for p in v.positions],
    })
