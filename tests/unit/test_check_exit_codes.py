"""Unit: `specviz check` tells an incomplete run from a complete one by its exit code (README, "The command line")."""

from __future__ import annotations

import pytest
from run_builders import make_run, make_step

from specviz.__main__ import CHECK_INCOMPLETE, main
from specviz.runfile import Request, save_run


def _run(**meta):
    req = Request(request_id="r0", prompt="p", output_token_ids=[5, 1, 2], output_text="x", start_time_s=0.0,
                  end_time_s=1.0, finish_reason="length", steps=[make_step(1, [], [5]), make_step(2, [1, 2], [1, 2])])
    return make_run([req], k=2, **meta)


def test_check_exits_3_for_an_incomplete_run_with_its_reason_and_0_for_a_complete_one(tmp_path, capsys):
    assert CHECK_INCOMPLETE == 3
    complete = save_run(_run(), tmp_path / "complete.json.gz")
    assert main(["check", str(complete)]) == 0
    incomplete = save_run(_run(complete=False, incomplete_reason="the engine died after 1 of 2 requests"),
                          tmp_path / "incomplete.json.gz")
    capsys.readouterr()
    assert main(["check", str(incomplete)]) == 3
    captured = capsys.readouterr()
    assert '"complete": false' in captured.out  # the summary is still printed
    assert "INCOMPLETE run: the engine died after 1 of 2 requests" in captured.err


def test_an_unreadable_file_still_exits_2_and_an_invalid_one_1(tmp_path, capsys):
    (tmp_path / "junk.json").write_text("not json")
    assert main(["check", str(tmp_path / "junk.json")]) == 2
    invalid = _run(complete=False, incomplete_reason="stopped", invalid_reason="the tracer lost a step")
    assert main(["check", str(save_run(invalid, tmp_path / "invalid.json.gz"))]) == 1  # invalid outranks incomplete
    assert "INVALID run" in capsys.readouterr().err


def test_checks_help_names_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "3: valid but incomplete" in capsys.readouterr().out
