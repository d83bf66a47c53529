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
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Literal

from .runfile import Request, Step, StreamChunk
from .untraced_steps import UntracedStep

Role = Literal["accepted", "rejected", "correction", "discarded", "bonus", "plain", "padded"]

# Readable on light and dark themes; each role also differs in decoration, not only colour.
CSS = """
<style>
.sv-chip{display:inline-block;margin:1px 2px;padding:0 4px;border-radius:4px;font-family:monospace;
 white-space:pre;border:1px solid transparent;line-height:1.6}
.sv-accepted{background:#c8f0c8;color:#0b4d0b;border-color:#6cc46c}
.sv-rejected{background:#ffd6d6;color:#8a1010;text-decoration:line-through;border-color:#e08080}
.sv-correction{background:#ffe2a8;color:#6a4100;border-color:#e0a030;font-weight:600}
.sv-discarded{background:#eeeeee;color:#888;text-decoration:line-through;opacity:.65;border-style:dashed;border-color:#bbb}
.sv-bonus{background:#dcd0ff;color:#3b1f8a;border-color:#9a80e0;font-weight:600}
.sv-plain{background:#dde8f5;color:#1d3b5e;border-color:#a9c1de}
.sv-padded{background:repeating-linear-gradient(45deg,#f4f4f4,#f4f4f4 4px,#e4e4e4 4px,#e4e4e4 8px);color:#777;
 border-style:dotted;border-color:#999;font-style:italic}
.sv-ws{opacity:.55}
.sv-row{margin:2px 0}
.sv-stepno{display:inline-block;width:5.5em;color:#888;font-size:.85em}
.sv-output{line-height:1.9}
.sv-output .sv-chip{margin:0;padding:0 1px;border-radius:2px;border:none}
.sv-output .sv-plain{background:transparent;color:inherit}
.sv-chunk{border-radius:3px;padding:0 1px;white-space:pre-wrap}
.sv-chunk-1{background:transparent}
.sv-chunk-2{background:#d6f0d6}.sv-chunk-3{background:#b4e4b4}.sv-chunk-4{background:#8fd68f}
.sv-chunk-5{background:#6cc46c}
.sv-untold{background:#fafafa;color:#8a1010;border:1px dashed #e08080;font-family:sans-serif;font-size:.85em}
.sv-approx .sv-stepno{font-style:italic}
.sv-approx .sv-chip{border-style:dashed}
</style>
"""

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
PAD_TEXT = "pad"


def visible(text: str) -> str:
    """Escape token text and make whitespace visible: 'a b\\n' -> 'a␣b↵'."""
    return "".join(
        f'<span class="sv-ws">{ch}</span>' if ch in "␣↵→" else ch
        for ch in escape(text.replace(" ", "␣").replace("\n", "↵").replace("\t", "→"))
    )


def chip(text: str, role: Role, title: str = "") -> str:
    label = ROLE_LABELS[role] + (f": {title}" if title else "")
    return f'<span class="sv-chip sv-{role}" title="{escape(label)}">{visible(text)}</span>'


def step_roles(step: Step) -> list[tuple[str, Role]]:
    """(text, role) for each chip of a step's row, in display order."""
    drafts = step.draft_texts or [str(t) for t in step.draft_token_ids]
    sampled = step.sampled_texts or [str(t) for t in step.sampled_token_ids]
    n = step.num_accepted
    padding: list[tuple[str, Role]] = [(PAD_TEXT, "padded")] * step.num_padded_drafts
    if not step.draft_token_ids:
        return [(sampled[0], "plain"), *padding]
    out: list[tuple[str, Role]] = [(t, "accepted") for t in drafts[:n]]
    if step.all_accepted:
        return out + [(sampled[n], "bonus")]
    if n == len(drafts):  # real drafts all accepted, then rejected padding: the target's token replaces a pad
        return out + [(sampled[n], "correction"), *padding]
    out += [(drafts[n], "rejected"), (sampled[n], "correction")]
    return out + [(t, "discarded") for t in drafts[n + 1:]] + padding


def step_html(step: Step, label: str = "") -> str:
    chips = "".join(chip(text, role) for text, role in step_roles(step))
    return f'<div class="sv-row"><span class="sv-stepno">{escape(label)}</span>{chips}</div>'


