"""Throughput chart builders on hand-built sweeps, with worked numbers."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from specviz.charts import style as chart_style
from specviz.charts import sweeps as sweep_charts
from specviz.metrics import StepFigures
from specviz.references import MINIMAX_M3_EAGLE3_SPEED_BENCH, REFERENCES
from specviz.sweep import BASELINE, Sweep, SweepCell, SweepGrid
from specviz.sweep_table import sweep_table

NGRAM = "ngram lookup 2-4"


def make_cell(drafter: str, k: int | None, concurrency: int, tokens_per_s: float, *,
              acceptance_length: float | None = None, rates: list[float] | None = None,
              tpot_s: float | None = 0.03, prompt_set: str = "code", platform: str = "cpu") -> SweepCell:
    rates = rates or []
    return SweepCell(
        drafter=drafter, method=None if k is None else "ngram", num_speculative_tokens=k,
        speculative_config=None if k is None else {"method": "ngram", "num_speculative_tokens": k},
        concurrency=concurrency, prompt_set=prompt_set, num_requests=8, max_tokens=48, num_output_tokens=384,
        wall_time_s=384 / tokens_per_s, output_tokens_per_s=tokens_per_s, request_output_tokens_per_s_p50=None,
        time_per_output_token_s_p50=tpot_s, time_per_output_token_s_p90=None, time_to_first_token_s_p50=None,
        time_to_first_token_s_p90=None, mean_acceptance_length=acceptance_length, draft_acceptance_rate=None,
        num_drafts=10 if k else 0, num_draft_tokens=10 * (k or 0), num_accepted_tokens=0,
        num_accepted_tokens_per_pos=[0] * len(rates), acceptance_rate_per_pos=rates,
        steps=StepFigures(accepted_histogram=[], num_steps_without_drafts=0, num_engine_steps=1,
                          engine_step_time_s=None),
        counters_match=None, run_file=f"runs/{drafter}-{k}-{concurrency}.json.gz", engine_ready_after_s=None,
        created_at="2026-12-02T00:00:00+00:00", vllm_version="0.32.0", platform=platform, device_name="test cpu",
    )


def make_sweep(cells: list[SweepCell]) -> Sweep:
    grid = SweepGrid(target_model="/models/tiny", drafters=[{"method": "ngram", "prompt_lookup_min": 2,
                                                              "prompt_lookup_max": 4}],
                     num_speculative_tokens=sorted({c.num_speculative_tokens for c in cells
                                                    if c.num_speculative_tokens}) or [1],
                     concurrencies=sorted({c.concurrency for c in cells}), prompts="builtin:code",
                     num_requests=max(8, max(c.concurrency for c in cells)), max_tokens=48)
    return Sweep(grid=grid, cells=cells)


def spec(fig) -> dict:
    """The figure as the browser gets it (what AppTest's proto.spec holds)."""
    return json.loads(fig.to_json())


@pytest.fixture
def table():
    """Baseline 30 / 80 / 100 tok/s at concurrency 1 / 4 / 16; ngram at k=1 and k=3.

    speedups:          c=1    c=4    c=16
        ngram k=1      1.2    1.05   0.9
        ngram k=3      1.5    0.95   0.8
    """
    cells = [
        make_cell(BASELINE, None, 1, 30.0, tpot_s=0.033), make_cell(BASELINE, None, 4, 80.0),
        make_cell(BASELINE, None, 16, 100.0),
        make_cell(NGRAM, 1, 1, 36.0, acceptance_length=1.8, rates=[0.8]),
        make_cell(NGRAM, 1, 4, 84.0, acceptance_length=1.8, rates=[0.8]),
        make_cell(NGRAM, 1, 16, 90.0, acceptance_length=1.8, rates=[0.8]),
        make_cell(NGRAM, 3, 1, 45.0, acceptance_length=2.5, rates=[0.8, 0.5, 0.2], tpot_s=0.02),
        make_cell(NGRAM, 3, 4, 76.0, acceptance_length=2.5, rates=[0.8, 0.5, 0.2]),
        make_cell(NGRAM, 3, 16, 80.0, acceptance_length=2.5, rates=[0.8, 0.5, 0.2]),
    ]
    return sweep_table(make_sweep(cells))


def _trace(fig_spec: dict, name: str) -> dict:
    return next(t for t in fig_spec["data"] if t.get("name") == name)


def _config(fig_spec: dict, drafter: str, k=None, role: str = "measured") -> dict:
    """The trace of one drafter (and k) by its tags; legend names are short ("ngram k=3")."""
    return next(t for t in fig_spec["data"] if t.get("meta", {}).get("role") == role
                and t["meta"].get("drafter") == drafter and (k is None or t["meta"].get("k") == k))


def test_speedup_is_over_the_baseline_at_the_same_concurrency(table):
    row = table[(table.drafter == NGRAM) & (table.num_speculative_tokens == 3) & (table.concurrency == 1)]
    assert float(row.speedup.iloc[0]) == pytest.approx(1.5)  # 45 / 30
    s = spec(sweep_charts.speedup_vs_concurrency(table, "caption"))
    k3 = _trace(s, "ngram k=3")
    assert k3["x"] == [1, 4, 16]
    assert k3["y"] == pytest.approx([1.5, 0.95, 0.8])
    assert _trace(s, "ngram k=1")["y"] == pytest.approx([1.2, 1.05, 0.9])
    # the dashed line at 1
    assert any(sh.get("y0") == 1 and sh.get("y1") == 1 and sh["line"]["dash"] == "dash" for sh in s["layout"]["shapes"])


def test_breakeven_with_the_best_k_and_with_one_k(table):
    # best k: 1.5 (k=3) at c=1, 1.05 (k=1) at c=4, 0.9 at c=16 -> stops paying at 16
    assert sweep_charts.breakeven_concurrency(table, NGRAM) == 16
    assert sweep_charts.breakeven_concurrency(table, NGRAM, k=1) == 16
    assert sweep_charts.breakeven_concurrency(table, NGRAM, k=3) == 4  # 0.95 at c=4 and 0.8 at c=16
    best = sweep_charts.best_k_rows(table, NGRAM)
    assert list(best.concurrency) == [1, 4, 16]
    assert [int(k) for k in best.num_speculative_tokens] == [3, 1, 1]


@pytest.mark.parametrize(("speedups", "expected"), [
    ([1.5, 1.2, 0.9, 0.8], 16),   # crosses between 4 and 16 and stays below
    ([1.5, 0.9, 1.1, 1.05], None),  # a dip at 4, but it pays again at the top: no break-even yet
    ([0.9, 0.8, 0.7, 0.6], 1),    # never pays
    ([1.5, 1.4, 1.3, 1.0], None),  # exactly 1 is not below 1
    ([1.5, 1.4, 1.3, 0.99], 64),
])
def test_breakeven_on_constructed_speedups(speedups, expected):
    concurrencies = [1, 4, 16, 64]
    cells = [make_cell(BASELINE, None, c, 100.0) for c in concurrencies]
    cells += [make_cell(NGRAM, 3, c, 100.0 * s) for c, s in zip(concurrencies, speedups)]
    table = sweep_table(make_sweep(cells))
    assert sweep_charts.breakeven_concurrency(table, NGRAM) == expected
    assert sweep_charts.breakeven_concurrency(table, NGRAM, k=3) == expected
    fig = spec(sweep_charts.speedup_vs_concurrency(table, "c"))
    # marked by an ✕ named in the legend, not by text printed in the plot (labels would collide)
    assert not [a for a in fig["layout"].get("annotations", []) if "no k pays" in a.get("text", "")]
    marked = [t for t in fig["data"] if t["meta"]["role"] == "breakeven"]
    if expected is None:
        assert not marked
    else:
        assert len(marked) == 1 and marked[0]["name"] == f"ngram: no k pays from concurrency {expected}"
        assert marked[0]["x"] == [expected]
        assert marked[0]["y"] == pytest.approx([speedups[concurrencies.index(expected)]])


def test_breakeven_ignores_cells_without_a_baseline():
    cells = [make_cell(BASELINE, None, 1, 30.0), make_cell(NGRAM, 3, 1, 45.0), make_cell(NGRAM, 3, 4, 20.0)]
    table = sweep_table(make_sweep(cells))
    assert table.speedup.isna().sum() == 1  # no baseline at concurrency 4
    assert sweep_charts.breakeven_concurrency(table, NGRAM) is None
    only_baseline = sweep_table(make_sweep([make_cell(BASELINE, None, 1, 30.0)]))
    assert sweep_charts.breakeven_concurrency(only_baseline, NGRAM) is None


def test_best_k_speedup_chart_labels_the_k(table):
    s = spec(sweep_charts.speedup_vs_concurrency(table, "c", best_k=True))
    best = _trace(s, "ngram (best k)")
    assert best["y"] == pytest.approx([1.5, 1.05, 0.9])
    assert best["text"] == ["k=3", "k=1", "k=1"]


def test_throughput_vs_k_at_one_concurrency_with_the_baseline_level(table):
    s = spec(sweep_charts.throughput_vs_k(table, 1, "caption"))
    ngram = _trace(s, "ngram")
    assert ngram["x"] == [1, 3] and ngram["y"] == pytest.approx([36.0, 45.0])
    base = next(t for t in s["data"] if t["meta"]["role"] == "baseline")
    assert base["y"] == [30.0, 30.0]
    assert base["line"]["dash"] == "dash"
    assert "caption" in s["layout"]["title"]["text"]


def test_acceptance_length_vs_k_with_the_ceiling(table):
    s = spec(sweep_charts.acceptance_length_vs_k(table, 4, "c"))
    assert _config(s, NGRAM)["y"] == pytest.approx([1.8, 2.5])
    ceiling = next(t for t in s["data"] if t["meta"]["role"] == "bound")
    assert ceiling["x"] == [1, 3] and ceiling["y"] == [2.0, 4.0]


def test_reference_trace_is_separate_labelled_and_cited():
    measured = [0.8, 0.5, 0.2]
    plain = spec(sweep_charts.acceptance_per_position_vs_reference(measured, "ngram k=3", "c"))
    assert [t["meta"]["role"] for t in plain["data"]] == ["measured"]
    assert plain["data"][0]["y"] == measured
    fig = spec(sweep_charts.acceptance_per_position_vs_reference(measured, "ngram k=3", "c", MINIMAX_M3_EAGLE3_SPEED_BENCH))
    measured_trace, ref = fig["data"]
    assert measured_trace["y"] == measured  # the measured bars are untouched
    assert ref["meta"]["role"] == "reference"
    assert ref["y"] == [0.76, 0.56, 0.43]
    assert ref["type"] == "scatter" and ref["line"]["dash"] == "dot"
    assert "published reference, not measured here" in ref["name"]
    assert ref["meta"]["url"] == "https://vllm.ai/blog/2026-07-13-eagle-3-amd-instinct"
    source_notes = [a["text"] for a in fig["layout"]["annotations"]]
    assert any("EAGLE3 Speculative Decoding on AMD Instinct GPUs" in t and "2026-07-13" in t for t in source_notes)


def test_references_carry_their_sources():
    for ref in REFERENCES.values():
        assert ref.source.title and ref.hardware and ref.benchmark
        assert ref.acceptance_rate_per_pos == sorted(ref.acceptance_rate_per_pos, reverse=True)
    assert MINIMAX_M3_EAGLE3_SPEED_BENCH.mean_acceptance_length == 2.80
    assert REFERENCES["llama3.1-8b-eagle3-mt-bench"].mean_acceptance_length == 2.811


def test_latency_vs_throughput_has_one_point_per_cell(table):
    s = spec(sweep_charts.latency_vs_throughput(table, "c"))
    assert sum(len(t["x"]) for t in s["data"]) == len(table)
    base = _config(s, BASELINE)
    assert base["text"] == ["c=1", "c=4", "c=16"] and "text" in base["mode"]
    assert base["y"][0] == pytest.approx(33.0)  # 0.033 s in ms
    k3 = _config(s, NGRAM, 3)
    assert k3["text"] == ["c=1", "c=4", "c=16"] and "text" not in k3["mode"]  # in the hover only: no pile-up
    assert (k3["x"][0], k3["y"][0]) == (pytest.approx(45.0), pytest.approx(20.0))
    assert [t["name"] for t in s["data"]] == ["baseline (no drafting)", "ngram k=1", "ngram k=3"]


def test_acceptance_by_prompt_set_groups_bars_per_prompt_set(table):
    chat = sweep_table(make_sweep([
        make_cell(BASELINE, None, 1, 30.0, prompt_set="chat"),
        make_cell(NGRAM, 3, 1, 33.0, acceptance_length=1.4, prompt_set="chat"),
        make_cell(NGRAM, 3, 4, 33.0, acceptance_length=1.6, prompt_set="chat"),
    ]))
    s = spec(sweep_charts.acceptance_by_prompt_set(pd.concat([table, chat], ignore_index=True), "c"))
    assert [t["name"] for t in s["data"]] == ["code", "chat"]
    assert _trace(s, "code")["x"] == ["ngram k=1", "ngram k=3"]
    assert _trace(s, "code")["customdata"] == [f"{NGRAM} k=1", f"{NGRAM} k=3"]  # the full config, for the hover
    assert _trace(s, "chat")["x"] == ["ngram k=3"]
    assert _trace(s, "chat")["y"] == pytest.approx([1.5])  # mean over concurrencies


def test_caption_says_cpu_figures_and_the_provenance(table):
    caption = sweep_charts.sweep_caption(table, concurrency=4, model="/models/tiny/")
    assert caption.startswith("CPU figures")
    for part in ("concurrency 4", "prompt set 'code'", "max 48 output tokens", "8 requests per cell",
                 "cpu (test cpu)", "vLLM 0.32.0", "tiny"):
        assert part in caption, part
    assert "concurrency 1, 4, 16" in sweep_charts.sweep_caption(table)
    gpu = sweep_table(make_sweep([make_cell(BASELINE, None, 1, 30.0, platform="rocm")]))
    assert not sweep_charts.sweep_caption(gpu).startswith("CPU")
    title = spec(sweep_charts.latency_vs_throughput(table, caption))["layout"]["title"]["text"]
    assert "cpu (test cpu)" in title and "vLLM 0.32.0" in title


DRAFT = "draft_model smollm2-135m-draft use_heterogeneous_vocab=True"
EAGLE3 = "eagle3 smollm2-135m-eagle3"


@pytest.fixture
def three_drafters():
    """Three drafters at k=1 and k=3, concurrency 1 and 8, over a baseline of 30 / 100 tok/s."""
    cells = [make_cell(BASELINE, None, 1, 30.0), make_cell(BASELINE, None, 8, 100.0)]
    for i, d in enumerate([NGRAM, DRAFT, EAGLE3]):
        for k in (1, 3):
            cells += [make_cell(d, k, 1, 33.0 + 3 * i + k, acceptance_length=1.5 + 0.1 * k),
                      make_cell(d, k, 8, 95.0 - 10 * i - k, acceptance_length=1.5 + 0.1 * k)]
    return sweep_table(make_sweep(cells))


def test_short_names_are_the_method_and_unique():
    assert chart_style.short_names([NGRAM, DRAFT, EAGLE3]) == {NGRAM: "ngram", DRAFT: "draft", EAGLE3: "eagle3"}
    two = chart_style.short_names(["ngram lookup 2-4", "ngram lookup 1-3", EAGLE3])
    assert two == {"ngram lookup 2-4": "ngram 2-4", "ngram lookup 1-3": "ngram 1-3", EAGLE3: "eagle3"}


def _lightness(colour: str) -> float:
    """'rgb(12, 34, 56)' or '#0c2238' -> the mean of its channels, 0..255."""
    if colour.startswith("#"):
        return sum(int(colour[i:i + 2], 16) for i in (1, 3, 5)) / 3
    return sum(float(v) for v in colour[colour.index("(") + 1:-1].split(",")[:3]) / 3


def test_colour_by_drafter_dash_and_marker_by_k_full_config_in_the_hover(three_drafters):
    for fig in (sweep_charts.speedup_vs_concurrency(three_drafters, "c"), sweep_charts.latency_vs_throughput(three_drafters, "c")):
        s = spec(fig)
        measured = [t for t in s["data"] if t["meta"]["role"] == "measured" and t["meta"]["drafter"] != BASELINE]
        assert {t["name"] for t in measured} == {f"{n} k={k}" for n in ("ngram", "draft", "eagle3") for k in (1, 3)}
        colours = {t["meta"]["drafter"]: set() for t in measured}
        for t in measured:
            colours[t["meta"]["drafter"]].add(t["line"]["color"])
            assert t["line"]["color"] == t["marker"]["color"]
            k = t["meta"]["k"]
            assert t["line"]["dash"] == {1: "solid", 3: "dash"}[k]
            assert t["marker"]["symbol"] == {1: "circle", 3: "square"}[k]
            assert sweep_charts.config_label(t["meta"]["drafter"], k) in t["hovertemplate"]  # the full config
        # k light to dark within each drafter's hue family (k=1 lighter than k=3), and no colour shared
        by_k = {(t["meta"]["drafter"], t["meta"]["k"]): t["line"]["color"] for t in measured}
        for d in colours:
            assert _lightness(by_k[(d, 1)]) > _lightness(by_k[(d, 3)]), d
        assert len(set(by_k.values())) == 6


def test_breakeven_and_baseline_are_marked_and_type_is_large(three_drafters):
    s = spec(sweep_charts.speedup_vs_concurrency(three_drafters, "c"))
    marks = [t for t in s["data"] if t["meta"]["role"] == "breakeven"]
    assert sorted(t["name"] for t in marks) == ["draft: no k pays from concurrency 8",
                                                "eagle3: no k pays from concurrency 8",
                                                "ngram: no k pays from concurrency 8"]
    assert all(t["marker"]["color"] == _config(s, t["meta"]["drafter"], 3)["line"]["color"] for t in marks)
    assert not s["layout"].get("annotations")  # no text printed in the plot: the legend names everything
    assert any(t["meta"]["role"] == "baseline" and t["name"].startswith("baseline = 1x") for t in s["data"])
    assert s["layout"]["font"]["size"] >= 15 and s["layout"]["legend"]["font"]["size"] >= 14
    assert s["layout"]["xaxis"]["tickfont"]["size"] >= 14 and s["layout"]["yaxis"]["title"]["font"]["size"] >= 16
    # the legend sits a fixed distance below the plot area, clear of the axis title
    lay = s["layout"]
    plot_px = lay["height"] - lay["margin"]["t"] - lay["margin"]["b"]
    assert -lay["legend"]["y"] * plot_px == pytest.approx(chart_style.LEGEND_GAP_PX)
    rows = chart_style.legend_rows(sweep_charts.speedup_vs_concurrency(three_drafters, "c"), 1100)
    assert lay["margin"]["b"] >= chart_style.LEGEND_GAP_PX + rows * chart_style.LEGEND_ROW_PX  # room for it all


def test_point_labels_never_print_over_each_other():
    import plotly.graph_objects as go

    fig = go.Figure([
        go.Scatter(x=[1, 3], y=[2.00, 2.30], mode="markers+text", text=["+2%", "+5%"], name="a"),
        go.Scatter(x=[1, 3], y=[2.05, 1.00], mode="markers+text", text=["-1%", "+9%"], name="b"),  # 2.05 near 2.00
        go.Scatter(x=[1, 3], y=[5.00, 6.00], mode="lines", name="bound"),
    ])
    s = spec(chart_style.declutter_labels(fig))
    a, b = s["data"][0], s["data"][1]
    assert "texttemplate" not in a  # nothing of a's is hidden
    assert b["texttemplate"] == ["", "%{text}"]  # b's label at x=1 would cover a's; its hover keeps it
    assert b["text"] == ["-1%", "+9%"]


def test_tuning_gap_labels_part_where_curves_meet_and_one_acceptance_curve_is_drawn_once():
    from specviz.charts import tuning as tuning_charts
    from specviz.prediction import predict
    from specviz.sweep_files import SWEEPS_DIR, load_sweep

    # bfloat16 chat, EAGLE-3 at k=3: c=4 at 84.5 and c=8 at 102.3 on a 0-230 axis, closer than 10% of it
    sides = tuning_charts._label_sides([(1, 3, 35.0, -0.1), (2, 3, 56.0, -0.1), (4, 3, 84.5, -0.1),
                                        (8, 3, 102.3, -0.1), (16, 3, 123.0, -0.1)], 230)
    assert sides == {(1, 3): "right", (2, 3): "left", (4, 3): "right", (8, 3): "left", (16, 3): "right"}
    assert tuning_charts._label_sides([(1, 0, 13.0, -0.1), (2, 0, 60.0, -0.1)], 120) == {(1, 0): "right",
                                                                                         (2, 0): "right"}
    # bfloat16 chat ngram, k=1: c=1's label above its marker at 25.8, c=2's below its marker at 49.2 (on 0-230):
    # 10% of the axis apart, the labels meet in between
    assert tuning_charts._label_sides([(1, 1, 25.8, -0.048), (2, 1, 49.2, 0.001)], 230) == {(1, 1): "right",
                                                                                            (2, 1): "left"}
    assert tuning_charts._label_sides([(1, 1, 25.8, 0.048), (2, 1, 49.2, -0.001)], 230) == {(1, 1): "right",
                                                                                            (2, 1): "right"}
    assert tuning_charts._gap_position(0.04, "left") == "bottom left"  # predicted above: label below
    assert tuning_charts._gap_position(-0.07) == "top right"

    # float32 chat: one acceptance curve at every concurrency, drawn once; bfloat16 ngram: five of them
    f32 = predict(load_sweep(SWEEPS_DIR / "smollm2-chat-f32" / "sweep.json"), "ngram lookup 2-4")
    bf16 = predict(load_sweep(SWEEPS_DIR / "smollm2-chat" / "sweep.json"), "ngram lookup 2-4")
    assert tuning_charts._acceptance_groups(f32) == [[1, 2, 4, 8, 16]]
    assert tuning_charts._acceptance_groups(bf16) == [[1], [2], [4], [8], [16]]
    fig = tuning_charts.tuning_acceptance(f32, "caption")
    assert [t.name for t in fig.data if (t.meta or {}).get("role") == "predicted"] == ["concurrency 1, 2, 4, 8, 16"]
    assert len([t for t in tuning_charts.tuning_acceptance(bf16, "caption").data
                if (t.meta or {}).get("role") == "predicted"]) == 5


def test_a_long_chart_title_breaks_between_words_instead_of_running_off_the_page():
    """'Acceptance per draft position: ngram lookup 2-4 k by batch 1:5 2-16:4 at concurrency 1' was cut at
    'concurrenc' on a 1280 px Throughput page."""
    from specviz.charts.sweeps import TITLE_WIDTH, acceptance_per_position_vs_reference

    fig = acceptance_per_position_vs_reference([0.9, 0.8], "ngram lookup 2-4 k by batch 1:5 2-16:4 at concurrency 1",
                                               "CPU figures · concurrency 1")
    title = fig.layout.title.text.split("<br><sup>")[0]
    lines = title.split("<br>")
    assert len(lines) == 2 and all(len(line) <= TITLE_WIDTH for line in lines), lines
    assert " ".join(lines) == "Acceptance per draft position: ngram lookup 2-4 k by batch 1:5 2-16:4 at concurrency 1"
