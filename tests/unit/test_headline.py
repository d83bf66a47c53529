"""The first screen's headline: the measured result against the paired baseline, from the run files."""

from __future__ import annotations

from run_builders import make_run

from specviz import headline
from specviz.runfile import Request


def _req(rid: str, ids: list[int], seconds: float) -> Request:
    return Request(request_id=rid, prompt="p", output_token_ids=ids, output_text="x", start_time_s=0.0,
                   first_token_time_s=0.1, end_time_s=seconds, finish_reason="length")


def test_the_headline_names_the_workload_the_speedup_and_whether_the_text_is_the_same():
    base = make_run([_req("b", [1, 2, 3, 4], 2.0)], k=None, prompt_set="showcase-edit")
    spec = make_run([_req("s", [1, 2, 3, 4], 1.0)], k=3, prompt_set="showcase-edit")
    h = headline.headline(spec, base)  # 4 tokens in 1 s against 4 in 2 s
    assert h.text.startswith("On code editing, ngram k=3 produced the same text 2.00x faster than the target alone")
    assert "4.0 against 2.0 output tokens/s" in h.detail and "concurrency 1" in h.detail and h.faster
    parted = make_run([_req("s", [1, 2, 9, 4], 4.0)], k=3, prompt_set="odd-set")
    h = headline.headline(parted, base)
    assert h.text.startswith("On prompt set 'odd-set', ngram k=3 produced its text 2.00x slower than")
    assert "0 of 1 requests identical" in h.detail and "not explained" in h.detail and not h.faster
    other = _req("s", [1, 2, 3, 4], 1.0).model_copy(update={"prompt": "another prompt"})
    assert "produced its text" in headline.headline(make_run([other], k=3), base).text  # nothing to compare
