"""Token views as HTML. Token text is model output, so it is untrusted: every piece is escaped.

One verification step renders as chips, left to right:

    drafts [sunny, and, warm, outside], sampled [sunny, and, clear]
    -> [sunny] [and]        accepted drafts
       [~~warm~~][clear]    the first rejected draft, struck through, and the target's token
       [~~outside~~]        the discarded tail, struck through and faded
    drafts all accepted  -> the accepted drafts, then the bonus token
    no drafts            -> the one token the target produced
    padded by vLLM       -> that token, then one dotted "pad" chip per placeholder slot (no drafter
                            proposed them; vLLM's counters count them as rejected drafts)

In the step list each row says how many drafts the step verified, "k=4"; in a run whose k follows the
batch size (vLLM's num_speculative_tokens_per_batch_size) also the batch they were proposed at,
"k=1 · batch 4", so k is seen to fall as the batch grows and rise as it shrinks.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ..roles import PAD_TEXT, Role, committed_chip, output_roles, step_roles, untraced_step_roles
from ..runfile import Request, Step, StreamChunk
from ..untraced_steps import UntracedStep

# Readable on light and dark themes; each role also differs in decoration, not only colour.
CSS = """
<style>
.sv-chip{display:inline-block;margin:1px 2px;padding:0 4px;border-radius:4px;font-family:monospace;
 white-space:pre;border:1px solid transparent;line-height:1.6;background:var(--sv-bg);color:var(--sv-fg);
 border-color:var(--sv-bd)}
