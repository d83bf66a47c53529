"""The figures specviz shows, each named once: what it counts, over what, and its worked example.

Every view that shows one of these (the headline, the metrics row, the race, the step view, `record`'s
summary, the pages) takes its name from NAMES and its value from the function here, and says its
scope: a run ("both prompts", "all 8 prompts") or one request ("this request").

tokens per target pass = output tokens / target passes
    Every pass counts, also those that verified no draft (the prefill, or a step with nothing to
    propose). The showcase's ngram edit run: 175 output tokens over 87 target passes -> 2.01; the
    target alone makes 1 per pass.
mean acceptance length = 1 + accepted draft tokens / drafts, over the passes that verified drafts
    vLLM's figure (num_drafts counts verify passes). The same run: 1 + 88 / 59 = 2.49. It is larger
    than tokens per target pass because the passes without drafts (1 token each) are left out.
speedup = output tokens/s with drafting / output tokens/s of the target alone
    Of a run: all its output tokens over its wall time (metrics.output_tokens_per_s), both runs of the
    same prompts: 38.2 / 20.4 = 1.87x. Of a request: its tokens from sending it to its last token
    (metrics.request_output_tokens_per_s), against the baseline's request of the same prompt: 1.80x
    for the translation, 2.07x for the typo fix.
    A run's and a request's speedup differ; each is shown with its scope.
"""

from __future__ import annotations

from dataclasses import dataclass

TOKENS_PER_TARGET_PASS = "tokens per target pass"
MEAN_ACCEPTANCE_LENGTH = "mean acceptance length"
SPEEDUP = "speedup"
NAMES = (TOKENS_PER_TARGET_PASS, MEAN_ACCEPTANCE_LENGTH, SPEEDUP)

THIS_REQUEST = "this request"

TOKENS_PER_TARGET_PASS_HELP = ("output tokens / target passes, every pass counted (also those that verified no "
                               "draft); the target alone makes 1")
MEAN_ACCEPTANCE_LENGTH_HELP = ("1 + accepted draft tokens / drafts, over the target passes that verified drafts "
                               "(vLLM's figure); larger than tokens per target pass when some passes had no drafts")


def tokens_per_target_pass(output_tokens: int, target_passes: int) -> float | None:
    """640 tokens over 290 passes -> 2.207...; None without a pass."""
    return output_tokens / target_passes if target_passes else None


def mean_acceptance_length(num_accepted_tokens: int, num_drafts: int) -> float | None:
    """1 + 352 accepted / 183 drafts -> 2.923...; None when no pass verified drafts."""
    return 1 + num_accepted_tokens / num_drafts if num_drafts else None


def speedup(tokens_per_s: float | None, baseline_tokens_per_s: float | None) -> float | None:
    """27.8 / 14.4 tokens/s -> 1.93x; None when either is missing or zero."""
    if not tokens_per_s or not baseline_tokens_per_s:
        return None
    return tokens_per_s / baseline_tokens_per_s


def run_scope(num_prompts: int) -> str:
    """How a run's figures say what they cover: 1 -> 'this prompt', 2 -> 'both prompts', 8 -> 'all 8 prompts'."""
    return {1: "this prompt", 2: "both prompts"}.get(num_prompts, f"all {num_prompts} prompts")


@dataclass(frozen=True)
class Figure:
    """One figure as shown: its name (NAMES), its scope, its value; `text` is how every view writes it."""

    name: str
    scope: str
    value: float

    @property
    def text(self) -> str:
        """'1.93x faster', '1.25x slower', '2.39 tokens per target pass', 'mean acceptance length 2.91'."""
        if self.name == SPEEDUP:
            return f"{self.value:.2f}x faster" if self.value >= 1 else f"{1 / self.value:.2f}x slower"
        if self.name == TOKENS_PER_TARGET_PASS:
            return f"{self.value:.2f} {TOKENS_PER_TARGET_PASS}"
        return f"{MEAN_ACCEPTANCE_LENGTH} {self.value:.2f}"


def figures_of(scope: str, *, speedup_value: float | None = None, per_pass: float | None = None,
               acceptance_length: float | None = None) -> tuple[Figure, ...]:
    """The figures that exist, in the order views write them."""
    named = ((SPEEDUP, speedup_value), (TOKENS_PER_TARGET_PASS, per_pass), (MEAN_ACCEPTANCE_LENGTH, acceptance_length))
    return tuple(Figure(name, scope, value) for name, value in named if value is not None)
