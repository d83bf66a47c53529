"""Verify steps without the tracer: vLLM's per-step arrays placed on the stream, with worked examples."""

from __future__ import annotations

import re

import pytest

from specviz.runfile import Request, RequestSpecDecodeMetrics, StreamChunk
from specviz.untraced_steps import arrays_acceptance, has_step_arrays, place_steps


def untraced_request(chunks: list[list[int]], accepted: list[int] | None, drafted: list[int] | None, *,
                     k: int = 3, finish_reason: str | None = "length", texts: bool = False) -> Request:
    """A request as `record` keeps it from a server with --per-request-spec-decode-metrics detailed, no tracer."""
    tokens = [t for c in chunks for t in c]
    metrics = None
    if accepted is not None:
        histogram = [sum(1 for a in accepted if a == j) for j in range(k + 1)]
        metrics = RequestSpecDecodeMetrics(
            mean_acceptance_length=1 + sum(accepted) / max(len(accepted), 1),
            draft_acceptance_rate=sum(accepted) / max(sum(drafted), 1), acceptance_histogram=histogram,
            num_spec_steps=len(accepted), num_accepted_draft_tokens=sum(accepted), num_draft_tokens=sum(drafted),
            num_spec_tokens=k, per_step_accepted=accepted, per_step_drafted=drafted)
    return Request(
        request_id="r0", prompt="p", output_token_ids=tokens, output_text="",
        output_token_texts=[f"t{t}" for t in tokens] if texts else [],
        start_time_s=0.0, first_token_time_s=1.0, end_time_s=9.0, finish_reason=finish_reason,
        stream_chunks=[StreamChunk(time_s=1.0 + i, token_ids=c, text="") for i, c in enumerate(chunks)],
        spec_decode_metrics=metrics)


def shape(placed) -> list[tuple[int | None, int, int, bool]]:
    """(verify index, drafts, tokens committed, exact) per step."""
    return [(s.verify_index, s.num_drafts, len(s.token_ids), s.exact) for s in placed.steps]


def all_tilings(sizes: list[int], accepted: list[int], drafted: list[int], k: int, stopped: bool,
                one_step_per_chunk: bool) -> list[list]:
    """Brute force, straight from the rules: every cut of the output into steps, as (start, verify index) lists."""
    n, ends, out = sum(sizes), {sum(sizes[:j + 1]) for j in range(len(sizes))}, []

    def crosses(p: int, q: int) -> bool:
        return any(p < e < q for e in ends) or (one_step_per_chunk and q not in ends)

    def go(p: int, i: int, path: list) -> None:
        if p == n:
            if i == len(accepted):
                out.append(path)
            return
        if not crosses(p, p + 1):
            go(p + 1, i, path + [(p, None)])
        if i < len(accepted) and (p > 0 or (accepted[0] == 0 and drafted[0] == k)):
            size = accepted[i] + 1
            if p + size <= n and not crosses(p, p + size):
                go(p + size, i + 1, path + [(p, i)])
            elif stopped and i == len(accepted) - 1 and p + size > n and not crosses(p, n):
                go(n, i + 1, path + [(p, i)])

    go(0, 0, [])
    return out


def test_the_worked_example_has_one_tiling_and_every_step_is_exact():
    # chunks of 1, 3, 4, 1 tokens; verify steps accepted 2, 3, 0 of 3 drafts each
    req = untraced_request([[10], [11, 12, 13], [14, 15, 16, 17], [18]], [2, 3, 0], [3, 3, 3], texts=True)
    placed = place_steps(req, k=3)
    assert placed.placement == "exact" and placed.num_exact_verify_steps == 3
    assert shape(placed) == [(None, 0, 1, True), (0, 3, 3, True), (1, 3, 4, True), (2, 3, 1, True)]
    prefill, first, second, third = placed.steps
    assert first.token_ids == [11, 12, 13] and first.token_texts == ["t11", "t12", "t13"]
    assert first.num_rejected == 1 and not first.all_accepted  # 2 accepted, the 3rd rejected: 13 is the correction
    assert second.all_accepted and second.num_rejected == 0  # 17 is the bonus token
    assert third.num_rejected == 3  # nothing accepted: 18 is the target's correction, 3 drafts rejected
    assert [s.chunk_index for s in placed.steps] == [0, 1, 2, 3]
    assert [s.time_s for s in placed.steps] == [1.0, 2.0, 3.0, 4.0]
    assert placed.why.startswith("each stream chunk is one step")


