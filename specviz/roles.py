"""Where each token shown came from: an accepted draft, the rejected draft and the target's token in its
place, the discarded tail, the bonus token, or the target's own token when nothing was drafted.

    drafts [sunny, and, warm, outside], sampled [sunny, and, clear]
    step_roles(step)    -> [(sunny, accepted), (and, accepted), (warm, rejected), (clear, correction),
                            (outside, discarded)]
    output_roles(req)   -> [(sunny, accepted), (and, accepted), (clear, correction), ...]  committed tokens only

Plain data for the views (specviz/view/render.py draws these roles as chips) and the race model.
"""

from __future__ import annotations

from typing import Literal

from .runfile import Request, Step
from .untraced_steps import UntracedStep

Role = Literal["accepted", "rejected", "correction", "discarded", "bonus", "plain", "padded"]
PAD_TEXT = "pad"  # the text of a slot vLLM padded a step with (no drafter proposed it)
# vLLM pads with num_speculative_tokens slots; a row shows at most this many (an invalid run may claim any number)
MAX_PAD_CHIPS = 64


def _texts(texts: list[str], ids: list[int]) -> list[str]:
    """The decoded texts of `ids`, or the ids themselves when the texts were not recorded (or do not match them)."""
    return texts if len(texts) == len(ids) else [str(t) for t in ids]


def step_roles(step: Step) -> list[tuple[str, Role]]:
    """(text, role) for each chip of a step's row, in display order.

    A step of an invalid run (read as recorded) may claim more accepted drafts than it has drafts or
    sampled tokens: its row shows what the lists hold (n clamped to them), never an index past their end.
    """
    drafts = _texts(step.draft_texts, step.draft_token_ids)
    sampled = _texts(step.sampled_texts, step.sampled_token_ids)
    n = max(0, min(step.num_accepted, len(drafts), len(sampled) - 1))
    padding: list[tuple[str, Role]] = [(PAD_TEXT, "padded")] * min(step.num_padded_drafts, MAX_PAD_CHIPS)
    if not step.draft_token_ids:
        return [(sampled[0], "plain"), *padding]
    out: list[tuple[str, Role]] = [(t, "accepted") for t in drafts[:n]]
    if step.all_accepted:
        return out + [(sampled[n], "bonus")]
    if n == len(drafts):  # real drafts all accepted, then rejected padding: the target's token replaces a pad
        return out + [(sampled[n], "correction"), *padding]
    out += [(drafts[n], "rejected"), (sampled[n], "correction")]
    return out + [(t, "discarded") for t in drafts[n + 1:]] + padding


def committed_chip(step: Step, j: int) -> int:
    """Which chip of step_roles(step) shows the step's j-th committed token.

    drafts [sunny, and, warm, outside], sampled [sunny, and, clear]: chips sunny and ~~warm~~ clear
    ~~outside~~, so token 0 -> chip 0, token 2 (clear) -> chip 3 (after the rejected draft).
    """
    rejected_before = int(bool(step.draft_token_ids) and j == step.num_accepted < len(step.draft_token_ids))
    return j + rejected_before


def output_roles(request: Request, limit: int | None = None) -> list[tuple[str, Role]]:
    """Each committed token of a request (its first `limit`, if given) with where it came from (accepted draft,
    correction, bonus, plain)."""
    out: list[tuple[str, Role]] = []
    for s in request.steps:
        if limit is not None and len(out) >= limit:
            return out[:limit]
        texts = _texts(s.sampled_texts, s.sampled_token_ids)
        texts = [*texts, *(str(t) for t in s.committed_token_ids[len(texts):])]  # an invalid run's may commit more
        for j in range(len(s.committed_token_ids)):
            if not s.draft_token_ids:
                role: Role = "plain"
            elif j < s.num_accepted:
                role = "accepted"
            else:
                role = "bonus" if s.all_accepted else "correction"
            out.append((texts[j], role))
    return out if limit is None else out[:limit]


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
