"""Train small drafters for the demo model (SmolLM2-135M-Instruct), reproducibly, on CPU.

    python -m specviz.train data      # corpora -> prompts -> the target's own greedy answers (vLLM)
    python -m specviz.train data --kind chat --append   # + answers to everyday questions (specviz.train.chat)
    python -m specviz.train targets   # the target's pass over them: hidden states and top-8 per position
    python -m specviz.train draft     # a draft model cut down from the target, its own 7168-token vocabulary, distilled
    python -m specviz.train eagle3    # an EAGLE-3 head trained on the target's hidden states
    python -m specviz.train heldout   # both drafters' simulated acceptance on held-out chat answers

The shipped results live in <repo>/drafters/; see docs/drafters.md for the recipe and its limits.
"""

from pathlib import Path

from ..files import REPO_DIR

DRAFTERS_DIR = REPO_DIR / "drafters"
DRAFT_DIR = DRAFTERS_DIR / "smollm2-135m-draft"
EAGLE3_DIR = DRAFTERS_DIR / "smollm2-135m-eagle3"
CACHE_DIR = REPO_DIR / ".cache" / "train"

# The speculative_config each shipped drafter needs besides num_speculative_tokens. The draft model
# has its own (smaller) vocabulary, which vLLM's draft_model only accepts with use_heterogeneous_vocab.
DRAFTER_SPECS = {
    "draft_model": {"method": "draft_model", "model": str(DRAFT_DIR), "use_heterogeneous_vocab": True},
    "eagle3": {"method": "eagle3", "model": str(EAGLE3_DIR)},
}


def drafter_spec(method: str, *, relative_to: Path | None = None) -> dict:
    """DRAFTER_SPECS[method], with the model path relative to `relative_to` (for printed commands)."""
    spec = dict(DRAFTER_SPECS[method])
    if relative_to is not None:
        spec["model"] = str(Path(spec["model"]).relative_to(relative_to))
    return spec