.sv-accepted{--sv-bg:#c8f0c8;--sv-fg:#0b4d0b;--sv-bd:#6cc46c}
.sv-rejected{--sv-bg:#ffd6d6;--sv-fg:#8a1010;--sv-bd:#e08080;text-decoration:line-through}
.sv-correction{--sv-bg:#ffe2a8;--sv-fg:#6a4100;--sv-bd:#e0a030;font-weight:600}
.sv-discarded{--sv-bg:#f4f4f4;--sv-fg:#4a4a4a;--sv-bd:#8c8c8c;text-decoration:line-through;border-style:dashed}
.sv-bonus{--sv-bg:#dcd0ff;--sv-fg:#3b1f8a;--sv-bd:#9a80e0;font-weight:600}
.sv-plain{--sv-bg:#dde8f5;--sv-fg:#1d3b5e;--sv-bd:#a9c1de}
.sv-undecided{--sv-bg:#ffffff;--sv-fg:#1f2430;--sv-bd:#6b7280;border-style:dashed}
.sv-padded{--sv-fg:#555;--sv-bd:#999;background:repeating-linear-gradient(45deg,#f4f4f4,#f4f4f4 4px,#e4e4e4 4px,
 #e4e4e4 8px);border-style:dotted;font-style:italic}
.sv-ws{opacity:.55}
.sv-row{margin:2px 0}
.sv-stepno{display:inline-block;width:5.5em;color:#888;font-size:.85em}
.sv-stepk{display:inline-block;min-width:3em;margin-right:.5em;color:#888;font-size:.85em;white-space:nowrap}
.sv-output{line-height:1.9}
.sv-output .sv-chip{display:inline;margin:0;padding:0 1px;border-radius:2px;border:none;white-space:pre-wrap}
.sv-output .sv-plain{--sv-bg:transparent;--sv-bd:transparent;color:inherit}
.sv-output .sv-brk{background:transparent;padding:0}
.sv-output .sv-brk .sv-ink{background:var(--sv-bg);border-radius:2px}
.sv-output .sv-mark{border-left:3px solid var(--sv-bd);border-radius:0}
.sv-later{display:none}
.sv-output .sv-chip.sv-diverge,.sv-chip.sv-diverge{outline:3px solid #d62728;outline-offset:1px;border-radius:3px}
.sv-chunk{border-radius:3px;padding:0 1px;white-space:pre-wrap}
.sv-chunk-1{background:transparent}
.sv-chunk-2{background:#d6f0d6}.sv-chunk-3{background:#b4e4b4}.sv-chunk-4{background:#8fd68f}
.sv-chunk-5{background:#6cc46c}
.sv-untold{background:#fafafa;color:#8a1010;border:1px dashed #e08080;font-family:sans-serif;font-size:.85em}
.sv-approx .sv-stepno{font-style:italic}
.sv-approx .sv-chip{border-style:dashed}
</style>
"""

# A long request's views stay a page long, whatever it holds (the app's cost per visitor is bounded by these, not by
# the file): the timeline draws a window of steps, the rows at most a page of the steps chosen, the output its
# first tokens. 200,000 one-token steps drew 52 MB of step rows and 22 MB of output before.
TIMELINE_WINDOW = 2000
STEP_ROWS_SHOWN = 300
OUTPUT_TOKENS_SHOWN = 5000

ROLE_LABELS: dict[Role, str] = {
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "correction": "target's token at the first rejection",
    "discarded": "discarded tail (after the first rejection)",
    "bonus": "bonus token (all drafts accepted)",
    "plain": "no draft: the target's own token (unmarked in the output)",
    "padded": "placeholder slot vLLM padded the step with (no drafter proposed it; vLLM counts it as a "
              "rejected draft)",
}


def visible(text: str) -> str:
    """Escape token text and make whitespace visible: 'a b\\n' -> 'a␣b↵'."""
    return "".join(
        f'<span class="sv-ws">{ch}</span>' if ch in "␣↵→" else ch
        for ch in escape(text.replace(" ", "␣").replace("\n", "↵").replace("\t", "→"))
    )


def chip(text: str, role: Role, title: str = "", mark: str | None = None) -> str:
    """One chip; `mark` outlines it (sv-diverge) and leads its hover text."""
    label = ROLE_LABELS[role] + (f": {title}" if title else "")
    if mark is not None:
        return (f'<span class="sv-chip sv-{role} sv-diverge" title="{escape(f"{mark} ({label})")}">'
                f'{visible(text)}</span>')
    return f'<span class="sv-chip sv-{role}" title="{escape(label)}">{visible(text)}</span>'


def step_html(step: Step, label: str = "", marks: dict[int, str] | None = None, *, show_k: bool = False,
              batch: int | None = None) -> str:
    """One step's row; `marks` outlines committed tokens by their index in the step (with a hover text).
    `show_k` puts the step's k after the label (drafted_text), with `batch` the batch of its drafts."""
    at = {committed_chip(step, j): text for j, text in (marks or {}).items()}
    chips = "".join(chip(text, role, mark=at.get(i)) for i, (text, role) in enumerate(step_roles(step)))
    k = (f'<span class="sv-stepk" title="{escape(drafted_title(step, batch))}">{escape(drafted_text(step, batch))}'
         '</span>') if show_k else ""
    stepno = f'<span class="sv-stepno">{escape(label)}</span>' if label else ""  # a lone step: no empty column
    return f'<div class="sv-row">{stepno}{k}{chips}</div>'


def drafted_text(step: Step, batch: int | None = None) -> str:
    """The k a step drafted with, as its row shows it: 'k=3'; with the batch its drafts were proposed at
    (a run whose k follows the batch size, runfile.draft_batches): 'k=1 · batch 4'."""
    return f"k={step.num_drafts}" + ("" if batch is None else f" · batch {batch}")


def drafted_title(step: Step, batch: int | None = None) -> str:
    """The hover text of drafted_text: what the numbers are."""
    n = step.num_drafts
    text = f"{n} draft{'s' if n != 1 else ''} proposed and verified in this step"
    if batch is not None:
        text += (f", proposed in the request's previous step, when {batch} of the run's requests were in the batch "
                 "(the schedule's k follows the batch size)")
    return text


def steps_html(steps: list[Step], start: int = 0, marks: dict[int, str] | None = None,
               first_token: int = 0, batches: Sequence[int | None] | None = None) -> str:
    """Step rows numbered from start + 1, each with its k; `marks` outlines output tokens by their index in
    the whole output, of which steps[0] committed the one at `first_token` onwards. `batches[i]` is the batch
    the drafts of steps[i] were proposed at (a run with a per-batch-size schedule); None: not shown."""
    rows, token = [], first_token
    for i, s in enumerate(steps):
        n = len(s.committed_token_ids)
        mine = {t - token: text for t, text in (marks or {}).items() if token <= t < token + n}
        rows.append(step_html(s, f"step {start + i + 1}", mine, show_k=True, batch=batches[i] if batches else None))
        token += n
    return "".join(rows)


def output_html(request: Request, marks: dict[int, str] | None = None, limit: int | None = None, *,
                inline: bool = False) -> str:
    """The whole output (its first `limit` tokens, if given), each token coloured by origin; newlines kept as line
    breaks.

    `marks` outlines tokens by output index, with a text on hover: {36: "the outputs part here: ..."}.
    `inline`: in a span, to continue a line (the worked example's "The weather today is" + " sunny and
    clear", which a block put on a line of its own).
    """
    html = pieces_html(output_roles(request, limit), marks=marks)
    return f'<span class="sv-output">{html[len(_OUTPUT_OPEN):-len("</div>")]}</span>' if inline else html


def output_end(request: Request) -> str | None:
    """Why the output stops where it does, when the text alone cannot tell: cut at the request's output
    limit (mid-line, often) or aborted; None when the model ended it, or while the request runs.
    320 tokens, finish_reason 'length' -> 'Output limit reached: 320 tokens (max_tokens); the model had not finished.'"""
    n = len(request.output_token_ids)
    if request.finish_reason == "length":
        return f"Output limit reached: {n} tokens (max_tokens); the model had not finished."
    if request.finish_reason == "abort":
        return f"Stopped after {n} tokens: the request was aborted before the model finished."
    return None


def pieces_html(pieces: Sequence[tuple[str, Role]], newest: int = 0, shown: int | None = None,
                marks: dict[int, str] | None = None) -> str:
    """Output pieces (text, role) as output_html draws them; the last `newest` of the first `shown` (all by
    default) also get the class sv-new, and those after `shown` the class sv-later (hidden, for a replay
    to reveal). The pieces in `marks` (index -> hover text) get the class sv-diverge: where two outputs part.

    The text reads as the model wrote it: a newline breaks the line and the spaces after it indent
    the next, uncoloured. A piece with visible characters and a newline colours only those
    characters; a piece of whitespace alone keeps its colour as a thin mark where it starts.
    Every piece is one span with its role's class.
    """
    parts = []
    shown = len(pieces) if shown is None else shown
    first_new = shown - newest if newest else shown
    marks = marks or {}
    for i, (text, role) in enumerate(pieces):
        extra = " sv-later" if i >= shown else " sv-new" if i >= first_new else ""
        parts.append(_piece_html(text, role, extra + (" sv-diverge" if i in marks else ""), marks.get(i)))
    return f'{_OUTPUT_OPEN}{"".join(parts)}</div>'


_OUTPUT_OPEN = '<div class="sv-output">'


def _piece_html(text: str, role: Role, extra_class: str, mark: str | None = None) -> str:
    """One output piece as a span (see pieces_html); newlines become <br> (a raw newline could end
    Streamlit's markdown HTML block). `mark` leads the hover text."""
    label = ROLE_LABELS[role] if mark is None else f"{mark} ({ROLE_LABELS[role]})"
    title = f' title="{escape(label)}"'
    if text.strip() and "\n" not in text:
        return f'<span class="sv-chip sv-{role}{extra_class}"{title}>{escape(text)}</span>'
    if not text.strip():
        blank = escape(text).replace("\n", "<br>")
        return f'<span class="sv-chip sv-{role} sv-brk sv-mark{extra_class}"{title}>{blank}</span>'
    lines = []
    for line in text.split("\n"):
        body = line.lstrip()
        lines.append(escape(line[:len(line) - len(body)]) + (f'<span class="sv-ink">{escape(body)}</span>'
                                                             if body else ""))
    return f'<span class="sv-chip sv-{role} sv-brk{extra_class}"{title}>{"<br>".join(lines)}</span>'


def legend_html(padded: bool = False) -> str:
    """The chip legend; `padded` adds vLLM's placeholder slots (shown only for runs that have them)."""
    samples: list[tuple[str, Role]] = [("sunny", "accepted"), ("warm", "rejected"), ("clear", "correction"),
                                       ("outside", "discarded"), ("today", "bonus"), ("The", "plain")]
    samples += [(PAD_TEXT, "padded")] if padded else []
    return "".join(f"{chip(t, r)} {escape(ROLE_LABELS[r])}&nbsp;&nbsp; " for t, r in samples)


def step_summary(step: Step) -> str:
    """One plain sentence for a step, e.g. '4 drafts, 2 accepted, 1 corrected, 1 discarded: 3 tokens for one pass'."""
    k, n = step.num_drafts, step.num_accepted
    committed = len(step.sampled_token_ids)
    padded = (f"; vLLM padded it with {step.num_padded_drafts} placeholder slots, which its counters count as "
              "rejected drafts") if step.num_padded_drafts else ""
    if not k:
        return f"no drafts: the target produced 1 token{padded}"
    tail = "all accepted plus a bonus token" if step.all_accepted else \
        f"{n} accepted, 1 corrected, {k - n - 1} discarded"
    return f"{k} drafts, {tail}: {committed} tokens for one target pass{padded}"


def chunks_html(chunks: list[StreamChunk]) -> str:
    """The output as streamed, one span per chunk, darker green the more tokens the chunk carried.

    Without the tracer this is what a client sees of speculative decoding: a chunk of 3 tokens is
    (while the client keeps up) one engine step that committed 3 tokens.
    """
    parts = []
    for i, c in enumerate(chunks):
        n = len(c.token_ids)
        title = f"chunk {i + 1}: {n} token{'s' if n != 1 else ''}"
        parts.append(f'<span class="sv-chunk sv-chunk-{min(n, 5)}" title="{title}">{escape(c.text)}</span>')
    return f'{_OUTPUT_OPEN}{"".join(parts)}</div>'


_OUTPUT_OPEN = '<div class="sv-output">'


def chunks_legend_html() -> str:
    return " ".join(f'<span class="sv-chunk sv-chunk-{n}">&nbsp;{n}{"+" if n == 5 else ""} '
                    f'token{"s" if n > 1 else ""}&nbsp;</span>' for n in range(1, 6))


# ---- without the tracer: steps from vLLM's per-step arrays (untraced_steps), no draft texts ------------

UNTOLD_TITLE = "vLLM counts these drafts as rejected; which tokens they were only the specviz tracer records"


def untold_chip(num_rejected: int) -> str:
    """The text-less chip of a step's rejected drafts: '2 drafts rejected — their text needs the tracer'."""
    label = f"{num_rejected} draft{'s' if num_rejected != 1 else ''} rejected — their text needs the tracer"
    return f'<span class="sv-chip sv-untold" title="{escape(UNTOLD_TITLE)}">{escape(label)}</span>'


def untraced_step_summary(step: UntracedStep) -> str:
    """'3 drafts, 2 accepted, 1 rejected: 3 tokens for one target pass' (counts from vLLM's arrays)."""
    n = len(step.token_ids)
    if step.verify_index is None:
        return "no drafts: the target produced 1 token"
    if step.truncated:
        return (f"{step.num_drafts} drafts, {step.num_accepted} accepted; the request stopped after {n} of them")
    tail = "all accepted plus a bonus token" if step.all_accepted else \
        f"{step.num_accepted} accepted, {step.num_rejected} rejected"
    return f"{step.num_drafts} drafts, {tail}: {n} token{'s' if n != 1 else ''} for one target pass"


def untraced_step_html(step: UntracedStep, label: str) -> str:
    """One row: the committed tokens by role, then the rejected drafts as one text-less chip.

    A step whose place in the stream is not proven (step.exact False) is marked ≈ and dashed.
    """
    chips = "".join(chip(text, role) for text, role in untraced_step_roles(step))
    if step.num_rejected and not step.truncated:
        chips += untold_chip(step.num_rejected)
    approx = "" if step.exact else " sv-approx"
    label = label if step.exact else f"≈ {label}"
    title = untraced_step_summary(step) + ("" if step.exact else " (its place in the stream is one possibility)")
    k = f'<span class="sv-stepk">k={step.num_drafts}</span>'  # as vLLM counts drafts: padded slots included
    return (f'<div class="sv-row{approx}" title="{escape(title)}"><span class="sv-stepno">{escape(label)}</span>'
            f"{k}{chips}</div>")


def untraced_steps_html(steps: Sequence[UntracedStep], start: int = 0) -> str:
    return "".join(untraced_step_html(s, f"step {start + i + 1}") for i, s in enumerate(steps))


def untraced_output_html(steps: Sequence[UntracedStep], marks: dict[int, str] | None = None) -> str:
    """The whole output coloured by origin, as output_html (with its `marks`), from the placed steps."""
    return pieces_html([piece for s in steps for piece in untraced_step_roles(s)], marks=marks)


def untraced_legend_html() -> str:
    samples: list[tuple[str, Role]] = [("sunny", "accepted"), ("clear", "correction"), ("today", "bonus"),
                                       ("The", "plain")]
    return ("".join(f"{chip(t, r)} {escape(ROLE_LABELS[r])}&nbsp;&nbsp; " for t, r in samples)
            + untold_chip(2) + " drafts vLLM counted as rejected (text-less)")
