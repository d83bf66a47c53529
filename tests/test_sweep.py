"""Sweep grids, files and the table, without an engine."""

import json

import pytest
from pydantic import ValidationError

from specviz.config import ConfigError
from specviz.metrics import StepFigures
from specviz.sweep import Sweep, SweepCell, SweepError, SweepGrid, drafter_label, load_sweep, save_sweep, sweep_table

GRID = dict(target_model="m", drafters=[{"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}],
            num_speculative_tokens=[1, 3], concurrencies=[1, 4], prompts="builtin:code", num_requests=8,
            max_tokens=32)


def cell(drafter: str, k: int | None, c: int, tput: float) -> SweepCell:
    return SweepCell(
        drafter=drafter, method=None if k is None else "ngram", num_speculative_tokens=k,
        speculative_config=None if k is None else {"method": "ngram", "num_speculative_tokens": k}, concurrency=c,
        prompt_set="code", num_requests=8, max_tokens=32, num_output_tokens=256, wall_time_s=256 / tput,
        output_tokens_per_s=tput, request_output_tokens_per_s_p50=None, time_per_output_token_s_p50=None,
        time_per_output_token_s_p90=None, time_to_first_token_s_p50=None, time_to_first_token_s_p90=None,
        mean_acceptance_length=None, draft_acceptance_rate=None, num_drafts=0, num_draft_tokens=0,
        num_accepted_tokens=0, num_accepted_tokens_per_pos=[], acceptance_rate_per_pos=[],
        steps=StepFigures(accepted_histogram=[], num_steps_without_drafts=0, num_engine_steps=10,
                          engine_step_time_s=0.03),
        counters_match=None, run_file="runs/x.json.gz", engine_ready_after_s=30.0, created_at="2026-12-02T00:00:00",
        vllm_version="0.32.0", platform="cpu", device_name="test cpu",
    )


def test_speedup_is_against_the_baseline_at_the_same_concurrency():
    sweep = Sweep(grid=SweepGrid(**GRID), cells=[
        cell("baseline", None, 1, 30.0), cell("baseline", None, 4, 90.0),
        cell("ngram lookup 2-4", 3, 1, 45.0), cell("ngram lookup 2-4", 3, 4, 81.0),
    ])
    table = sweep_table(sweep).set_index(["drafter", "concurrency"])
    assert table.loc[("ngram lookup 2-4", 1), "speedup"] == pytest.approx(1.5)   # 45 / 30
    assert table.loc[("ngram lookup 2-4", 4), "speedup"] == pytest.approx(0.9)   # 81 / 90: drafting stopped paying
    assert table.loc[("baseline", 4), "speedup"] == pytest.approx(1.0)
    assert not sweep.complete  # ngram k=1 is missing


def test_engine_configs_put_the_baseline_first_and_refuse_a_drafter_with_its_own_k():
    grid = SweepGrid(**GRID)
    assert [(label, spec.num_speculative_tokens if spec else None) for label, spec in grid.engine_configs()] == [
        ("baseline", None), ("ngram lookup 2-4", 1), ("ngram lookup 2-4", 3)]
    bad = SweepGrid(**GRID | {"drafters": [{"method": "ngram", "num_speculative_tokens": 3}]})
    with pytest.raises(ConfigError, match="leave out 'num_speculative_tokens'"):
        bad.engine_configs()
    with pytest.raises(ConfigError, match="needs 'model'"):
        SweepGrid(**GRID | {"drafters": [{"method": "eagle3"}]}).engine_configs()


@pytest.mark.parametrize("change,message", [
    ({"num_requests": 2}, "below the largest concurrency"),
    ({"concurrencies": [1, 1]}, "distinct integers"),
    ({"num_speculative_tokens": [0, 2]}, "distinct integers >= 1"),
    ({"drafters": [{"method": "ngram"}, {"method": "ngram"}]}, "same configuration"),
])
def test_bad_grids_are_refused(change, message):
    with pytest.raises(ValidationError, match=message):
        SweepGrid(**GRID | change)


def test_drafter_labels():
    assert drafter_label(None) == "baseline"
    assert drafter_label({"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}) == "ngram lookup 2-4"
    assert drafter_label({"method": "draft_model", "model": "/m/tiny-draft/"}) == "draft_model tiny-draft"


def test_sweep_files_round_trip_and_refuse_foreign_or_corrupt_files(tmp_path):
    sweep = Sweep(grid=SweepGrid(**GRID), cells=[cell("baseline", None, 1, 30.0)])
    path = save_sweep(sweep, tmp_path / "s" / "sweep.json")
    assert load_sweep(path) == sweep
    (tmp_path / "run.json").write_text(json.dumps({"kind": "specviz.run", "schema_version": 1}))
    with pytest.raises(SweepError, match="not a specviz sweep file"):
        load_sweep(tmp_path / "run.json")
    path.write_text(path.read_text()[:100])
    with pytest.raises(SweepError, match="not JSON, or truncated"):
        load_sweep(path)
    doc = json.loads(sweep.model_dump_json()) | {"schema_version": 9}
    path.write_text(json.dumps(doc))
    with pytest.raises(SweepError, match="schema_version 9"):
        load_sweep(path)


def test_a_sweep_folder_of_another_grid_is_not_resumed(tmp_path, monkeypatch):
    import specviz.sweep as sweep_mod

    monkeypatch.setattr(sweep_mod, "check_grid", lambda grid: None)
    save_sweep(Sweep(grid=SweepGrid(**GRID)), tmp_path / "sweep.json")
    with pytest.raises(SweepError, match="holds a sweep of another grid"):
        sweep_mod.run_sweep(SweepGrid(**GRID | {"max_tokens": 64}), tmp_path)


def test_the_command_line_refuses_a_bad_sweep_before_any_engine(capsys, tmp_path):
    from specviz.__main__ import main

    assert main(["sweep", "--model", str(tmp_path), "--drafter", '{"method": "nope"}', "--out", str(tmp_path)]) == 2
    assert "unknown method 'nope'" in capsys.readouterr().err
    assert main(["sweep", "--model", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
    assert "not a model folder" in capsys.readouterr().err
    assert main(["sweep", "--model", str(tmp_path), "--concurrency", "1,32", "--out", str(tmp_path)]) == 2
    assert "below the largest concurrency" in capsys.readouterr().err
