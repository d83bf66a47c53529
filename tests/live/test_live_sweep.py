"""Short real sweeps on a tiny model: traced, with a schedule row, interrupted and resumed, confirmed; untraced with
repeats, fed to the tuner; `specviz tune` from one run."""

from __future__ import annotations

import pytest

from specviz.runfile import load_run
from specviz.sweep import SweepGrid
from specviz.sweep_files import load_sweep
from specviz.sweep_runner import run_sweep
from specviz.sweep_table import TABLE_COLUMNS, outputs_vs_baseline, sweep_table

pytestmark = pytest.mark.live


def test_an_untraced_sweep_with_repeats_takes_acceptance_from_vllms_counters_and_feeds_the_tuner(tmp_path):
    """Served as vLLM serves by default (no tracer), two interleaved rounds; the tuner predicts from counters."""
    from specviz.demo_model import ensure_demo_model
    from specviz.prediction import predict
    from specviz.testing.tiny_models import build_tiny_llama

    target = build_tiny_llama(tmp_path / "target", num_hidden_layers=2, tokenizer_from=ensure_demo_model())
    grid = SweepGrid(target_model=str(target), drafters=[{"method": "ngram", "prompt_lookup_min": 1,
                                                          "prompt_lookup_max": 3}],
                     num_speculative_tokens=[2], concurrencies=[1, 2], prompts="builtin:repetitive",
                     num_requests=6, max_tokens=32, dtype="float32", repeats=2, traced=False)
    engines: list[str] = []
    sweep = run_sweep(grid, tmp_path / "sweep", on_engine=lambda label, spec: engines.append(label))
    assert engines == ["baseline", "ngram lookup 1-3", "ngram lookup 1-3", "baseline"]  # round 1 reversed
    assert sweep.complete and len(sweep.cells) == 4
    for cell in sweep.cells:
        assert cell.repeats == 2 and not cell.traced and cell.async_scheduling is False  # the CPU forces it off
        assert [r.repeat for r in cell.runs] == [0, 1]
        assert cell.output_tokens_per_s_min <= cell.output_tokens_per_s <= cell.output_tokens_per_s_max
        for run in cell.runs:
            assert run.steps.num_engine_steps == 0 and run.counters_match is None  # no tracer
            assert load_run(tmp_path / "sweep" / run.run_file).meta.traced is False
        if cell.drafter == "baseline":
            continue
        # acceptance from vLLM's counters, per position, and per request from its per-request figures
        for run in cell.runs:
            assert run.vllm_counters is not None and run.num_drafts == run.vllm_counters.num_drafts > 0
            assert sum(run.steps.accepted_histogram) == run.num_drafts
            assert run.steps.accepted_histogram[1:] != [0, 0]
            assert run.request_acceptance is not None and len(run.request_acceptance) == grid.num_requests
            assert sum(d for d, _ in run.request_acceptance) == run.num_drafts
        low, high = cell.mean_acceptance_length_90
        assert 1 <= low <= cell.mean_acceptance_length <= high <= 3

    table = sweep_table(sweep)
    assert list(table.columns) == TABLE_COLUMNS
    spec_rows = table[table.drafter != "baseline"]
    assert (spec_rows.acceptance_from == "vLLM counters").all() and spec_rows.speedup_min.notna().all()

    pred = predict(sweep, "ngram lookup 1-3")
    assert not pred.refusals, pred.refusals
    assert pred.step_cost is not None and pred.step_cost.num_cells == 4
    assert sorted({(r.concurrency, r.num_speculative_tokens) for r in pred.rows}) == [
        (c, k) for c in (1, 2) for k in (0, 1, 2)]
    assert all(r.output_tokens_per_s > 0 for r in pred.rows)
    assert [r.concurrency for r in pred.recommend()] == [1, 2]


