"""The command line's edges: --vllm-args spellings, and a reader that closes the pipe early."""

import subprocess
import sys

import pytest

import specviz.__main__ as cli
from specviz.files import REPO_DIR as ROOT
from specviz.runfile import list_run_files


@pytest.mark.parametrize("argv, expected", [
    (["--vllm-args", "--no-enable-prefix-caching"], ["--vllm-args=--no-enable-prefix-caching"]),
    (["--vllm-args", "--tensor-parallel-size 4"], ["--vllm-args=--tensor-parallel-size 4"]),
    (["--vllm-args=--enforce-eager"], ["--vllm-args=--enforce-eager"]),
    (["--k", "1,2", "--vllm-args", "--enforce-eager", "--out", "x", "--vllm-args=--tensor-parallel-size 2"],
     ["--k", "1,2", "--vllm-args=--enforce-eager --tensor-parallel-size 2", "--out", "x"]),
    (["--out", "x"], ["--out", "x"]),
    (["--vllm-args"], ["--vllm-args"]),  # no value: argparse says so
    (["--", "--vllm-args", "-x"], ["--", "--vllm-args", "-x"]),
])
def test_join_vllm_args(argv, expected):
    assert cli.join_vllm_args(argv) == expected


@pytest.fixture
def parsed(monkeypatch):
    """Run main() with stub commands: the arguments they would get, without starting any engine."""
    seen = []
    for name in ("cmd_record", "cmd_sweep"):
        monkeypatch.setattr(cli, name, lambda args: seen.append(args) or 0)
    return seen


RECORD = ["record", "--model", "m", "--spec", "none", "--prompts", "builtin:code", "--out", "r.json.gz"]
SWEEP = ["sweep", "--model", "m", "--out", "sweeps/x"]


@pytest.mark.parametrize("base", [RECORD, SWEEP], ids=["record", "sweep"])
@pytest.mark.parametrize("extra, value", [
    (["--vllm-args", "--no-enable-prefix-caching"], "--no-enable-prefix-caching"),
    (["--vllm-args=--no-enable-prefix-caching"], "--no-enable-prefix-caching"),
    (["--vllm-args", "--tensor-parallel-size 4"], "--tensor-parallel-size 4"),
    (["--vllm-args", "--enforce-eager", "--vllm-args", "--tensor-parallel-size 4"],
     "--enforce-eager --tensor-parallel-size 4"),
    ([], ""),
])
def test_vllm_args_spellings_reach_the_command(parsed, base, extra, value):
    assert cli.main(base + extra) == 0
    assert parsed[-1].vllm_args == value
    assert parsed[-1].out == base[-1]  # the options after it are still parsed


