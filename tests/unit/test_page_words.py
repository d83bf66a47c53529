"""The small words of the pages (issue 42): one-line trial reasons, run names that keep their end, the
Tuning page's confidence sentence, and chart subtitles of at most two lines."""

from specviz.charts import sweeps as sweep_charts
from specviz.method_trials import REASON_CHARS, one_line_reason
from specviz.playground import shown_run_name
from specviz.schedule import Measured, Tuned
from specviz.sweep import Sweep
from specviz.sweep_view import confidence_sentence


def test_a_pydantic_error_reads_as_its_message_and_who_refused_it():
    raw = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig | Value error, Model Runner "
           "V1 does not support: dspark speculative decoding [type=value_error, input_value=ArgsKwargs((), {'m': 1}), "
           "input_type=ArgsKwargs]\nFor further information visit https://errors.pydantic.dev")
    assert one_line_reason(raw) == "Model Runner V1 does not support: dspark speculative decoding (VllmConfig refused it)"
    assert one_line_reason("NotImplementedError: Unsupported speculative method: 'mtp'") == \
        "NotImplementedError: Unsupported speculative method: 'mtp'"
    assert one_line_reason("torch._dynamo.exc.BackendCompilerError: boom") == "BackendCompilerError: boom"
    long = one_line_reason("RuntimeError: " + "x" * 400)
    assert len(long) == REASON_CHARS and long.endswith("…")


def test_a_long_run_name_keeps_its_folder_and_its_end():
    assert shown_run_name("showcase/ngram-k3-edit-c1.json.gz") == "showcase/ngram-k3-edit-c1"
    shown = shown_run_name("drafters/smollm2-eagle3-k5-heldout-chat-c8.json.gz")
    assert shown.startswith("drafters/…") and shown.endswith("k5-heldout-chat-c8") and len(shown) <= 34


def _m(k: int, median: float, low: float, high: float, runs: int = 5) -> Measured:
    return Measured(k=k, output_tokens_per_s=median, low=low, high=high, repeats=runs)


def test_the_confidence_sentence_names_the_k_within_each_others_spread():
    # the code sweep's head-to-head, c=1 and 2 (5 runs each): k=5 clear at 1, k=4 and k=5 level at 2
    beside = {0: {1: _m(0, 13.2, 13.0, 13.4), 2: _m(0, 22.7, 22.4, 23.5)},
              4: {1: _m(4, 33.9, 32.8, 34.3), 2: _m(4, 57.7, 56.5, 58.4)},
              5: {1: _m(5, 35.0, 34.7, 35.3), 2: _m(5, 57.6, 56.9, 57.9)}}
    result = Tuned(rows=[], schedule=None, exported=None, confirmed_by="confirmation",
                   schedule_measured_in="head-to-head", static_beside=beside)
    sentence = confidence_sentence(result, Sweep.model_construct(cells=[]))
    assert sentence.startswith("**How sure:** in the head-to-head (5 runs per config")
    assert "k=5 leads clear of the others' spread at concurrency 1" in sentence
    assert "k=4 and k=5 lie within each other's spread at concurrency 2" in sentence


def test_a_chart_subtitle_is_at_most_two_lines_and_keeps_every_part():
    caption = " · ".join(f"part {i} of the provenance" for i in range(4))
    title = sweep_charts._title("A chart", caption, width=45)["text"]
    assert title.count("<sup>") == 2
    for i in range(4):
        assert f"part {i} of the provenance" in title
    assert 'font-size:' in title  # longer lines in smaller type

    # more than two lines hold even at the smallest type: more lines, never one wider than the chart
    widest = 45 * sweep_charts.SUBTITLE_PX // sweep_charts.SUBTITLE_MIN_PX
    caption = " · ".join(f"part {i} of the provenance" for i in range(12))
    title = sweep_charts._title("A chart", caption, width=45)["text"]
    assert title.count("<sup>") > 2
    assert all(f"part {i} of the provenance" in title for i in range(12))
    lines = [ln.split(">", 1)[1].split("<", 1)[0] for ln in title.split("<sup>")[1:]]
    assert max(len(ln) for ln in lines) <= widest, lines
    assert 'font-size:' not in sweep_charts._title("A chart", "short · caption", width=45)["text"]
