"""Try your own draft: the real target model's verdict on a draft you typed, as greedy speculative decoding decides it.

    v = verify_draft(server.url, server.model, tokenizer, "The weather today is", " sunny and warm outside")
    # (serving.verify_client asks the server) for a target whose greedy continuation is " sunny and clear ...":
    v.num_accepted        # 2: " sunny", " and" are the target's own greedy tokens
    v.correction          # " clear": the target's token in place of " warm"
    v.discarded           # [" outside"]: drafted after the first rejection, thrown away
    render.step_html(v.to_step())   # drawn exactly like a recorded engine step

(SmolLM2-135M-Instruct, the demo model, rejects " sunny" at once and puts " " there: it wants
to write a date. See tests/live/test_live_verify.py.)

Here: the verdict (DraftVerification) and how the server's answer becomes one (parse_response). The
server scores every prompt position in one prefill (serving.verify_client): the prompt logprobs at the
position of draft token j are the target's distribution given prompt + draft[:j], which is exactly
what a speculative-decoding step compares draft token j against; the one generated token is the
target's token after the whole draft (the bonus token when every draft token is accepted).

Greedy rule (vLLM's rejection sampler at temperature 0): draft token j is accepted while it equals
the target's argmax and every earlier one was accepted; at the first mismatch the target's argmax
is the correction and the rest of the draft is discarded. Ties: vLLM's greedy argmax picks the
lowest token id among equal maxima, so we do the same; the order of vLLM's top-k list does not
follow that rule (a tie can be listed with the higher id first), so we never take "the first
entry" as the argmax.

Near ties and precision: this verification pass scores all draft positions in one prefill, like a
real speculative-decoding step, while plain greedy generation scores one token per decode step.
With bf16 weights the two can differ by one rounding step of a logit, so at an exact tie or a gap
of about 0.1 nats the verifier's choice may differ from what plain greedy decoding produced.
`TargetChoice.margin` and `tied_token_ids` show where that can happen.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import Field, model_validator

from .base import Frozen, SpecvizError
from .runfile import Step


class VerifyError(SpecvizError, RuntimeError):
    """The draft could not be verified; the message says what to change."""


class Token(Frozen):
    """One token with the target's log-probability for it at some position.

    Example: Token(token_id=284, text=" and", logprob=-1.38).
    """

    token_id: int
    text: str = Field(description="tokenizer.decode([token_id])")
    logprob: float = Field(description="the target's log-probability at this position (-9999 for -inf)")


class TargetChoice(Frozen):
    """The target's greedy choice at one position, with its top alternatives.

    Example: after "The weather today is sunny", token=" and" (argmax), top=[" and", ",", "."],
    tied_token_ids=[] (no other token has exactly the argmax logprob).
    """

    token: Token = Field(description="the target's greedy (argmax) token")
    top: list[Token] = Field(description="top-k alternatives, highest logprob first, ties by lowest id")
    tied_token_ids: list[int] = Field(
        default_factory=list, description="other ids with exactly the argmax logprob (greedy picks the lowest id)")

    @property
    def margin(self) -> float | None:
        """Logprob gap between the greedy token and the best other token (0.0 on a tie; None if unknown).

        Example: " Paris" -0.27 vs " the" -2.71 -> 2.44. A gap of about one bf16 step of the logits
        (~0.06-0.125 for a small model) is a near tie: see the module docstring.
        """
        others = [t.logprob for t in self.top if t.token_id != self.token.token_id]
        return self.token.logprob - max(others) if others else None


class DraftPosition(Frozen):
    """Draft token j and what the target wanted there, given prompt + draft[:j].

    Example: j=2, draft " warm", target " clear", status "rejected".
    Positions after the first rejection are still scored (the target saw the rejected draft in its
    context there), but their status is "discarded" whatever they match.
    """

    index: int = Field(ge=0, description="j: position in the draft")
    draft: Token = Field(description="the draft token and the target's logprob for it")
    draft_rank: int = Field(
        ge=1, description="the draft token's place in the target's greedy order (1 = the argmax)")
    target: TargetChoice
    status: Literal["accepted", "rejected", "discarded"] = Field(
        description="accepted prefix, the first mismatch, or after it")

    @property
    def matches(self) -> bool:
        """True when the draft token is the target's greedy token here (regardless of status)."""
        return self.draft.token_id == self.target.token.token_id


