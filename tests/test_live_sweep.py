"""A short real sweep: tiny model, baseline + ngram at two k, two concurrencies; interrupted and resumed."""

from __future__ import annotations

import pytest

from specviz.sweep import TABLE_COLUMNS, SweepGrid, load_sweep, run_sweep, sweep_table
from specviz.trace import load_run

pytestmark = pytest.mark.live


def test_sweep_measures_every_cell_resumes_after_an_interruption_and_compares_with_its_baseline(tmp_path):
    from specviz.demo_model import ensure_demo_model
    from specviz.tiny_models import build_tiny_llama

    target = build_tiny_llama(tmp_path / "target", num_hidden_layers=2, tokenizer_from=ensure_demo_model())
    grid = SweepGrid(target_model=str(target), drafters=[{"method": "ngram", "prompt_lookup_min": 1,
                                                          "prompt_lookup_max": 3}],
                     num_speculative_tokens=[1, 3], concurrencies=[1, 2], prompts="builtin:repetitive",
                     num_requests=4, max_tokens=24, dtype="float32")
    out = tmp_path / "sweep"
    engines: list[str] = []

    class Interrupted(Exception):
        pass

    def stop_after_three(cell, sweep) -> None:
        if len(sweep.cells) == 3:
            raise Interrupted

    with pytest.raises(Interrupted):
        run_sweep(grid, out, on_cell=stop_after_three, on_engine=lambda label, spec: engines.append(label))
    assert len(load_sweep(out / "sweep.json").cells) == 3  # the finished cells survived

    sweep = run_sweep(grid, out, on_engine=lambda label, spec: engines.append(label))
    # baseline, ngram k=1 (interrupted after its first cell), then ngram k=1 again (one cell left) and k=3
    assert engines == ["baseline", "ngram lookup 1-3", "ngram lookup 1-3", "ngram lookup 1-3"]
    assert sweep.complete and len(sweep.cells) == 6

    table = sweep_table(sweep)
    assert list(table.columns) == TABLE_COLUMNS and len(table) == 6
    spec_only = ["method", "num_speculative_tokens", "mean_acceptance_length", "draft_acceptance_rate",
                 "counters_match"]  # the baseline has no drafts, so these are empty on its rows
    assert table.drop(columns=spec_only).notna().all().all()
    assert table[table.drafter != "baseline"][spec_only].notna().all().all()
    for row in table.itertuples():
        base = table[(table.drafter == "baseline") & (table.concurrency == row.concurrency)].iloc[0]
        assert row.speedup == pytest.approx(row.output_tokens_per_s / base.output_tokens_per_s)
        assert load_run(out / row.run_file).meta.concurrency == row.concurrency
        if row.drafter != "baseline":
            assert row.mean_acceptance_length > 1 and row.counters_match
