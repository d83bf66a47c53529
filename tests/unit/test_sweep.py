"""Sweep grids, files, repeats and the table, without an engine (a fake one for the order of runs)."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from run_builders import make_run

from specviz.config import BatchSizeRange, ConfigError, SpecConfig
from specviz.metrics import StepFigures
from specviz.runfile import Request, RequestSpecDecodeMetrics, SpecDecodeCounters
from specviz.sweep import (
    CellRun,
    Sweep,
    SweepCell,
    SweepError,
    SweepGrid,
    cell_run,
    drafter_label,
)
from specviz.sweep_files import load_sweep, save_sweep
from specviz.sweep_runner import server_args, sweep_plan
from specviz.sweep_table import shown_table, speedups, sweep_table
from specviz.sweep_view import measured_apart_warning

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


def test_the_shown_table_says_no_drafting_for_the_baseline_and_its_k_is_0():
    sweep = Sweep(grid=SweepGrid(**GRID), cells=[cell("baseline", None, 1, 30.0), cell("ngram lookup 2-4", 3, 1, 45.0)])
    table = sweep_table(sweep)
    shown = shown_table(table)
    assert list(shown["method"]) == ["no drafting", "ngram"] and list(shown["num_speculative_tokens"]) == [0, 3]
    assert table["method"].isna().iloc[0]  # the CSV keeps the baseline's method empty
    assert table["num_speculative_tokens"].dtype.kind == "i"  # k is a whole number everywhere, 0 without drafting


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
    import specviz.sweep_runner as sweep_mod

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


# ---- repeats: one cell, several runs ----------------------------------------------------------------

def run_of(k: int | None, c: int, tput: float, repeat: int, *, acceptance: list[tuple[int, int]] | None = None,
           length: float | None = None, drafts: int = 0) -> CellRun:
    """One run's figures as a sweep keeps them (metrics.Summary plus the sweep's fields)."""
    return CellRun(
        run_id=f"r{repeat}", complete=True, method="ngram" if k else None, num_speculative_tokens=k, concurrency=c,
        prompt_set="code", max_tokens=32, num_requests=8, num_output_tokens=256, num_steps=256,
        vllm_version="0.32.0", platform="cpu", device_name="test cpu", mean_acceptance_length=length,
        draft_acceptance_rate=None, num_drafts=drafts, num_draft_tokens=drafts * (k or 0), num_accepted_tokens=0,
        num_accepted_tokens_per_pos=[], acceptance_rate_per_pos=[], request_acceptance_lengths=[],
        output_tokens_per_s=tput, request_output_tokens_per_s_p50=None, time_to_first_token_s_p50=None,
        time_to_first_token_s_p90=None, time_per_output_token_s_p50=0.03 + repeat / 1000,
        time_per_output_token_s_p90=None, counters_match=None, repeat=repeat, run_file=f"runs/x-r{repeat}.json.gz",
        wall_time_s=256 / tput, steps=StepFigures(accepted_histogram=[0] * ((k or 0) + 1), num_steps_without_drafts=256,
                                                  num_engine_steps=100, engine_step_time_s=0.03),
        request_acceptance=acceptance, traced=True, async_scheduling=False, engine_ready_after_s=30.0,
        created_at="2026-12-02T00:00:00+00:00")


def cell_of(drafter: str, k: int | None, c: int, runs: list[CellRun]) -> SweepCell:
    return SweepCell(drafter=drafter, method="ngram" if k else None, num_speculative_tokens=k,
                     speculative_config={"method": "ngram", "num_speculative_tokens": k} if k else None,
                     concurrency=c, prompt_set="code", num_requests=8, max_tokens=32, runs=runs)


NG = "ngram lookup 2-4"


def test_a_cell_gives_the_median_and_the_spread_of_its_runs():
    c = cell_of(NG, 3, 4, [run_of(3, 4, 40.0, 0), run_of(3, 4, 44.0, 1), run_of(3, 4, 41.0, 2)])
    assert (c.output_tokens_per_s, c.output_tokens_per_s_min, c.output_tokens_per_s_max) == (41.0, 40.0, 44.0)
    assert c.repeats == 3 and c.traced and c.async_scheduling is False
    assert c.median_of("time_per_output_token_s_p50") == pytest.approx(0.031)
    # the file carries the median and the spread beside the runs, and reads back the same
    doc = json.loads(c.model_dump_json())
    assert (doc["output_tokens_per_s"], doc["output_tokens_per_s_min"], doc["output_tokens_per_s_max"]) == (41, 40, 44)
    assert SweepCell.model_validate(doc) == c


def test_speedup_pairs_the_runs_of_one_round_and_gives_its_spread():
    base = cell_of("baseline", None, 1, [run_of(None, 1, 30.0, 0), run_of(None, 1, 28.0, 1)])
    ngram = cell_of(NG, 3, 1, [run_of(3, 1, 45.0, 0), run_of(3, 1, 40.0, 1)])
    assert speedups(ngram, base) == pytest.approx([1.5, 40 / 28])  # round 0: 45/30, round 1: 40/28
    assert speedups(ngram, None) == []
    grid = SweepGrid(**GRID | {"repeats": 2})
    row = sweep_table(Sweep(grid=grid, cells=[base, ngram])).set_index("drafter").loc[NG]
    assert row.speedup == pytest.approx((1.5 + 40 / 28) / 2)  # the median of two: 1.464
    assert (row.speedup_min, row.speedup_max) == (pytest.approx(40 / 28), pytest.approx(1.5))
    assert (row.output_tokens_per_s, row.output_tokens_per_s_min, row.output_tokens_per_s_max) == (42.5, 40.0, 45.0)
    assert row.repeats == 2 and row.run_files == "runs/x-r0.json.gz runs/x-r1.json.gz"


def test_acceptance_pools_the_runs_and_its_interval_resamples_requests():
    # each run: two requests, (4 drafts, 4 accepted) and (4, 0); 8 drafts per run at length 1.5
    runs = [run_of(3, 1, 40.0, r, acceptance=[(4, 4), (4, 0)], length=1.5, drafts=8) for r in (0, 1)]
    c = cell_of(NG, 3, 1, runs)
    assert c.request_acceptance == [(8, 8), (8, 0)]  # a prompt's counts summed over the repeats
    assert c.mean_acceptance_length == pytest.approx(1.5)
    assert c.mean_acceptance_length_90 == (1.0, 2.0)  # both draws of one prompt: 2.0 or 1.0
    row = sweep_table(Sweep(grid=SweepGrid(**GRID), cells=[c])).iloc[0]
    assert (row.mean_acceptance_length_low, row.mean_acceptance_length_high) == (1.0, 2.0)
    assert cell_of(NG, 3, 1, [run_of(3, 1, 40.0, 0)]).mean_acceptance_length_90 is None  # counts not kept


def test_the_plan_goes_round_by_round_reversing_odd_rounds():
    grid = SweepGrid(**GRID | {"repeats": 3})
    plan = [(r, label, spec.num_speculative_tokens if spec else None) for r, label, spec in sweep_plan(grid)]
    assert plan == [(0, "baseline", None), (0, NG, 1), (0, NG, 3),
                    (1, NG, 3), (1, NG, 1), (1, "baseline", None),
                    (2, "baseline", None), (2, NG, 1), (2, NG, 3)]


def test_an_untraced_speculative_server_reports_per_request_acceptance():
    from specviz.config import SpecConfig

    spec = SpecConfig.from_dict({"method": "ngram", "num_speculative_tokens": 3})
    untraced = SweepGrid(**GRID | {"traced": False, "vllm_args": ["--max-num-seqs", "8"]})
    assert server_args(untraced, spec) == ["--max-num-seqs", "8", "--per-request-spec-decode-metrics", "detailed"]
    assert server_args(untraced, None) == ["--max-num-seqs", "8"]  # vLLM refuses it without speculation
    assert server_args(SweepGrid(**GRID), spec) == []


def test_an_untraced_run_takes_its_acceptance_from_vllms_counters():
    def request(i: int, spec_steps: int, accepted: int) -> Request:
        return Request(request_id=f"r{i}", prompt="p", output_token_ids=list(range(20)), output_text="x" * 20,
                       start_time_s=0.0, first_token_time_s=0.2, end_time_s=2.0, finish_reason="length",
                       spec_decode_metrics=RequestSpecDecodeMetrics(
                           mean_acceptance_length=1 + accepted / spec_steps,
                           draft_acceptance_rate=accepted / spec_steps / 3,
                           acceptance_histogram=[0, 0, 0, 0], num_spec_steps=spec_steps,
                           num_accepted_draft_tokens=accepted, num_draft_tokens=3 * spec_steps, num_spec_tokens=3))

    run = make_run([request(0, 4, 5), request(1, 6, 6)], k=3, traced=False, async_scheduling=True,
                   vllm_counters=SpecDecodeCounters(num_drafts=10, num_draft_tokens=30, num_accepted_tokens=11,
                                                    num_accepted_tokens_per_pos=[6, 4, 1]))
    r = cell_run(run, repeat=0, run_file="runs/u.json.gz", engine_ready_after_s=None)
    assert not r.traced and r.async_scheduling is True
    assert r.steps.accepted_histogram == [4, 2, 3, 1] and r.steps.num_steps_without_drafts == 40 - 21
    assert r.request_acceptance == [(4, 5), (6, 6)]
    assert r.mean_acceptance_length == pytest.approx(2.1)  # 1 + 11 / 10, from the counters
    row = sweep_table(Sweep(grid=SweepGrid(**GRID), cells=[cell_of(NG, 3, 1, [r])])).iloc[0]
    assert row.acceptance_from == "vLLM counters" and not row.traced and row.async_scheduling


def test_version_1_sweep_files_load_as_one_run_per_cell(tmp_path):
    # 8 cells of the chat sweep as recorded before repeats (sample_runs/ now holds version 2)
    version_1 = [Path(__file__).parent.parent / "fixtures" / "sweep_v1_smollm2_chat.json"]
    assert json.loads(version_1[0].read_text())["schema_version"] == 1
    for path in version_1:
        raw = json.loads(path.read_text())
        sweep = load_sweep(path)
        assert len(sweep.cells) == len(raw["cells"])
        for old, new in zip(raw["cells"], sweep.cells):
            assert new.repeats == 1 and new.traced
            assert new.output_tokens_per_s == old["output_tokens_per_s"] == new.output_tokens_per_s_min
            assert new.mean_acceptance_length == pytest.approx(old["mean_acceptance_length"])
            assert new.steps == StepFigures(**old["steps"]) and new.runs[0].run_file == old["run_file"]
    # and a version-1 file written by hand
    flat = json.loads(cell("baseline", None, 1, 30.0).runs[0].model_dump_json())
    v1_cell = {k: v for k, v in flat.items() if k not in (
        "run_id", "complete", "num_steps", "request_acceptance_lengths", "vllm_counters", "num_padded_steps",
        "num_padded_draft_tokens", "num_failed_requests", "invalid_reason", "repeat", "request_acceptance",
        "traced", "async_scheduling")} | {"drafter": "baseline", "speculative_config": None}
    doc = {"kind": "specviz.sweep", "schema_version": 1, "grid": GRID, "cells": [v1_cell], "notes": ""}
    (tmp_path / "sweep.json").write_text(json.dumps(doc))
    [c] = load_sweep(tmp_path / "sweep.json").cells
    assert c.output_tokens_per_s == 30.0 and c.repeats == 1 and c.runs[0].run_file == "runs/x.json.gz"


def test_run_sweep_interleaves_repeats_and_resumes_them(tmp_path, monkeypatch):
    """A fake engine: the order of engine starts, and a resume after an interruption, with 2 repeats."""
    import specviz.serving.local as local_mod
    import specviz.serving.recording as recording_mod
    import specviz.sweep_runner as sweep_mod

    starts: list[tuple[int | None, bool]] = []

    class FakeServer:
        def __init__(self, *, spec, trace, extra_args, **_):
            self.spec, self.trace = spec, trace

        def __enter__(self):
            starts.append((self.spec.num_speculative_tokens if self.spec else None, self.trace))
            return self

        def __exit__(self, *exc):
            return None

        def start(self, progress=None):
            return 1.0

    def fake_record(server, prompts, *, prompt_set, concurrency, max_tokens, **_):
        k = server.spec.num_speculative_tokens if server.spec else None
        requests = [Request(request_id=f"r{i}", prompt=p, output_token_ids=[1, 2], output_text="ab",
                            start_time_s=0.0, first_token_time_s=0.5, end_time_s=1.0, finish_reason="length")
                    for i, p in enumerate(prompts)]
        return make_run(requests, k=k, concurrency=concurrency, traced=server.trace, max_tokens=max_tokens)

    monkeypatch.setattr(sweep_mod, "check_grid", lambda grid: None)
    monkeypatch.setattr(sweep_mod, "this_machine", lambda: ("cpu", "test cpu", "0.32.0"))
    monkeypatch.setattr(local_mod, "LocalServer", FakeServer)
    monkeypatch.setattr(recording_mod, "record", fake_record)
    monkeypatch.setattr(recording_mod, "load_tokenizer", lambda model: None)
    grid = SweepGrid(**GRID | {"num_speculative_tokens": [1], "concurrencies": [1, 2], "repeats": 2})

    class Interrupted(Exception):
        pass

    def stop_after_three(cell, sweep) -> None:
        if sum(len(c.runs) for c in sweep.cells) == 3:
            raise Interrupted

    with pytest.raises(Interrupted):
        sweep_mod.run_sweep(grid, tmp_path, on_cell=stop_after_three)
    assert starts == [(None, True), (1, True)]  # round 0: baseline, then k=1 (interrupted after its c=1)
    sweep = sweep_mod.run_sweep(grid, tmp_path)
    # resumed: k=1 again for its c=2 of round 0, then round 1 in reverse: k=1, baseline
    assert starts == [(None, True), (1, True), (1, True), (1, True), (None, True)]
    assert sweep.complete and [sorted(r.repeat for r in c.runs) for c in sweep.cells] == [[0, 1]] * 4
    assert (tmp_path / "runs" / "baseline-c1.json.gz").exists()  # round 0 keeps the one-run names
    assert (tmp_path / "runs" / "baseline-c1-r1.json.gz").exists()
    assert load_sweep(tmp_path / "sweep.json") == sweep

    # more repeats later: the same folder takes a third round; another grid is still refused
    sweep = sweep_mod.run_sweep(SweepGrid(**grid.model_dump() | {"repeats": 3}), tmp_path)
    assert starts[5:] == [(None, True), (1, True)] and all(c.repeats == 3 for c in sweep.cells)
    with pytest.raises(SweepError, match="another grid"):
        sweep_mod.run_sweep(SweepGrid(**grid.model_dump() | {"repeats": 3, "traced": False}), tmp_path)

    # another machine is refused before an engine starts, naming both
    monkeypatch.setattr(sweep_mod, "this_machine", lambda: ("cpu", "Intel Xeon", "0.32.0"))
    with pytest.raises(SweepError, match=r"recorded on cpu \(test cpu\), vLLM 0.32.0; this machine is cpu \(Intel Xeon\)"):
        sweep_mod.run_sweep(SweepGrid(**grid.model_dump() | {"repeats": 4}), tmp_path)
    assert len(starts) == 7
    # ...but a finished sweep opened there measures nothing, so it mixes nothing (scripts/record_sweeps.py walks
    # every sample sweep, each recorded on its own machine)
    assert sweep_mod.run_sweep(SweepGrid(**grid.model_dump() | {"repeats": 3}), tmp_path) == sweep
    assert len(starts) == 7

    # a folder another process is measuring into is refused, naming who; free again once it is done
    monkeypatch.setattr(sweep_mod, "this_machine", lambda: ("cpu", "test cpu", "0.32.0"))
    more = SweepGrid(**grid.model_dump() | {"repeats": 4})
    with sweep_mod.measuring_lock(tmp_path), pytest.raises(SweepError, match=r"being measured by specviz pid \d+ on"):
        sweep_mod.run_sweep(more, tmp_path)
    assert len(starts) == 7
    assert sweep_mod.run_sweep(more, tmp_path).complete and len(starts) == 9


def test_the_progress_line_names_k_once():
    from specviz.sweep_table import sweep_summary_line

    static = cell("ngram lookup 2-4", 3, 4, 78.3)
    assert sweep_summary_line(static).startswith("ngram lookup 2-4         k=3 c=4      78.3 tok/s")
    assert sweep_summary_line(cell("baseline", None, 4, 90.0)).startswith("baseline                     c=4      90.0")
    scheduled = static.model_copy(update={
        "drafter": "ngram lookup 2-4 k by batch 1:5 2-16:4",
        "spec": static.spec.model_copy(update={"schedule": [BatchSizeRange(first=1, last=1, k=5),
                                                            BatchSizeRange(first=2, last=16, k=4)]})})
    assert sweep_summary_line(scheduled).startswith("ngram lookup 2-4 k by batch 1:5 2-16:4 c=4      78.3 tok/s")


def test_a_row_added_to_a_finished_sweep_is_named_as_measured_apart():
    def at(run: CellRun, hour: int) -> CellRun:
        return run.model_copy(update={"created_at": f"2026-12-05T{hour:02d}:00:00+00:00"})

    def row(drafter, k, hours, spec=None):
        runs = [at(run_of(k, 1, 40.0, r), h) for r, h in enumerate(hours)]
        return SweepCell(drafter=drafter, spec=SpecConfig.from_dict(spec), concurrency=1, prompt_set="code", num_requests=8, max_tokens=32,
                         runs=runs) if spec else cell_of(drafter, k, 1, runs)

    interleaved = [row("baseline", None, (10, 13, 14)), row(NG, 1, (11, 12, 15))]  # three rounds, b a, a b, b a
    sweep = Sweep(grid=SweepGrid(**GRID | {"repeats": 3}), cells=interleaved)
    assert sweep.rows_measured_apart() == {}
    schedule = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4,
                "num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, 16, 1]]}
    added = [row(f"{NG} k by batch 1:3 2-16:1", 3, (20, 21, 22), spec=schedule), row(NG, 3, (23, 23, 23))]
    sweep = sweep.model_copy(update={"cells": [*interleaved, *added]})
    assert sweep.rows_measured_apart() == {
        (f"{NG} k by batch 1:3 2-16:1", 3): ("2026-12-05T20:00:00+00:00", "2026-12-05T22:00:00+00:00"),
        (NG, 3): ("2026-12-05T23:00:00+00:00", "2026-12-05T23:00:00+00:00")}
    warning = measured_apart_warning(sweep, "s")
    assert ("after the rest of the sweep (cpu (test cpu), 2026-12-05 10:00-15:00 UTC): ngram lookup 2-4 k by batch "
            "1:3 2-16:1 (2026-12-05 20:00-22:00 UTC); ngram lookup 2-4 k=3 (2026-12-05 23:00-23:00 UTC)") in warning
    assert measured_apart_warning(Sweep(grid=sweep.grid, cells=interleaved), "s") is None
    # one round interleaves nothing, so no row is singled out
    assert sweep.model_copy(update={"grid": SweepGrid(**GRID)}).rows_measured_apart() == {}
