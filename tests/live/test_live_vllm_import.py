"""vLLM's own `bench sweep serve` on this machine (the baseline and a draft model, two concurrencies), imported as a
sweep that opens on Throughput and Tuning (AppTest) and that the tuner predicts from. One drafter: each serve
param is an engine start (about a minute of the suite on two cores), and the import reads every method's serve
command alike (the unit tests cover ngram's)."""

from __future__ import annotations

import pytest
from page_helpers import chart_figure, open_page

from specviz import sweep_files
from specviz.prediction import predict
from specviz.sweep_files import save_sweep
from specviz.vllm_bench import run_vllm_sweep
from specviz.vllm_import import import_into

pytestmark = pytest.mark.live


def test_vllms_bench_sweep_serve_folder_imports_and_opens_on_throughput_and_tuning(tmp_path, monkeypatch):
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_pair

    target, draft = build_tiny_pair(tmp_path / "models", tokenizer_from=ensure_demo_model())
    drafted = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": 2}
    folder = run_vllm_sweep(str(target), tmp_path / "results", "live", num_prompts=4, input_len=16, output_len=24,
                            serve_params=[{}, {"speculative_config": drafted}],
                            bench_params=[{"max_concurrency": 1}, {"max_concurrency": 2}])
    assert (folder / "summary.csv").is_file() and len(list(folder.glob("*/run=0.json"))) == 4

    out = tmp_path / "sweeps" / "live-vllm"
    sweep, report = import_into([folder], out, confirm_prompts="builtin:repetitive")
    save_sweep(sweep, out / "sweep.json")
    assert report.skipped == [] and len(sweep.cells) == 4 and sweep.complete
    for cell in sweep.cells:
        assert cell.vllm_version == "0.32.0" and cell.platform == "cpu"
        if cell.spec is not None:  # acceptance per position from vLLM's counters, as bench serve read them
            assert len(cell.acceptance_rate_per_pos) == 2 and all(r.num_drafts > 0 for r in cell.runs)
            # random weights on vLLM's random dataset: the tiny draft may have nothing accepted (1.0 in one suite run)
            assert cell.method == "draft_model" and cell.mean_acceptance_length >= 1
    draft_label = next(c.drafter for c in sweep.cells if c.method == "draft_model")
    pred = predict(sweep, draft_label)
    assert pred.step_cost is not None, pred.refusals

    monkeypatch.setattr(sweep_files, "list_sweep_files", lambda: [out / "sweep.json"])
    at = open_page("app_pages/throughput.py", timeout=120)
    frontier = chart_figure(at, "tp_chart_frontier_a")
    assert any(t["meta"]["role"] == "pareto" for t in frontier["data"])
    assert chart_figure(at, "tp_chart_positions_a")["data"]  # acceptance per draft position
    at = open_page("app_pages/tuning.py", timeout=120)
    assert any(c.value.startswith("vllm serve") for c in at.code)  # the per-batch-size export
    assert any("Imported from vLLM's own benchmark" in i.value for i in at.info)