def steps_html(steps: list[Step], start: int = 0) -> str:
    return "".join(step_html(s, f"step {start + i + 1}") for i, s in enumerate(steps))


def output_roles(request: Request) -> list[tuple[str, Role]]:
    """Each committed token of a request with where it came from (accepted draft, correction, bonus, plain)."""
    out: list[tuple[str, Role]] = []
    for s in request.steps:
        texts = s.sampled_texts or [str(t) for t in s.sampled_token_ids]
        for j in range(len(s.committed_token_ids)):
            if not s.draft_token_ids:
                role: Role = "plain"
            elif j < s.num_accepted:
                role = "accepted"
            else:
                role = "bonus" if s.all_accepted else "correction"
            out.append((texts[j], role))
    return out


def output_html(request: Request) -> str:
    """The whole output, each token coloured by origin; newlines kept as line breaks."""
    return pieces_html(output_roles(request))


def pieces_html(pieces: Sequence[tuple[str, Role]], newest: int = 0) -> str:
    """Output pieces (text, role) as output_html draws them; the last `newest` also get the class sv-new."""
    parts = []
    first_new = len(pieces) - newest if newest else len(pieces)
    for i, (text, role) in enumerate(pieces):
        new = " sv-new" if i >= first_new else ""
        piece = f'<span class="sv-chip sv-{role}{new}" title="{escape(ROLE_LABELS[role])}">{escape(text)}</span>'
        parts.append(piece.replace("\n", "<br>"))
    return f'<div class="sv-output">{"".join(parts)}</div>'


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
    return f'<div class="sv-output">{"".join(parts)}</div>'


def chunks_legend_html() -> str:
    return " ".join(f'<span class="sv-chunk sv-chunk-{n}">&nbsp;{n}{"+" if n == 5 else ""} '
                    f'token{"s" if n > 1 else ""}&nbsp;</span>' for n in range(1, 6))


# ---- without the tracer: steps from vLLM's per-step arrays (untraced_steps), no draft texts ------------

UNTOLD_TITLE = "vLLM counts these drafts as rejected; which tokens they were only the specviz tracer records"


def untold_chip(num_rejected: int) -> str:
    """The text-less chip of a step's rejected drafts: '2 drafts rejected — their text needs the tracer'."""
    label = f"{num_rejected} draft{'s' if num_rejected != 1 else ''} rejected — their text needs the tracer"
    return f'<span class="sv-chip sv-untold" title="{escape(UNTOLD_TITLE)}">{escape(label)}</span>'


def untraced_step_roles(step: UntracedStep) -> list[tuple[str, Role]]:
    """(text, role) of each committed token of a step placed from vLLM's arrays.

    3 drafts, 2 accepted, tokens [sunny, and, clear] -> sunny/and accepted, clear the correction;
    3 of 3 accepted, 4 tokens -> the 4th is the bonus; no drafts -> the target's own token.
    A step the engine stopped inside has only its first tokens: all of them accepted drafts.
    """
    if step.verify_index is None:
        return [(t, "plain") for t in step.token_texts]
    out: list[tuple[str, Role]] = []
    for j, text in enumerate(step.token_texts):
        role: Role = "accepted" if j < step.num_accepted else ("bonus" if step.all_accepted else "correction")
        out.append((text, role))
    return out


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
    return (f'<div class="sv-row{approx}" title="{escape(title)}"><span class="sv-stepno">{escape(label)}</span>'
            f"{chips}</div>")


def untraced_steps_html(steps: Sequence[UntracedStep], start: int = 0) -> str:
    return "".join(untraced_step_html(s, f"step {start + i + 1}") for i, s in enumerate(steps))


def untraced_output_html(steps: Sequence[UntracedStep]) -> str:
    """The whole output coloured by origin, as output_html, from the placed steps."""
    return pieces_html([piece for s in steps for piece in untraced_step_roles(s)])


def untraced_legend_html() -> str:
    samples: list[tuple[str, Role]] = [("sunny", "accepted"), ("clear", "correction"), ("today", "bonus"),
                                       ("The", "plain")]
    return ("".join(f"{chip(t, r)} {escape(ROLE_LABELS[r])}&nbsp;&nbsp; " for t, r in samples)
            + untold_chip(2) + " drafts vLLM counted as rejected (text-less)")
