"""vLLM's own `bench sweep serve` folder read as a specviz sweep; bad inputs refused or listed; the frontier chart.

The fixture tests/fixtures/vllm_sweep_tiny_ngram/ is a real folder written by vLLM 0.32's `bench sweep serve` on this
machine (tests/fixtures/vllm_sweep_tiny_ngram.md says how), trimmed of nothing: the baseline and ngram (lookup 1-3)
at k=2 and k=4, at max_concurrency 1 and 4, 2 runs each.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specviz.__main__ import main
from specviz.charts.frontier import frontier, frontier_rows, pareto_optimal, per_user
from specviz.charts.sweeps import sweep_caption
from specviz.prediction import predict
from specviz.sweep import SweepError
from specviz.sweep_files import list_sweep_files, load_sweep, save_sweep
from specviz.sweep_table import sweep_table
from specviz.vllm_import import (
    VLLM_FILES_DIR,
    cell_run,
    import_into,
    import_vllm_results,
    imported_prompts_reason,
    read_result,
)

FIXTURE = Path(__file__).parent.parent / "fixtures" / "vllm_sweep_tiny_ngram"
DRAFTER = "ngram lookup 1-3"


@pytest.fixture
def folder(tmp_path) -> Path:
    """A copy of the real folder, for the tests that break it."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "experiment"))


def run_files(folder: Path, *, speculative: bool | None = None) -> list[Path]:
    files = sorted(folder.glob("*/run=*.json"))
    if speculative is None:
        return files
    return [p for p in files if ("speculative_config" in json.loads(p.read_text())) == speculative]


def edit(path: Path, **changes) -> None:
    doc = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    path.write_text(json.dumps(doc))