def test_a_verify_step_that_accepted_nothing_beside_a_step_without_drafts_is_approximate():
    # 6 tokens, verify steps take 3 + 1: one 1-token step had no drafts, before or after verify 2
    req = untraced_request([[1], [2, 3, 4], [5], [6]], [2, 0], [3, 3])
    placed = place_steps(req, k=3)
    assert placed.placement == "approximate" and placed.num_exact_verify_steps == 1
    # the shown tiling: prefill first, then the verify step as early as it fits; marked inexact
    assert shape(placed) == [(None, 0, 1, True), (0, 3, 3, True), (1, 3, 1, False), (None, 0, 1, False)]
    assert "steps that drafted nothing are not in vLLM's arrays" in placed.why
    assert "1 of 2 verify steps" in placed.why
    assert len(all_tilings([1, 3, 1, 1], [2, 0], [3, 3], 3, stopped=True, one_step_per_chunk=True)) == 2


def test_a_first_step_that_drafted_k_and_accepted_nothing_may_be_one_vllm_padded():
    # accepted 0 of k=3 at the first verify step: it may be the first token itself (a padded prefill)
    padded_possible = place_steps(untraced_request([[1], [2], [3, 4, 5]], [0, 2], [3, 3], finish_reason="abort"),
                                  k=3)
    assert padded_possible.placement == "approximate"
    assert shape(padded_possible)[0] == (None, 0, 1, False)
    # with only 2 drafted of k=3 it cannot have been padded (padding fills all k slots): one tiling
    not_padded = place_steps(untraced_request([[1], [2], [3, 4, 5]], [0, 2], [2, 3], finish_reason="abort"), k=3)
    assert not_padded.placement == "exact"
    # and when every token is taken by a verify step, the first one must be the padded one
    padded = place_steps(untraced_request([[1], [2, 3, 4]], [0, 2], [3, 3]), k=3)
    assert padded.placement == "exact" and shape(padded) == [(0, 3, 1, True), (1, 3, 3, True)]


def test_a_chunk_that_merges_steps_is_exact_when_the_sums_allow_one_order_only():
    # the client lagged: verify steps of 3 and 4 tokens arrived in one chunk of 7
    placed = place_steps(untraced_request([[1], [2, 3, 4, 5, 6, 7, 8]], [2, 3], [3, 3], finish_reason="abort"), k=3)
    assert placed.placement == "exact" and placed.num_merged_chunks == 1
    assert shape(placed) == [(None, 0, 1, True), (0, 3, 3, True), (1, 3, 4, True)]


def test_a_chunk_that_merges_steps_with_one_without_drafts_is_approximate():
    # 5 tokens in one chunk: verify steps of 2 and 2 tokens and one 1-token step, in any of 3 orders
    placed = place_steps(untraced_request([[1], [2, 3, 4, 5, 6]], [1, 1], [2, 2]), k=2)
    assert placed.placement == "approximate" and placed.num_exact_verify_steps == 0
    assert placed.num_merged_chunks == 1
    assert "merge several steps" in placed.why
    counts = [(s.num_drafts, s.num_accepted) for s in placed.steps if s.verify_index is not None]
    assert counts == [(2, 1), (2, 1)]  # the counts per step stay exact whatever the order


def test_a_request_that_stopped_inside_its_last_step_commits_fewer_tokens_than_accepted_plus_one():
    # vLLM counts all 3 drafts of the last step accepted, but max_tokens cut the output after 2 of them
    req = untraced_request([[1], [2, 3, 4, 5], [6, 7]], [3, 3], [3, 3], finish_reason="length")
    placed = place_steps(req, k=3)
    assert placed.placement == "exact"
    last = placed.steps[-1]
    assert last.token_ids == [6, 7] and last.num_accepted == 3 and last.truncated
    # an aborted request cannot end inside a step: the tokens do not add up
    for finish in ("abort", None):
        cut = place_steps(untraced_request([[1], [2, 3, 4, 5], [6, 7]], [3, 3], [3, 3], finish_reason=finish), k=3)
        assert cut.placement == "unaligned" and cut.steps == []


def test_chunks_that_fit_the_arrays_one_step_each_are_read_as_one_step_each():
    # [5, 6, 7] could be one or two steps without drafts and what is left of a verify step the engine stopped inside,
    # had the client fallen behind; the chunks fit one step each, so that is how they are read
    req = untraced_request([[1], [2, 3, 4], [5, 6, 7]], [2, 2], [3, 3], finish_reason="stop")
    placed = place_steps(req, k=3)
    assert placed.placement == "exact" and placed.one_step_per_chunk
    assert "each stream chunk is one step" in placed.why
    assert len(all_tilings([1, 3, 3], [2, 2], [3, 3], 3, stopped=True, one_step_per_chunk=False)) == 3
    merged = place_steps(untraced_request([[1], [2, 3, 4, 5, 6, 7, 8]], [2, 3], [3, 3]), k=3)
    assert not merged.one_step_per_chunk and "the client fell behind: 1 chunks merge several steps" in merged.why


