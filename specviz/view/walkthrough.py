"""The worked example every user should recognise, drawn phase by phase for the Methods page.

    prompt "The weather today is", drafts " sunny and warm outside"
    the target accepts " sunny and", puts " clear" where " warm" was, and " outside" is discarded:
    three tokens committed for one target pass

    request = weather_request()
    phase_html(request, 0)     -> the drafts, not yet decided
    phase_caption(request, 4)  -> "Drafts after the first rejection are discarded (1 here): ..."

Any request whose first drafted step has a rejection can be walked through the same way. Every
token text is escaped (model output is untrusted input); the chips and their CSS come from
`specviz.view.render`.
"""

from __future__ import annotations

from html import escape

from ..runfile import Request, Step
from . import render

WEATHER_PROMPT = "The weather today is"
PHASES = ("drafts proposed", "target verifies", "accepted prefix", "correction", "discarded tail, commit")


def weather_request() -> Request:
    """The drafter proposes ' sunny and warm outside'; the target accepts 2 and puts ' clear' for ' warm'.

    Token ids: sunny=1 and=2 warm=3 outside=4 clear=5 (made up; the texts are what is shown).
    """
    step = Step(engine_step=1, time_s=1.0, draft_token_ids=[1, 2, 3, 4], sampled_token_ids=[1, 2, 5],
                committed_token_ids=[1, 2, 5], num_accepted=2,
                draft_texts=[" sunny", " and", " warm", " outside"], sampled_texts=[" sunny", " and", " clear"])
    return Request(request_id="weather", prompt=WEATHER_PROMPT, output_token_ids=[1, 2, 5],
                   output_text=" sunny and clear", start_time_s=0.0, finish_reason=None, steps=[step])


def _span(text: str, css: str, title: str) -> str:
    return f'<span class="sv-chip {css}" title="{escape(title)}">{render.visible(text)}</span>'


def _drafted_step(request: Request) -> Step:
    step = next((s for s in request.steps if s.draft_token_ids), None)
    if step is None or step.all_accepted:
        raise ValueError("the phases need a step with drafts and a rejection, such as weather_request()'s")
    return step


def phase_html(request: Request, phase: int) -> str:
    """HTML for phase 0..4 (see PHASES) of the request's first drafted step; every token text is escaped."""
    step = _drafted_step(request)
    drafts = step.draft_texts or [str(t) for t in step.draft_token_ids]
    sampled = step.sampled_texts or [str(t) for t in step.sampled_token_ids]
    n = step.num_accepted
    roles = render.step_roles(step)  # accepted..., rejected, correction, discarded...

    def row(label: str, chips: str) -> str:
        return f'<div class="sv-row"><span class="sv-stepno">{escape(label)}</span>{chips}</div>'

    def undecided(texts: list[str]) -> str:
        return "".join(_span(t, "sv-undecided", "proposed draft, not yet decided") for t in texts)

    rows = [row("prompt", escape(request.prompt))]
    if phase == 0:
        rows.append(row("drafts", undecided(drafts)))
    elif phase == 1:
        rows.append(row("drafts", undecided(drafts)))
        # One target pass scores every draft position; the first mismatch ends the comparison.
        verdicts = [_span(sampled[i] + " ✓", "sv-accepted", "the target's token matches the draft") for i in range(n)]
        verdicts.append(_span(sampled[n] + " ✗", "sv-correction", "the target's token differs from the draft"))
        verdicts += [_span("not compared", "sv-discarded", "after the first mismatch") for _ in drafts[n + 1:]]
        rows.append(row("target", "".join(verdicts)))
    elif phase == 2:
        rows.append(row("step", "".join(render.chip(t, r) for t, r in roles[:n]) + undecided(drafts[n:])))
    elif phase == 3:
        rows.append(row("step", "".join(render.chip(t, r) for t, r in roles[:n + 2]) + undecided(drafts[n + 1:])))
    else:
        rows.append(row("step", "".join(render.chip(t, r) for t, r in roles)))
        rows.append(row("output", escape(request.prompt) + render.output_html(request, inline=True)))
    return "".join(rows)


def phase_caption(request: Request, phase: int) -> str:
    step = _drafted_step(request)
    drafts = [t.strip() for t in step.draft_texts or map(str, step.draft_token_ids)]
    sampled = [t.strip() for t in step.sampled_texts or map(str, step.sampled_token_ids)]
    k, n = len(drafts), step.num_accepted
    return [
        f"The drafter proposes {k} tokens to follow the prompt: {' '.join(drafts)!r}.",
        f"One target forward pass scores all {k} positions at once. It agrees on the first {n}; at position "
        f"{n + 1} its own token is {sampled[n]!r}, not {drafts[n]!r}.",
        f"The longest prefix where draft and target agree is accepted: {n} tokens.",
        f"The first rejected draft ({drafts[n]!r}) is replaced by the target's own token ({sampled[n]!r}): "
        "the correction costs no extra pass.",
        f"Drafts after the first rejection are discarded ({k - n - 1} here): they were guessed after a wrong "
        f"token. {render.step_summary(step)}.",
    ][phase]