def test_a_real_bench_sweep_serve_folder_imports_as_one_cell_per_config_and_concurrency_with_its_repeats():
    sweep, report = import_vllm_results([FIXTURE])
    assert report.tool == "vllm bench sweep serve" and report.num_runs == 12 and report.skipped == []
    keys = sorted(c.key for c in sweep.cells)
    assert keys == sorted([("baseline", 0, 1), ("baseline", 0, 4), (DRAFTER, 2, 1), (DRAFTER, 2, 4),
                           (DRAFTER, 4, 1), (DRAFTER, 4, 4)])
    assert sweep.complete and sweep.grid.repeats == 2 and not sweep.grid.traced
    assert sweep.grid.num_speculative_tokens == [2, 4] and sweep.grid.concurrencies == [1, 4]
    assert sweep.grid.drafters == [{"method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 3}]
    for cell in sweep.cells:
        assert [r.repeat for r in cell.runs] == [0, 1]
        assert cell.platform == "cpu" and cell.device_name == "AMD EPYC" and cell.vllm_version == "0.32.0"
        assert cell.prompt_set == "vllm:unknown" and cell.max_tokens == 32 and cell.num_requests == 8
        for run in cell.runs:
            assert (FIXTURE / run.run_file).is_file() and not run.traced and run.request_acceptance is None
            doc = json.loads((FIXTURE / run.run_file).read_text())
            assert run.output_tokens_per_s == doc["output_throughput"] and run.concurrency == doc["max_concurrency"]
            if cell.spec is None:
                assert run.num_drafts == 0 and run.acceptance_rate_per_pos == []
            else:  # vLLM's counters as bench serve read them
                assert run.num_drafts == doc["spec_decode_num_drafts"]
                assert run.num_accepted_tokens == doc["spec_decode_accepted_tokens"]
                assert run.acceptance_rate_per_pos == doc["spec_decode_per_position_acceptance_rates"]
                assert len(run.acceptance_rate_per_pos) == cell.num_speculative_tokens
                assert run.mean_acceptance_length == pytest.approx(doc["spec_decode_acceptance_length"])
    assert "vllm bench sweep serve" in sweep.notes and "hardware cpu: AMD EPYC" in sweep.notes


def test_per_position_counts_are_vllms_rates_times_its_drafts_and_the_steps_follow_from_them():
    sweep, _ = import_vllm_results([FIXTURE])
    cell = next(c for c in sweep.cells if c.key == (DRAFTER, 4, 4))
    run = cell.runs[0]
    assert run.num_accepted_tokens_per_pos == [round(r * run.num_drafts) for r in run.acceptance_rate_per_pos]
    hist = run.steps.accepted_histogram
    assert len(hist) == 5 and sum(hist) == run.num_drafts  # every drafted request-step once
    assert run.steps.engine_step_time_s is None  # vLLM does not save it


def test_the_tuner_predicts_from_an_imported_sweep():
    sweep, _ = import_vllm_results([FIXTURE])
    pred = predict(sweep, DRAFTER)
    assert pred.step_cost is not None, pred.refusals
    assert [r for r in pred.refusals if r.concurrency is None] == []
    assert {rec.concurrency for rec in pred.recommend()} <= {1, 4}


def test_standalone_bench_serve_files_import_as_a_sweep_too():
    files = [p for p in run_files(FIXTURE) if p.name == "run=0.json"]
    sweep, report = import_vllm_results(files)
    assert report.tool == "vllm bench serve" and len(sweep.cells) == 6 and sweep.grid.repeats == 1


def test_import_into_copies_vllms_files_beside_the_sweep_and_the_pages_list_it(tmp_path):
    out = tmp_path / "sweeps" / "tiny-vllm"
    sweep, _ = import_into([FIXTURE], out)
    (out / "sweep.json").write_text(sweep.model_dump_json())
    assert all((out / r.run_file).is_file() and r.run_file.startswith(VLLM_FILES_DIR + "/")
               for c in sweep.cells for r in c.runs)
    assert list_sweep_files(tmp_path / "sweeps") == [out / "sweep.json"]
    assert load_sweep(out / "sweep.json") == sweep  # the file reads back as written


def test_specviz_import_writes_the_sweep_and_tune_says_why_it_cannot_confirm_without_prompts(tmp_path, capsys):
    out = tmp_path / "imported"
    assert main(["import", str(FIXTURE), "--out", str(out)]) == 0
    assert "imported 12 run(s)" in capsys.readouterr().out
    sweep = load_sweep(out / "sweep.json")
    assert "--confirm-prompts" in imported_prompts_reason(sweep)
    assert main(["tune", str(out)]) == 2
    assert "--confirm-prompts" in capsys.readouterr().err
    assert main(["import", str(FIXTURE), "--out", str(out), "--confirm-prompts", "builtin:repetitive"]) == 0
    assert imported_prompts_reason(load_sweep(out / "sweep.json")) is None


def test_a_folder_that_is_not_a_vllm_sweep_is_refused_and_nothing_is_written(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.json").write_text("{}")
    with pytest.raises(SweepError, match="not a `vllm bench sweep serve` experiment folder"):
        import_into([tmp_path], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    (tmp_path / "x.json").write_text(json.dumps({"kind": "specviz.run"}))
    with pytest.raises(SweepError, match="not a `vllm bench serve --save-result` result"):
        import_vllm_results([tmp_path / "x.json"])


def test_a_drafting_run_without_spec_decode_fields_is_refused(folder):
    edit(run_files(folder, speculative=True)[0], spec_decode_num_drafts=None,
         spec_decode_per_position_acceptance_rates=None)
    with pytest.raises(SweepError, match="no spec-decode fields"):
        import_vllm_results([folder])


def test_mixed_models_or_vllm_versions_are_refused(folder):
    first, second = run_files(folder)[:2]
    edit(first, model_id="/models/another")
    with pytest.raises(SweepError, match="mix models"):
        import_vllm_results([folder])
    edit(first, model_id=json.loads(second.read_text())["model_id"], vllm_version="0.31.0")
    with pytest.raises(SweepError, match="mix vLLM versions"):
        import_vllm_results([folder])


def test_a_failed_run_is_listed_with_its_reason_and_its_cell_keeps_the_runs_that_finished(folder):
    failed = run_files(folder, speculative=True)[-1]
    failed.with_name(failed.stem + ".failure.json").write_text(json.dumps(
        {"run_number": 1, "error_type": "CalledProcessError", "error": "bench exited 1"}))
    failed.unlink()
    sweep, report = import_vllm_results([folder])
    assert report.skipped == [(f"{failed.parent.name}/{failed.stem}.failure.json",
                               "failed: CalledProcessError: bench exited 1")]
    assert "Left out" in sweep.notes and not sweep.complete  # the pages say the cell is short of its repeats
    assert sorted(len(c.runs) for c in sweep.cells) == [1, 2, 2, 2, 2, 2]


def test_a_speculative_serve_command_without_speculative_params_is_refused(folder):
    spec_run = run_files(folder, speculative=True)[0]
    edit(spec_run, speculative_config=None)
    with pytest.raises(SweepError, match="serve command itself carried one"):
        import_vllm_results([folder])


def test_two_combinations_that_differ_in_another_param_are_refused(folder):
    edit(run_files(folder)[0], max_num_seqs=64)
    with pytest.raises(SweepError, match="varies more than speculative_config"):
        import_vllm_results([folder])


def test_unknown_hardware_stays_unknown():
    path = run_files(FIXTURE)[0]
    doc = json.loads(path.read_text())
    doc.pop("hardware")
    result = read_result(path).model_copy(update={"metadata": {}})
    run = cell_run(result, None, "x", "x")
    assert (run.platform, run.device_name, run.vllm_version) == ("unknown", "unknown", "unknown")


def test_pareto_optimal_points_are_those_no_other_beats_on_both_axes():
    assert pareto_optimal([(30, 120), (20, 100), (10, 150)]) == [True, False, True]
    assert per_user(120, 4) == 30


@pytest.mark.parametrize("source", ["imported", "recorded"])
def test_the_frontier_draws_a_curve_per_config_and_marks_the_pareto_cells(source):
    if source == "imported":
        sweep, _ = import_vllm_results([FIXTURE])
    else:
        sweep = load_sweep(list_sweep_files()[0])
    table = sweep_table(sweep)
    fig = frontier(table, sweep_caption(table))
    curves = [t for t in fig.data if t.meta["role"] == "measured"]
    pareto = [t for t in fig.data if t.meta["role"] == "pareto"]
    assert len(curves) == len({(d, k) for d, k in zip(table["drafter"], table["num_speculative_tokens"])})
    assert len(pareto) == 1 and len(pareto[0].x) == int(frontier_rows(table)["pareto"].sum()) >= 1
    assert "per user" in fig.layout.xaxis.title.text


def test_specviz_import_does_not_overwrite_a_sweep_specviz_measured(tmp_path, capsys):
    measured = tmp_path / "measured"
    save_sweep(load_sweep(list_sweep_files()[0]), measured / "sweep.json")
    assert main(["import", str(FIXTURE), "--out", str(measured)]) == 2
    assert "holds a sweep specviz measured" in capsys.readouterr().err
    assert not (measured / VLLM_FILES_DIR).exists()
