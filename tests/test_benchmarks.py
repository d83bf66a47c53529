"""benchmarks/drafter_acceptance.py --rescore: summary.json again from saved runs, no server."""
import importlib.util
import json
from pathlib import Path

import pytest
from conftest import make_run

from specviz.runfile import save_run

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "drafter_acceptance.py"


@pytest.fixture
def benchmark():
    spec = importlib.util.spec_from_file_location("drafter_acceptance", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rescore_rebuilds_the_summary_from_saved_runs_keeping_order_and_provenance(tmp_path, benchmark, weather_run):
    save_run(weather_run, tmp_path / "b-ngram.json.gz")
    untraced = [r.model_copy(update={"steps": []}) for r in weather_run.requests]
    save_run(make_run(untraced, k=None), tmp_path / "a-baseline.json.gz")
    old = {"runs": {"b-ngram": {"stale": True}}, "provenance": {"device_name": "AMD EPYC"}}
    (tmp_path / "summary.json").write_text(json.dumps(old))
    assert benchmark.main(["--rescore", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary["runs"]) == ["b-ngram", "a-baseline"]  # old rows first, in their order
    assert summary["provenance"] == old["provenance"]
    ngram, baseline = summary["runs"]["b-ngram"], summary["runs"]["a-baseline"]
    assert ngram["mean_acceptance_length"] == pytest.approx(1 + 5 / 2)
    low, high = ngram["mean_acceptance_length_90"]
    assert low == pytest.approx(3.5) and high == pytest.approx(3.5)  # one request: nothing to resample
    assert baseline["method"] == "none" and baseline["mean_acceptance_length_90"] is None


def test_rescore_refuses_a_folder_without_runs(tmp_path, benchmark):
    with pytest.raises(SystemExit, match="no saved runs"):
        benchmark.main(["--rescore", "--out", str(tmp_path)])


def test_tracer_overhead_interval_resamples_whole_rounds():
    spec = importlib.util.spec_from_file_location("tracer_overhead", BENCHMARK.parent / "tracer_overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ratio, low, high = module.paired_ratio_interval([[97, 99], [94, 96]], [[100, 100], [100, 98]])
    assert ratio == pytest.approx((98 + 95) / (100 + 99))
    assert low == pytest.approx(95 / 99) and high == pytest.approx(98 / 100)  # the rounds alone, at the ends
    same = module.paired_ratio_interval([[90.0]] * 4, [[100.0]] * 4)
    assert same == pytest.approx((0.9, 0.9, 0.9))  # identical rounds: a zero-width interval