@pytest.mark.parametrize("seed", range(300))
def test_place_steps_agrees_with_brute_force(seed):
    """Random small streams: a step is exact exactly when every brute-force tiling starts it at the same token."""
    import random

    rng = random.Random(seed)
    k = rng.randint(1, 3)
    # build a true history, then merge some neighbouring chunks as a lagging client would
    steps: list[int] = [1]  # token counts: the prefill
    accepted, drafted = [], []
    for _ in range(rng.randint(0, 6)):
        if rng.random() < 0.4:
            steps.append(1)
        else:
            d = rng.randint(1, k)
            a = rng.randint(0, d)
            accepted.append(a)
            drafted.append(d)
            steps.append(a + 1)
    stopped = rng.random() < 0.5
    if stopped and accepted and steps[-1] > 1 and rng.random() < 0.5:
        steps[-1] = rng.randint(1, steps[-1] - 1)  # stopped inside its last verify step
    sizes: list[int] = []
    for n in steps:
        if sizes and rng.random() < 0.3:
            sizes[-1] += n
        else:
            sizes.append(n)
    chunks, t = [], 0
    for n in sizes:
        chunks.append(list(range(t, t + n)))
        t += n
    req = untraced_request(chunks, accepted, drafted, k=k, finish_reason="length" if stopped else "abort")
    placed = place_steps(req, k=k)
    tilings = all_tilings(sizes, accepted, drafted, k, stopped, one_step_per_chunk=True)
    assert placed.one_step_per_chunk == bool(tilings)
    tilings = tilings or all_tilings(sizes, accepted, drafted, k, stopped, one_step_per_chunk=False)
    assert tilings, "the true history is one tiling"
    assert placed.placement == ("exact" if len(tilings) == 1 else "approximate")
    for i in range(len(accepted)):
        starts = {start for tiling in tilings for start, v in tiling if v == i}
        step = next(s for s in placed.steps if s.verify_index == i)
        assert step.exact == (len(starts) == 1)
    shown = [(sum(len(s.token_ids) for s in placed.steps[:j]), s.verify_index) for j, s in enumerate(placed.steps)]
    assert shown in tilings


def test_a_stream_the_arrays_cannot_tile_is_unaligned_and_says_so():
    placed = place_steps(untraced_request([[1, 2], [3]], [1], [3], finish_reason="abort"), k=3)
    assert placed.placement == "unaligned" and placed.steps == []
    assert "cannot be cut into these 1 verify steps" in placed.why
    assert placed.per_step_accepted == [1]  # the arrays stay: the timeline needs nothing else


def test_without_the_arrays_the_request_says_which_flag_is_missing():
    summary_only = untraced_request([[1], [2, 3]], [1], [3])
    summary_only = summary_only.model_copy(update={"spec_decode_metrics": summary_only.spec_decode_metrics.model_copy(
        update={"per_step_accepted": None, "per_step_drafted": None})})
    for req in (untraced_request([[1], [2, 3]], None, None), summary_only):
        assert not has_step_arrays(req)
        placed = place_steps(req, k=3)
        assert placed.placement == "no arrays" and "--per-request-spec-decode-metrics detailed" in placed.why


def test_token_texts_fall_back_to_ids_when_the_run_has_none():
    placed = place_steps(untraced_request([[7], [8, 9]], [1], [3]), k=3)
    assert [s.token_texts for s in placed.steps] == [["7"], ["8", "9"]]


def test_arrays_acceptance_counts_as_vllm():
    req = untraced_request([[10], [11, 12, 13], [14, 15, 16, 17], [18]], [2, 3, 0], [3, 3, 3])
    acc = arrays_acceptance(req.spec_decode_metrics, k=3)
    assert (acc.num_drafts, acc.num_draft_tokens, acc.num_accepted_tokens) == (3, 9, 5)
    assert acc.num_accepted_tokens_per_pos == [2, 2, 1]  # steps that accepted more than 0, 1, 2 drafts
    assert acc.mean_acceptance_length == pytest.approx(1 + 5 / 3)


def test_long_requests_tile_quickly():
    # 400 verify steps at k=3 and 400 steps without drafts in between, one chunk each
    chunks, accepted = [[0]], []
    for i in range(400):
        a = i % 4
        chunks += [[1] * (a + 1), [2]]
        accepted.append(a)
    placed = place_steps(untraced_request(chunks, accepted, [3] * 400), k=3)
    assert placed.placement == "approximate"  # a=0 steps among 1-token steps: placed, but not provably
    assert sum(len(s.token_ids) for s in placed.steps) == sum(len(c) for c in chunks)


