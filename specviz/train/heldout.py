"""The drafters' acceptance on held-out chat answers, offline: a one-minute stand-in for vLLM.

The target's greedy answers to the held-out prompts (`data.HELDOUT_CHAT`, the prompts and output
length of benchmarks/drafter_acceptance.py) are generated with vLLM and put through the target pass;
then greedy speculative decoding is simulated with each drafter exactly as on the validation split.
It predicts what vLLM measures: for the drafters trained on corpus prompts only it gave 1.302
(draft model) and 1.439 (EAGLE-3) mean acceptance length at k = 3, where vLLM measured 1.31 and
1.45; on their own validation split the same drafters simulated 1.51 and 1.69. That gap was the
prompts, not the drafters' integration in vLLM.

    python -m specviz.train heldout        # both shipped drafters
"""

from __future__ import annotations

from pathlib import Path

from ..config import short_model_name
from . import CACHE_DIR


def heldout_pass(target: Path, max_tokens: int = 64, cache: Path = CACHE_DIR) -> Path:
    """The target pass over the held-out answers (made once per target folder name and `max_tokens`,
    then cached: `.cache/train/heldout_pass_SmolLM2-135M-Instruct_64.pt`)."""
    from .data import HELDOUT_CHAT, generate
    from .targets import target_pass

    key = f"{short_model_name(target)}_{max_tokens}"
    pass_file = Path(cache) / f"heldout_pass_{key}.pt"
    if not pass_file.is_file():
        answers = Path(cache) / f"heldout_{key}.pt"
        generate(target, HELDOUT_CHAT, answers, max_tokens=max_tokens, time_budget_s=600)
        # the pass needs a training part; heldout_figures reads both parts
        target_pass(target, answers, pass_file, val_fraction=0.9)
    return pass_file


def heldout_figures(target: Path, pass_file: Path, draft: Path | None, eagle3: Path | None, ks: int = 5) -> dict:
    """{"draft_model": figures, "eagle3": figures} of `evaluate` in draft.py / eagle3.py, over every held-out answer."""
    from .draft import evaluate as evaluate_draft
    from .draft import load_draft
    from .eagle3 import evaluate as evaluate_eagle3
    from .eagle3 import load_eagle3
    from .targets import load_pass, partition

    train, val = partition(load_pass(pass_file))
    seqs = train + val
    out = {}
    if draft:
        model, to_draft, pad_id = load_draft(draft, target)
        out["draft_model"] = evaluate_draft(model, seqs, to_draft, pad_id)
    if eagle3:
        head, emb, t2d_index = load_eagle3(eagle3, target)
        out["eagle3"] = evaluate_eagle3(head, emb, seqs, t2d_index, ks)
    return out