class DraftVerification(Frozen):
    """The outcome of verifying one draft against the target, greedily.

    Example ("The weather today is" + " sunny and warm outside", a target that likes " clear"):
    num_accepted=2, accepted=[" sunny", " and"], correction=" clear", bonus=None,
    discarded=[" outside"]; to_step() gives drafts [sunny, and, warm, outside], sampled
    [sunny, and, clear]. When every draft token is accepted, correction is None and bonus is the
    target's token after the whole draft.
    """

    model: str
    prompt: str
    draft: str
    prompt_token_ids: list[int]
    draft_token_ids: list[int] = Field(min_length=1)
    draft_texts: list[str]
    positions: list[DraftPosition] = Field(description="one per draft token")
    after_draft: TargetChoice = Field(description="the token the server generated after the whole draft")
    num_accepted: int = Field(ge=0)
    correction: Token | None = Field(description="the target's token at the first mismatch; None if all accepted")
    bonus: Token | None = Field(description="the token after the whole draft when every draft token was accepted")
    discarded: list[Token] = Field(description="draft tokens after the first mismatch (logprob = target's)")

    @model_validator(mode="after")
    def _check(self) -> DraftVerification:
        k = len(self.draft_token_ids)
        if len(self.draft_texts) != k or len(self.positions) != k:
            raise ValueError("draft_texts and positions need one entry per draft token")
        if self.num_accepted > k:
            raise ValueError(f"num_accepted={self.num_accepted} > {k} draft tokens")
        if (self.correction is None) == (self.bonus is None):
            raise ValueError("exactly one of correction and bonus is set")
        if (self.bonus is not None) != (self.num_accepted == k):
            raise ValueError("a bonus token exists exactly when every draft token is accepted")
        tail = self.draft_token_ids[self.num_accepted + 1:] if self.correction is not None else []
        if [t.token_id for t in self.discarded] != tail:
            raise ValueError("discarded must be the draft tokens after the first mismatch")
        statuses = [p.status for p in self.positions]
        expected = (["accepted"] * self.num_accepted + (["rejected"] if self.correction else [])
                    + ["discarded"] * len(tail))
        if statuses != expected:
            raise ValueError(f"position statuses {statuses} disagree with num_accepted={self.num_accepted}")
        return self

    @property
    def accepted(self) -> list[Token]:
        """The accepted prefix of the draft."""
        return [p.draft for p in self.positions[: self.num_accepted]]

    @property
    def rejected(self) -> Token | None:
        """The first draft token the target disagreed with (None if all accepted)."""
        return self.positions[self.num_accepted].draft if self.correction is not None else None

    @property
    def sampled(self) -> list[Token]:
        """What one verification step commits: accepted prefix + correction or bonus."""
        return [*self.accepted, self.correction or self.bonus]

    def to_step(self, engine_step: int = 0, time_s: float | None = None) -> Step:
        """This verification as a trace Step, so render.step_html draws it like a recorded step.

        Example: drafts [sunny, and, warm, outside] and correction clear ->
        Step(draft_token_ids=[sunny, and, warm, outside], sampled=committed=[sunny, and, clear]).
        """
        sampled = self.sampled
        return Step(
            engine_step=engine_step, time_s=time.time() if time_s is None else time_s,
            draft_token_ids=list(self.draft_token_ids),
            sampled_token_ids=[t.token_id for t in sampled],
            committed_token_ids=[t.token_id for t in sampled],
            num_accepted=self.num_accepted,
            draft_texts=list(self.draft_texts),
            sampled_texts=[t.text for t in sampled],
        )


# ---- the server's answer ----------------------------------------------------------------------


