"""Train small drafters for the demo model (SmolLM2-135M-Instruct), reproducibly, on CPU.

    python -m specviz.train data      # corpora -> prompts -> the target's own greedy answers (vLLM)
    python -m specviz.train draft     # a 2-layer draft model distilled from those answers
    python -m specviz.train eagle3    # an EAGLE-3 head trained on the target's hidden states

The shipped results live in <repo>/drafters/; see docs/drafters.md for the recipe and its limits.
"""

from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent.parent
DRAFTERS_DIR = REPO_DIR / "drafters"
DRAFT_DIR = DRAFTERS_DIR / "smollm2-135m-draft"
EAGLE3_DIR = DRAFTERS_DIR / "smollm2-135m-eagle3"
CACHE_DIR = REPO_DIR / ".cache" / "train"