def test_two_unquoted_vllm_arguments_get_a_hint(parsed, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(RECORD + ["--vllm-args", "--tensor-parallel-size", "4"])
    assert e.value.code == 2 and not parsed
    err = capsys.readouterr().err
    assert "unrecognized arguments: 4" in err and "one quoted value" in err


class _ClosedPipe:
    """A stdout whose reader has gone: every write raises, as `| head` makes it."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass


def test_a_closed_stdout_ends_quietly_in_process(monkeypatch):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert cli.main(["check", str(list_run_files()[0])]) == 141
    assert not isinstance(sys.stdout, _ClosedPipe)  # what is left goes to /dev/null


def test_check_piped_into_a_reader_that_closes_early_exits_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "specviz", "check", str(list_run_files()[0])], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before specviz writes its summary (it takes a second to start)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err


def test_an_empty_spec_is_refused_naming_the_baseline_spelling(capsys, tmp_path):
    for empty in ("", "  "):
        code = cli.main(["record", "--model", str(tmp_path), "--spec", empty, "--prompts", "builtin:code",
                         "--out", str(tmp_path / "r.json")])
        assert code == 2
        err = capsys.readouterr().err
        assert "--spec is empty" in err and "--spec none to record the baseline" in err
    assert not (tmp_path / "r.json").exists()


SYNTHETIC_DRAFTER = ('{"method": "ngram", "prompt_lookup_max": 3, "rejection_sample_method": "synthetic", '
                     '"synthetic_acceptance_length": 2.0}')


@pytest.mark.parametrize("command", ["record", "sweep"])
def test_synthetic_acceptance_on_this_cpu_is_refused_before_any_engine_starts(command, capsys, tmp_path, monkeypatch):
    import specviz.serving.local as local
    from specviz.serving.server import local_device

    if local_device()[0] != "cpu":
        pytest.skip("the refusal is for CPU machines")
    monkeypatch.setattr(local.LocalServer, "start", lambda *a, **k: pytest.fail("an engine was started"))
    if command == "record":
        args = ["record", "--spec", SYNTHETIC_DRAFTER.replace("{", '{"num_speculative_tokens": 3, ', 1),
                "--out", str(tmp_path / "r.json")]
    else:
        args = ["sweep", "--drafter", SYNTHETIC_DRAFTER, "--k", "1,3", "--out", str(tmp_path / "sweep")]
    code = cli.main(args + ["--model", str(tmp_path), "--prompts", "builtin:code"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("specviz: speculative config: 'rejection_sample_method' = 'synthetic' is known to fail on cpu")
    assert "Synthetic acceptance not supported with CPU sampling" in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_tune_refuses_a_drafter_the_sweep_does_not_have_and_a_folder_without_a_sweep(capsys, tmp_path):
    from specviz.sweep_files import SWEEPS_DIR

    assert cli.main(["tune", str(SWEEPS_DIR / "smollm2-chat"), "--drafter", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--drafter 'nope' is not in the sweep; it has ['ngram lookup 2-4'," in err
    assert cli.main(["tune", str(SWEEPS_DIR / "smollm2-chat")]) == 2  # three drafters: say which
    assert "--drafter: give one of" in capsys.readouterr().err
    assert cli.main(["tune", str(tmp_path)]) == 2
    assert "sweep.json: cannot read" in capsys.readouterr().err


def test_tune_measures_the_head_to_head_at_its_own_repeats(capsys, monkeypatch):
    """--head-to-head-repeats: the head-to-head decides the export, so it may get more runs than the
    confirmation; below 1 it is refused before any engine starts."""
    from specviz import sweep_runner
    from specviz.sweep_files import SWEEPS_DIR, load_confirmation

    folder, drafter = SWEEPS_DIR / "smollm2-code", "ngram lookup 2-4"
    assert cli.main(["tune", str(folder), "--head-to-head-repeats", "0"]) == 2
    assert "--head-to-head-repeats 0: give 1 or more runs per cell" in capsys.readouterr().err
    grids = []

    def fake_run_sweep(grid, out, **callbacks):
        grids.append(grid)
        return load_confirmation(folder, drafter) if len(grids) == 1 else None

    monkeypatch.setattr(sweep_runner, "run_sweep", fake_run_sweep)
    sweep_runner.run_confirmation(folder, drafter, repeats=3, head_to_head_repeats=5)
    assert [g.repeats for g in grids] == [3, 5]
    assert grids[1].schedules == [{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2,
                                   "prompt_lookup_max": 4, "num_speculative_tokens_per_batch_size": [[1, 1, 5], [2, 16, 4]]}]


def test_tunes_progress_bar_counts_the_head_to_head_from_its_own_first_run(capsys, tmp_path):
    """The confirmation's bar once stood at 61/61, 62/62, ... through the whole head-to-head, never saying
    how far it had to go."""
    from specviz.sweep_files import SWEEPS_DIR, load_confirmation, load_head_to_heads

    folder, drafter = SWEEPS_DIR / "smollm2-chat-f32", "ngram lookup 2-4"
    confirm, head_to_head = load_confirmation(folder, drafter), load_head_to_heads(folder, drafter)[0]
    first = head_to_head.cells[0].model_copy(update={"runs": head_to_head.cells[0].runs[:1]})

    def measure(callbacks):
        callbacks["on_cell"](confirm.cells[-1], confirm)
        callbacks["on_cell"](first, head_to_head.model_copy(update={"cells": [first]}))
        return "measured"

    assert cli._with_progress(measure, tmp_path, total=10, then="head-to-head") == "measured"
    bar = capsys.readouterr().err.split("\r")[-1]
    assert (confirm.runs_done, head_to_head.runs_planned) == (63, 45)
    assert " 1/45 " in bar and "head-to-head" in bar, bar


def test_a_sweep_refuses_a_schedule_that_is_not_one_before_any_engine_starts(capsys, tmp_path):
    common = ["sweep", "--model", str(tmp_path), "--k", "1", "--concurrency", "1", "--out", str(tmp_path / "s")]
    static = '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}'
    assert cli.main([*common, "--schedule", static]) == 2
    assert "has no 'num_speculative_tokens_per_batch_size'" in capsys.readouterr().err
    over = ('{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3, '
            '"num_speculative_tokens_per_batch_size": [[1, 1, 4]]}')
    assert cli.main([*common, "--schedule", over]) == 2
    assert "k=4 in [1, 1, 4] is above num_speculative_tokens=2, and vLLM would silently cap it" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_tune_from_a_run_file_measures_the_sweep_it_predicts_from_first(capsys, tmp_path, monkeypatch):
    """`tune RUN --out DIR`: no drafting and the run's drafter at its k, with the run's prompts, settings and
    concurrency; refused before any engine starts for a baseline, a scheduled run or a missing --out."""
    import json

    import specviz.sweep_runner as sweep_runner
    from specviz.files import SAMPLE_RUNS_DIR
    from specviz.runfile import load_run
    from specviz.sweep import SweepError, grid_from_run
    from specviz.sweep_files import SWEEPS_DIR

    run_path = SAMPLE_RUNS_DIR / "showcase" / "ngram-k3-edit-c1.json.gz"
    run = load_run(run_path)
    grid = grid_from_run(run, "p.json", concurrencies=[2, 4], repeats=2)
    assert grid.drafters == [{"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}]
    assert grid.num_speculative_tokens == [3] and grid.concurrencies == [1, 2, 4]  # the run's own c=1 added
    assert (grid.target_model, grid.max_tokens, grid.dtype, grid.repeats) == (
        run.meta.target_model, run.meta.max_tokens, run.meta.dtype, 2)
    assert grid.num_requests == 4 and grid.prompts == "p.json"  # 2 prompts, cycled up to the largest concurrency

    measured = []

    class Measured(Exception):
        pass

    def fake_run_sweep(grid, out, **callbacks):
        measured.append((grid, out))
        raise Measured

    monkeypatch.setattr(sweep_runner, "run_sweep", fake_run_sweep)
    out = tmp_path / "tuned"
    with pytest.raises(Measured):
        cli.main(["tune", str(run_path), "--out", str(out), "--concurrency", "1,2", "--repeats", "1"])
    (grid, folder), = measured
    assert folder == out and grid.concurrencies == [1, 2] and grid.repeats == 1
    prompts = json.loads((out / "showcase-edit.json").read_text(encoding="utf-8"))
    assert prompts == [r.user_message for r in run.requests] and grid.prompts == str(out / "showcase-edit.json")

    (out / "showcase-edit.json").write_text('["another prompt"]')  # another run's prompts of the same name
    assert cli.main(["tune", str(run_path), "--out", str(out)]) == 2
    assert "already holds a sweep from another run's prompts" in capsys.readouterr().err
    assert cli.main(["tune", str(run_path)]) == 2
    assert "give --out" in capsys.readouterr().err
    assert cli.main(["tune", str(SAMPLE_RUNS_DIR / "showcase" / "baseline-edit-c1.json.gz"), "--out",
                     str(tmp_path / "b")]) == 2
    assert "this run has no drafting" in capsys.readouterr().err
    few = run.model_copy(update={"requests": [r.model_copy(update={"steps": r.steps[:2]}) for r in run.requests[:1]]})
    with pytest.raises(SweepError, match=r"drafted (\d+) times over its 1 request\(s\), so a cell of 16 request\(s\)"):
        grid_from_run(few, "p.json")  # one drafted step, cycled to 16 requests: 16, too few
    scheduled = next((SWEEPS_DIR / "smollm2-code" / "confirm" / "ngram_lookup_2-4" / "head-to-head").glob(
        "*/runs/ngram*-c1.json.gz"))
    assert cli.main(["tune", str(scheduled), "--out", str(tmp_path / "s")]) == 2
    assert "k follows the batch size" in capsys.readouterr().err
    assert not (tmp_path / "b").exists() and not (tmp_path / "s").exists()  # refused before writing anything
    assert cli.main(["tune", str(SWEEPS_DIR / "smollm2-code"), "--out", str(tmp_path / "x")]) == 2
    assert "--out and --concurrency are for tuning from a run file" in capsys.readouterr().err
