"""The first screen's headline: a recorded speculative run against its paired baseline, in plain words.

    headline(spec_run, baseline_run)
    -> "On code editing, ngram k=3 produced its text 1.55x faster than the target alone,
        2.91 tokens per pass of the target (the target alone: 1)"
       with a detail line: what was measured (output tokens/s of both runs, their prompts,
       concurrency, output length, hardware, vLLM) and whether the two texts are the same.

Worked example (sample_runs/showcase, ngram-k3-edit-c1 against baseline-edit-c1, as recorded in
bfloat16): 640 output tokens in 15.18 s = 42.17 tokens/s against 640 in 23.58 s = 27.14 tokens/s
-> 42.17 / 27.14 = 1.55x; mean acceptance length 1 + 346 accepted / 181 verify steps with drafts
= 2.91 (metrics.summarize). Every figure comes from the run files.

`same_text` is the one place that decides whether the two runs wrote the same text (it compares
output token ids prompt by prompt); a finer verdict (where they part, and why) can replace it.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from .metrics import summarize
from .prompts import workload_name
from .race import matching_request, spec_label
from .runfile import Run


def same_text(spec: Run, base: Run) -> bool:
    """True when every request of `spec` with a baseline partner (same prompt) produced the same token ids."""
    pairs = [(r, b) for r in spec.requests if (b := matching_request(base, r)) is not None]
    return bool(pairs) and all(r.output_token_ids == b.output_token_ids for r, b in pairs)


@dataclass(frozen=True)
class Headline:
    text: str  # one sentence, the measured result
    detail: str  # what it rests on
    faster: bool


def headline(spec: Run, base: Run) -> Headline | None:
    """The speculative run's result against its baseline; None when either lacks a throughput figure."""
    s, b = summarize(spec), summarize(base)
    if not (s.output_tokens_per_s and b.output_tokens_per_s):
        return None
    ratio = s.output_tokens_per_s / b.output_tokens_per_s
    work = workload_name(spec.meta.prompt_set)
    what = "the same text" if same_text(spec, base) else "its text"
    speed = f"{ratio:.2f}x faster than" if ratio >= 1 else f"{1 / ratio:.2f}x slower than"
    per_pass = (f", {s.mean_acceptance_length:.2f} tokens per pass of the target (the target alone: 1)"
                if s.mean_acceptance_length else "")
    m = spec.meta
    text = f"On {work}, {spec_label(spec)} produced {what} {speed} the target alone{per_pass}"
    detail = (f"{s.output_tokens_per_s:.1f} against {b.output_tokens_per_s:.1f} output tokens/s, "
              f"{len(spec.requests)} prompt{'s' if len(spec.requests) != 1 else ''} of '{m.prompt_set}' at "
              f"concurrency {m.concurrency}, up to {m.max_tokens} tokens each, on {m.platform} ({m.device_name}) "
              f"with vLLM {m.vllm_version}.")
    if what == "its text":
        detail += (" The two texts are not identical (greedy decoding can break a near-tie between two tokens "
                   "differently when the target verifies several tokens at once); the race shows where they part.")
    return Headline(text=text, detail=detail, faster=ratio >= 1)


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