def parse_response(
    data: dict, *, model: str, prompt: str, draft: str, prompt_ids: list[int], draft_ids: list[int],
    top_k: int, decode,
) -> DraftVerification:
    """Turn the /v1/completions response to serving.verify_client.request_body into a DraftVerification
    (greedy rule). `decode` gives a token id's text (serving.recording.token_decoder)."""
    try:
        choice = data["choices"][0]
        prompt_lps = choice["prompt_logprobs"]
        gen_ids = choice["token_ids"]
        gen_top = choice["logprobs"]["top_logprobs"][0]
    except (KeyError, IndexError, TypeError) as e:
        raise VerifyError(
            f"the server's answer lacks prompt_logprobs, logprobs or token_ids ({type(e).__name__}: {e}): "
            "is it a vLLM OpenAI-compatible server?"
        ) from e
    n_prompt = len(prompt_ids)
    if not isinstance(prompt_lps, list) or len(prompt_lps) != n_prompt + len(draft_ids) or not gen_ids:
        raise VerifyError("the server returned prompt logprobs for a different number of tokens than were sent")

    positions: list[DraftPosition] = []
    num_accepted, correction = 0, None
    for j, draft_id in enumerate(draft_ids):
        entry = prompt_lps[n_prompt + j]  # conditioned on prompt + draft[:j]
        if not entry:
            raise VerifyError(f"the server returned no prompt logprobs at draft position {j}")
        lps = {int(tid): float(v["logprob"]) for tid, v in entry.items()}
        target = _choice(lps, top_k, decode)
        if draft_id == target.token.token_id and correction is None:
            status = "accepted"
            num_accepted += 1
        elif correction is None:
            status = "rejected"
            correction = target.token
        else:
            status = "discarded"
        positions.append(DraftPosition(
            index=j, draft=Token(token_id=draft_id, text=decode(draft_id), logprob=lps[draft_id]),
            draft_rank=_draft_rank(draft_id, entry, lps, top_k), target=target, status=status,
        ))

    # The generated token: vLLM's greedy sampler already chose it (lowest id among tied maxima).
    gen_lps = {}
    for key, lp in gen_top.items():
        tid = key.removeprefix("token_id:")
        if not tid.lstrip("-").isdigit():
            raise VerifyError(f"unexpected logprobs key {key!r}: the server ignored return_tokens_as_token_ids")
        gen_lps[int(tid)] = float(lp)
    gen_id = int(gen_ids[0])
    after = _choice(gen_lps, top_k, decode, chosen=gen_id)

    bonus = after.token if correction is None else None
    discarded = [p.draft for p in positions if p.status == "discarded"]
    return DraftVerification(
        model=model, prompt=prompt, draft=draft, prompt_token_ids=prompt_ids, draft_token_ids=draft_ids,
        draft_texts=[decode(t) for t in draft_ids], positions=positions, after_draft=after,
        num_accepted=num_accepted, correction=correction, bonus=bonus, discarded=discarded,
    )


# ---- helpers -----------------------------------------------------------------------------------


def _choice(lps: dict[int, float], top_k: int, decode, chosen: int | None = None) -> TargetChoice:
    """The greedy token of one position from {id: logprob}: highest logprob, lowest id on a tie.

    Example: {30: -0.92, 28: -0.92, 351: -2.67} -> token 28 (tied with 30), top [28, 30, 351].
    `chosen` overrides the argmax with the token the server actually sampled.
    """
    ranked = sorted(lps.items(), key=lambda kv: (-kv[1], kv[0]))
    best_lp = ranked[0][1]
    best = ranked[0][0] if chosen is None else chosen
    tied = [tid for tid, lp in ranked if lp == best_lp and tid != best]
    return TargetChoice(
        token=Token(token_id=best, text=decode(best), logprob=lps.get(best, best_lp)),
        top=[Token(token_id=tid, text=decode(tid), logprob=lp) for tid, lp in ranked[:top_k]],
        tied_token_ids=tied,
    )


def _draft_rank(draft_id: int, entry: dict, lps: dict[int, float], top_k: int) -> int:
    """1 + how many tokens greedy decoding prefers to the draft token (higher logprob, or equal and lower id).

    vLLM's own "rank" counts vocabulary logprobs >= the token's (a tie at the top gives rank 2 to
    both), and when the token is also in the top-k its entry is overwritten by its place in the
    top-k list. So: inside the top-k (the entry then has <= top_k ids) recompute from the values,
    outside it use vLLM's count.
    """
    if len(entry) <= top_k:
        lp = lps[draft_id]
        return 1 + sum(1 for tid, v in lps.items() if v > lp or (v == lp and tid < draft_id))
    return max(int(entry[str(draft_id)].get("rank") or 1), top_k + 1)
