"""benchmarks/schedule_cost.py end to end on a tiny random model (live: starts vLLM servers)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_schedule_cost(tmp_path: Path, *options: str) -> str:
    """benchmarks/schedule_cost.py on a tiny random Llama (2 layers, the demo model's tokenizer); its stdout."""
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_llama

    target = build_tiny_llama(tmp_path / "target", num_hidden_layers=2, tokenizer_from=ensure_demo_model())
    root = BENCHMARKS.parent
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "schedule_cost.py"), "--model", str(target), "--dtype", "float32", *options],
        cwd=root, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.live
def test_schedule_cost_zero_part_runs_end_to_end_on_a_tiny_model(tmp_path):
    """The zero part (an all-zero schedule against no speculative config), one round of two runs per server.
    The boundary part's arms are unit tests (tests/unit/test_benchmarks.py); they run on the same machinery as
    the zero part here and the same part below, so starting its three engines too would test nothing new."""
    out = run_schedule_cost(tmp_path, "--parts", "zero", "--rounds", "1", "--runs-per-start", "2",
                            "--num-requests", "6", "--max-tokens", "16", "--concurrency", "4")
    assert "target float32, ngram lookup 2-4 k=3 with an all-zero schedule vs no speculative config, untraced" in out
    assert "concurrency 4, cpu" in out and "vLLM 0." in out  # provenance
    for ratio in ("ratio all-zero / none: ", "time per output token all-zero / none: "):
        assert ratio in out, out
    assert re.search(r"all-zero +drafted 0 tokens in 0 drafts \(no draft\); vLLM's counters, 2 of 2 runs", out), out


@pytest.mark.live
def test_schedule_cost_same_part_traced_and_untraced_on_a_tiny_model(tmp_path):
    """--parts same --trace both: a k=3-everywhere schedule against static k=3, each untraced and traced."""
    out = run_schedule_cost(tmp_path, "--parts", "same", "--trace", "both", "--prompts", "builtin:chat",
                            "--rounds", "1", "--runs-per-start", "1", "--num-requests", "4", "--max-tokens", "16",
                            "--concurrency", "2")
    assert ("target float32, ngram lookup 2-4 k=3 with the schedule [[1, 1024, 3]] vs static k=3, "
            "untraced and traced (specviz tracer), prompt set 'chat'") in out
    for ratio in ("ratio schedule / static: ", "ratio schedule traced / static traced: ",
                  "ratio schedule traced / schedule: ", "ratio static traced / static: "):
        assert ratio in out, out
    for arm in ("schedule", "schedule traced", "static", "static traced"):
        assert re.search(rf"^{arm} +drafted [1-9]\d* tokens", out, re.M), out  # every arm drafts, traced or not