def test_the_step_rows_show_committed_tokens_by_role_and_rejected_drafts_as_a_textless_count():
    from specviz.view import render

    req = untraced_request([[10], [11, 12, 13], [14, 15, 16, 17], [18]], [2, 3, 0], [3, 3, 3])
    req = req.model_copy(update={"output_token_texts": ["<b>", " sunny", " and", " clear", "a", "b", "c", "d", "e"]})
    placed = place_steps(req, k=3)
    roles = [render.untraced_step_roles(s) for s in placed.steps]
    assert roles[1] == [(" sunny", "accepted"), (" and", "accepted"), (" clear", "correction")]
    assert roles[2][-1] == ("d", "bonus") and roles[3] == [("e", "correction")]
    html = render.untraced_steps_html(placed.steps)
    assert "&lt;b&gt;" in html and "<b>" not in html  # token text is escaped
    assert html.count("rejected — their text needs the tracer") == 2  # 1 of step 2 and 3 of step 4
    assert "1 draft rejected — their text needs the tracer" in html
    assert "3 drafts rejected — their text needs the tracer" in html
    assert re.findall(r'class="sv-stepk">([^<]*)<', html) == [f"k={s.num_drafts}" for s in placed.steps]
    assert re.findall(r'class="sv-stepk">([^<]*)<', html)[1] == "k=3"  # each row says its drafts
    assert render.untraced_step_summary(placed.steps[1]) == "3 drafts, 2 accepted, 1 rejected: 3 tokens for one target pass"


def test_an_approximately_placed_step_is_marked():
    from specviz.view import render

    placed = place_steps(untraced_request([[1], [2, 3, 4], [5], [6]], [2, 0], [3, 3]), k=3)
    html = render.untraced_step_html(placed.steps[2], "step 3")
    assert "sv-approx" in html and "≈ step 3" in html
    assert "sv-approx" not in render.untraced_step_html(placed.steps[1], "step 2")


def test_the_timeline_from_the_arrays_alone():
    from specviz.charts.timeline import arrays_timeline, arrays_timeline_table

    table = arrays_timeline_table([2, 3, 0], [3, 3, 3])
    assert list(table["part"]) == ["accepted drafts", "rejected + discarded drafts", "accepted drafts",
                                   "all accepted: bonus token", "rejected + discarded drafts"]
    assert list(table["step"]) == [1, 1, 2, 2, 3] and list(table["committed"]) == [3, 3, 4, 4, 1]
    spec = arrays_timeline([2, 3, 0], [3, 3, 3]).to_dict()
    assert "verify step" in spec["encoding"]["x"]["title"]


def test_the_rows_between_two_verify_steps_include_the_steps_without_drafts_among_them():
    from specviz.ui_untraced import rows_between

    # prefill, v1, no-draft, v2, no-draft
    placed = place_steps(untraced_request([[1], [2, 3], [4], [5, 6, 7], [8]], [1, 2], [2, 3], finish_reason="abort"),
                         k=3)
    assert [s.verify_index for s in placed.steps] == [None, 0, None, 1, None]
    assert rows_between(placed, 1, 1) == (placed.steps[0:2], 0)
    assert rows_between(placed, 2, 2) == (placed.steps[3:], 3)
    assert rows_between(placed, 1, 2) == (placed.steps, 0)


def test_a_request_that_verified_no_drafts_has_empty_arrays_which_vllm_leaves_out():
    req = untraced_request([[1], [2], [3]], [], [])
    req = req.model_copy(update={"spec_decode_metrics": req.spec_decode_metrics.model_copy(
        update={"per_step_accepted": None, "per_step_drafted": None})})  # as vLLM sends it: no empty arrays
    assert has_step_arrays(req)
    placed = place_steps(req, k=3)
    assert placed.placement == "exact" and shape(placed) == [(None, 0, 1, True)] * 3


def test_a_model_drafter_has_no_step_without_drafts_after_its_prefill():
    # prefill + a verify step that accepted nothing, or (had vLLM padded the first step) the reverse order;
    # a draft model drafts at every step after the prefill, so only the first reading remains
    req = untraced_request([[1], [2], [3, 4, 5]], [0, 2], [3, 3], finish_reason="abort")
    assert place_steps(req, k=3, method="ngram").placement == "approximate"
    placed = place_steps(req, k=3, method="draft_model")
    assert placed.placement == "exact" and placed.only_prefill_without_drafts
    assert shape(placed) == [(None, 0, 1, True), (0, 3, 1, True), (1, 3, 3, True)]
    assert "draft_model drafts at every step after the prefill" in placed.why
    # a stream that needs a second step without drafts (a preempted request recomputing) still places
    resumed = place_steps(untraced_request([[1], [2, 3, 4], [5], [6]], [2, 0], [3, 3], finish_reason="abort"),
                          k=3, method="eagle3")
    assert resumed.placement == "approximate" and not resumed.only_prefill_without_drafts
