"""benchmarks/schedule_cost.py end to end on a tiny random model (live: starts vLLM servers)."""

from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.live
def test_schedule_cost_runs_end_to_end_on_a_tiny_model(tmp_path):
    """benchmarks/schedule_cost.py, both parts, one round of two runs per server, on a tiny random Llama."""
    import os
    import subprocess
    import sys

    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_llama

    target = build_tiny_llama(tmp_path / "target", num_hidden_layers=2, tokenizer_from=ensure_demo_model())
    root = BENCHMARKS.parent
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "schedule_cost.py"), "--model", str(target), "--dtype", "float32",
         "--rounds", "1", "--runs-per-start", "2", "--num-requests", "6", "--max-tokens", "16", "--concurrency", "4"],
        cwd=root, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "target float32, ngram lookup 2-4 k=3 with an all-zero schedule vs no speculative config, untraced" in out
    assert "concurrency 4, cpu" in out and "vLLM 0." in out  # provenance
    for ratio in ("ratio all-zero / none: ", "ratio schedule / k=1: ", "ratio schedule / k=3: ",
                  "time per output token all-zero / none: ", "time per output token schedule / k=3: "):
        assert ratio in out, out
    assert "all-zero  drafted 0 tokens in 0 drafts (no draft); vLLM's counters, 2 of 2 runs" in out
    assert "k=3       drafted " in out and "k=3       drafted 0 " not in out  # the static arm drafts