def test_a_sweep_resumes_after_an_interruption_drafts_by_batch_size_on_its_schedule_row_and_tune_confirms(tmp_path):
    """A sweep with a schedule row (k=2 alone, k=1 from two requests up), interrupted after three cells and
    resumed, compared with its baseline; then `specviz tune`'s confirmation. One test, so that the sweep's
    engines serve every check (each start of vLLM costs ~35 s here)."""
    from specviz.config import SpecConfig
    from specviz.demo_model import ensure_demo_model
    from specviz.prediction import predict
    from specviz.runfile import draft_batches, most_drafts_from
    from specviz.schedule import confirmation_rows, needs_idle_row, schedule_label
    from specviz.sweep_files import confirmation_folder
    from specviz.sweep_runner import run_confirmation
    from specviz.testing.tiny_models import build_tiny_llama

    target = build_tiny_llama(tmp_path / "target", num_hidden_layers=2, tokenizer_from=ensure_demo_model())
    ngram = {"method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 3}
    schedule = ngram | {"num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[1, 1, 2], [2, 64, 1]]}
    # 192 tokens: long enough that requests at concurrency 2 overlap more often (see below)
    grid = SweepGrid(target_model=str(target), drafters=[ngram], schedules=[schedule], num_speculative_tokens=[1, 2],
                     concurrencies=[1, 2], prompts="builtin:repetitive", num_requests=4, max_tokens=192,
                     dtype="float32", logprobs=2)
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
    # baseline, ngram k=1 (interrupted after its first cell), then ngram k=1 again (one cell left), k=2, the schedule
    assert engines == ["baseline", "ngram lookup 1-3", "ngram lookup 1-3", "ngram lookup 1-3",
                       "ngram lookup 1-3 k by batch 1:2 2-64:1"]
    assert sweep.complete and len(sweep.cells) == 8
    scheduled = {c.concurrency: c for c in sweep.cells if c.scheduled}
    assert sorted(scheduled) == [1, 2] and scheduled[1].drafter == "ngram lookup 1-3 k by batch 1:2 2-64:1"
    assert scheduled[1].spec == SpecConfig.from_dict(schedule)
    table = sweep_table(sweep, outputs=outputs_vs_baseline(sweep, out))
    assert list(table.columns) == TABLE_COLUMNS and len(table) == 8
    rows = table[table.schedule.notna()]
    assert list(rows.schedule) == ["1: k=2 · 2-64: k=1"] * 2
    spec_only = ["method", "num_speculative_tokens", "mean_acceptance_length", "mean_acceptance_length_low",
                 "mean_acceptance_length_high", "draft_acceptance_rate", "acceptance_from",
                 "counters_match", "outputs_vs_baseline"]  # the baseline has no drafts, so these are empty on its rows
    assert table.drop(columns=[*spec_only, "schedule"]).notna().all().all()
    assert table[table.drafter != "baseline"][spec_only].notna().all().all()
    for row in table.itertuples():
        base = table[(table.drafter == "baseline") & (table.concurrency == row.concurrency)].iloc[0]
        assert row.speedup == pytest.approx(row.output_tokens_per_s / base.output_tokens_per_s)
        assert load_run(out / row.run_files).meta.concurrency == row.concurrency  # one run per cell
        if row.drafter != "baseline":
            assert row.mean_acceptance_length > 1 and row.counters_match
            assert row.outputs_vs_baseline == "4 of 4 requests identical"  # float32: greedy output is the target's

    # vLLM looks k up from the batch it schedules, and the drafts it proposes there are verified one step later
    # (runfile.draft_batches); load_run refuses a step that drafted more than that batch's k
    spec = SpecConfig.from_dict(schedule)
    for c, cell in scheduled.items():
        run = load_run(out / cell.runs[0].run_file)
        proposed_at = draft_batches(run.requests)
        drafted = [(batch, len(s.draft_token_ids)) for r in run.requests
                   for s, batch in zip(r.steps, proposed_at[r.request_id]) if batch is not None]
        assert all(d <= most_drafts_from(spec, batch) for batch, d in drafted)
        if c == 1:
            assert any(d == 2 for _, d in drafted)  # alone, a request drafts two
        # At c=2 the client often starts the next request only as the tiny model finishes the last one (it
        # writes 192 tokens in under a second), so two requests share a batch in some runs only; when they do,
        # each drafts one.
        assert all(d <= 1 for batch, d in drafted if batch == 2)

    confirm, head_to_head, picked = run_confirmation(out, "ngram lookup 1-3", repeats=1)
    assert (confirmation_folder(out, "ngram lookup 1-3") / "sweep.json").exists()
    static = [c for c in confirm.cells if not c.scheduled]
    assert {c.concurrency for c in static} == {1, 2} and any(c.drafter == "baseline" for c in static)
    assert all(c.num_speculative_tokens <= 2 for c in static)
    pred = predict(sweep, "ngram lookup 1-3")
    idle = [c for c in confirm.cells if c.scheduled and c.spec.drafts_nothing]
    without_idle = confirm.model_copy(update={"cells": [c for c in confirm.cells if c not in idle]})
    # where the baseline beat every k, ngram loaded and idle was measured too, and k = 0 is picked only on it
    assert bool(idle) == needs_idle_row(confirmation_rows(pred, without_idle))
    rows = confirmation_rows(pred, confirm)
    assert all(r.idle is not None for r in rows if r.confirmed_k == 0)
    if picked is not None and picked.schedule:
        # the picks' schedule measured side by side with no drafting and each picked k, in the same rounds
        assert {(c.drafter, c.concurrency) for c in head_to_head.cells if c.scheduled} == {
            (schedule_label(picked), 1), (schedule_label(picked), 2)}
        assert {c.num_speculative_tokens for c in head_to_head.cells if not c.scheduled} == (
            {0} | {r.confirmed_k for r in rows})
    else:
        assert head_to_head is None


def test_tune_from_one_traced_run_measures_its_sweep_then_confirms_and_exports(tmp_path, capsys):
    """`specviz tune RUN --out DIR`: from one ngram run at k=3, the sweep the tuner predicts from (no drafting and
    k=3 at each concurrency, the run's prompts), then the confirmation and the export, with real vLLM."""
    import json

    import specviz.__main__ as cli
    from specviz.config import SpecConfig
    from specviz.demo_model import ensure_demo_model
    from specviz.prompts import load_prompts
    from specviz.runfile import save_run
    from specviz.serving.local import LocalServer
    from specviz.serving.recording import record
    from specviz.sweep_files import confirmation_folder
    from specviz.testing.tiny_models import build_tiny_llama

    target = build_tiny_llama(tmp_path / "target", num_hidden_layers=2, tokenizer_from=ensure_demo_model())
    spec = SpecConfig.from_dict({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1,
                                 "prompt_lookup_max": 3})
    _, prompts = load_prompts("builtin:repetitive")
    with LocalServer(model=str(target), spec=spec, dtype="float32") as server:
        server.start()
        run = record(server, prompts[:4], prompt_set="repetitive", concurrency=2, max_tokens=96)  # >= 30 drafted steps
    run_file = save_run(run, tmp_path / "ngram-k3.json.gz")

    out = tmp_path / "tuned"
    # --neighbours 0: the confirmation measures the predicted best k and no drafting only; its neighbours and the
    # head-to-head are the schedule-row test's (run_confirmation), here two engines fewer
    assert cli.main(["tune", str(run_file), "--out", str(out), "--concurrency", "1", "--repeats", "1",
                     "--neighbours", "0"]) == 0
    sweep = load_sweep(out / "sweep.json")
    assert sweep.complete and {(c.drafter, c.num_speculative_tokens, c.concurrency) for c in sweep.cells} == {
        ("baseline", 0, 1), ("baseline", 0, 2), ("ngram lookup 1-3", 3, 1), ("ngram lookup 1-3", 3, 2)}
    assert json.loads((out / "repetitive.json").read_text()) == prompts[:4]
    assert sweep.notes.startswith(f"Measured by `specviz tune {run_file} --out {out}` from run {run.meta.run_id}: "
                                  "ngram k=3, prompt set 'repetitive' (4 requests, max 96 tokens) at concurrency 2")
    assert (confirmation_folder(out, "ngram lookup 1-3") / "sweep.json").exists()
    printed = capsys.readouterr().out
    assert "Exported:" in printed and "vllm serve" in printed
    assert "speculative_config" in json.loads(printed.strip().splitlines()[-1])
