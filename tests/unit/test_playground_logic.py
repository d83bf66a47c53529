"""What the Playground page works out (specviz.playground, race.latest_baseline), without Streamlit or vLLM."""

from __future__ import annotations

import pytest
from run_builders import make_run, make_step

from specviz import playground
from specviz.config import ConfigError
from specviz.race import latest_baseline
from specviz.runfile import Request
from specviz.serving.attached import View


def _request(prompt: str = "The weather today is") -> Request:
    return Request(request_id="r0", prompt=prompt, output_token_ids=[5], output_text="x", start_time_s=0.0,
                   finish_reason="length", steps=[make_step(1, [], [5])])


def _run(run_id: str, k: int | None, created_at: str = "2026-12-02T00:00:00+00:00", **meta):
    return make_run([_request(meta.pop("prompt", "The weather today is"))], k=k, run_id=run_id,
                    created_at=created_at, **meta)


def test_spec_from_choices_builds_the_config_the_controls_describe():
    assert playground.spec_from_choices("none", 3, 2, 4, "") is None
    ngram = playground.spec_from_choices("ngram", 3, 2, 4, "ignored for ngram")
    assert (ngram.method, ngram.num_speculative_tokens) == ("ngram", 3)
    assert ngram.model is None and ngram.params == {"prompt_lookup_min": 2, "prompt_lookup_max": 4}
    with pytest.raises(ConfigError):
        playground.spec_from_choices("ngram", 3, 5, 2, "")  # a lookup window that ends before it starts


def test_engine_dtype_is_none_for_specviz_default():
    assert playground.engine_dtype(playground.DEFAULT_DTYPE) is None
    assert playground.engine_dtype("bfloat16") == "bfloat16"
    assert playground.DTYPES[0] == playground.DEFAULT_DTYPE


def test_with_run_keeps_each_run_once():
    a, b = _run("a", None), _run("b", 3)
    runs = playground.with_run([], a)
    assert [r.meta.run_id for r in playground.with_run(runs, b)] == ["a", "b"]
    assert playground.with_run(runs, a) is runs  # drawn again on a rerun: not added twice


def test_last_run_from_only_a_run_of_that_server():
    here = _run("a", 3, server_url="http://h:8000")
    assert playground.last_run_from("http://h:8000", [_run("x", 3), here]) is here
    assert playground.last_run_from("http://other:8000", [here]) is None
    assert playground.last_run_from("http://h:8000", []) is None


def test_views_table_has_one_row_per_view():
    table = playground.views_table([View("steps", True, "tracer"), View("per-request", None, "after a request")])
    assert list(table.columns) == ["view", "available", "why"]
    assert table["available"].tolist() == ["yes", "no"]


def test_latest_baseline_is_the_one_generated_closest_before_of_the_same_prompt():
    early = _run("base1", None, "2026-12-02T00:00:00+00:00")
    late = _run("base2", None, "2026-12-02T00:05:00+00:00")
    other_prompt = _run("base3", None, "2026-12-02T00:06:00+00:00", prompt="Another prompt")
    longer = _run("base4", None, "2026-12-02T00:06:30+00:00", max_tokens=64)  # not a fair comparison
    spec = _run("spec", 3, "2026-12-02T00:07:00+00:00")
    assert latest_baseline(spec, [early, late, other_prompt, longer, spec]) is late
    assert latest_baseline(spec, [other_prompt, longer]) is None
    assert latest_baseline(spec, []) is None
