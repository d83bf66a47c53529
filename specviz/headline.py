"""The first screen's headline: a recorded speculative run against its paired baseline, in plain words.

    headline(spec_run, baseline_run)
    -> "On code editing, ngram k=3 produced the same text 1.87x faster than the target alone over both
        prompts: 2.01 tokens per target pass (mean acceptance length 2.49; the target alone: 1)"
       with a detail line: what was measured (output tokens/s of both runs, their prompts,
       concurrency, output length, hardware, vLLM) and whether the two texts are the same.

Its figures are the run's (scope "both prompts", figures.run_scope), named and computed by
specviz.figures; the race says "this request" for its own and repeats these under the same names.
Worked example (sample_runs/showcase, ngram-k3-edit-c1 against baseline-edit-c1, float32): 175 output
tokens at 38.18 tokens/s against 175 at 20.40 -> 1.87x; 175 tokens over 87 target passes = 2.01
tokens per target pass; 1 + 88 accepted / 59 passes that verified drafts = 2.49 mean acceptance
length. Every figure comes from the run files.

"the same text" only when every request is identical to its baseline's (divergence.compare_runs);
otherwise the detail line says how the texts part (ties of rounding, or not) and the headline says
"its text".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from . import figures
from .divergence import compare_runs
from .figures import Figure
from .metrics import summarize
from .prompts import workload_name
from .race import run_figures, spec_label
from .runfile import Run


@dataclass(frozen=True)
class Headline:
    text: str  # one sentence, the measured result
    detail: str  # what it rests on
    faster: bool
    figures: tuple[Figure, ...] = field(default=())  # what the sentence states, by name and scope


def headline(spec: Run, base: Run) -> Headline | None:
    """The speculative run's result against its baseline; None when either lacks a throughput figure."""
    s, b = summarize(spec), summarize(base)
    shown = {f.name: f for f in run_figures(spec, base)}
    if figures.SPEEDUP not in shown:
        return None
    ratio = shown[figures.SPEEDUP]
    work = workload_name(spec.meta.prompt_set)
    comparison = compare_runs(base, spec)
    same = bool(comparison.requests) and comparison.identical == len(comparison.requests)
    what = "the same text" if same else "its text"
    per_pass = shown.get(figures.TOKENS_PER_TARGET_PASS)
    length = shown.get(figures.MEAN_ACCEPTANCE_LENGTH)
    passes = ""
    if per_pass is not None:
        passes = f": {per_pass.text} ({length.text + '; ' if length else ''}the target alone: 1)"
    m = spec.meta
    text = (f"On {work}, {spec_label(spec)} produced {what} {ratio.text} than the target alone over "
            f"{ratio.scope}{passes}")
    detail = (f"{s.output_tokens_per_s:.1f} against {b.output_tokens_per_s:.1f} output tokens/s, "
              f"{len(spec.requests)} prompt{'s' if len(spec.requests) != 1 else ''} of '{m.prompt_set}' at "
              f"concurrency {m.concurrency}, up to {m.max_tokens} tokens each, on {m.platform} ({m.device_name}) "
              f"with vLLM {m.vllm_version}.")
    if not same:
        detail += f" Against the baseline's texts: {comparison.summary()}; each request shows where and why."
    return Headline(text=text, detail=detail, faster=ratio.value >= 1, figures=tuple(shown.values()))


def baseline_headline(base: Run, raced_by: list[str]) -> Headline | None:
    """For a baseline run: what it is, and which recorded speculative runs race against it."""
    b = summarize(base)
    if not b.output_tokens_per_s:
        return None
    others = (f"Open {', '.join(raced_by)} to race a drafting method against it."
              if raced_by else "No recorded speculative run of these prompts races against it yet.")
    return Headline(text=f"The baseline for {workload_name(base.meta.prompt_set)}: the target alone, one token per "
                         f"pass, {b.output_tokens_per_s:.1f} output tokens/s",
                    detail=f"This run is what the speculative runs are measured against. {others}", faster=True)


def headline_html(h: Headline) -> str:
    """The headline as a box for the first screen; all text escaped."""
    cls = "sv-headline" if h.faster else "sv-headline sv-headline-slower"
    return (HEADLINE_CSS + f'<div class="{cls}"><div class="sv-headline-text">{escape(h.text)}</div>'
            f'<div class="sv-headline-detail">{escape(h.detail)}</div></div>')


HEADLINE_CSS = """
<style>
.sv-headline{margin:4px 0 12px;padding:12px 18px;border-radius:10px;background:#eef6ee;border-left:6px solid #4caf50}
.sv-headline-slower{background:#fff4e0;border-left-color:#e0a030}
.sv-headline-text{font-size:1.35em;font-weight:700;line-height:1.3}
.sv-headline-detail{font-size:.9em;opacity:.8;margin-top:4px}
</style>
"""
