"""The benchmarks without a server: drafter_acceptance --rescore, the shared report, schedule_cost's arms.
(schedule_cost.py end to end on a tiny random model is live: tests/live/test_live_benchmarks.py.)"""
import importlib.util
import json

import pytest
from run_builders import make_run

from specviz.files import REPO_DIR
from specviz.runfile import save_run

BENCHMARK = REPO_DIR / "benchmarks" / "drafter_acceptance.py"


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


def _schedule_cost(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARK.parent))  # it imports tracer_overhead as the scripts do
    spec = importlib.util.spec_from_file_location("schedule_cost", BENCHMARK.parent / "schedule_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_schedule_cost_arms_cross_the_boundary_at_half_the_concurrency(monkeypatch):
    module = _schedule_cost(monkeypatch)
    assert module.boundary_schedule(4) == [[1, 2, 3], [3, 1024, 1]]
    assert module.boundary_schedule(5) == [[1, 2, 3], [3, 1024, 1]]
    with pytest.raises(SystemExit, match="concurrency 2 or more"):
        module.boundary_schedule(1)
    zero = module.arms("zero", 4)
    assert list(zero) == ["all-zero", "none"] and zero["none"] is None
    assert zero["all-zero"].num_speculative_tokens == 3
    assert {zero["all-zero"].k_at(b) for b in (1, 2, 4, 1024, 5000)} == {0}  # drafts nothing at any batch size
    boundary = module.arms("boundary", 4)
    assert [boundary["schedule"].k_at(b) for b in (1, 2, 3, 4)] == [3, 3, 1, 1]
    assert (boundary["k=1"].k, boundary["k=3"].k) == (1, 3) and boundary["k=1"].schedule is None
    same = module.arms("same", 4)
    assert same["static"].schedule is None and same["static"].k == 3
    assert {same["schedule"].k_at(b) for b in (1, 4, 1024)} == {3} and same["schedule"].schedule  # a schedule, k=3 throughout


def test_schedule_cost_trace_both_pairs_every_arm_with_its_traced_twin(monkeypatch):
    module = _schedule_cost(monkeypatch)
    zero = module.arms("zero", 4)
    assert list(module.with_trace(zero, "off")) == ["all-zero", "none"]
    assert list(module.with_trace(zero, "on")) == ["all-zero traced", "none traced"]
    both = module.with_trace(zero, "both")
    assert list(both) == ["all-zero", "all-zero traced", "none", "none traced"]
    assert both["all-zero traced"] is zero["all-zero"] and both["none traced"] is None
    assert module.ratio_pairs("zero", list(zero), "off") == [("all-zero", "none")]
    assert module.ratio_pairs("zero", list(zero), "on") == [("all-zero traced", "none traced")]
    assert module.ratio_pairs("zero", list(zero), "both") == [
        ("all-zero", "none"), ("all-zero traced", "none traced"),  # what the schedule costs, each way
        ("all-zero traced", "all-zero"), ("none traced", "none")]  # what the tracer costs, per arm


def test_shared_report_prints_each_requested_ratio_and_by_default_the_first_two_arms(monkeypatch, capsys):
    from types import SimpleNamespace

    monkeypatch.syspath_prepend(str(BENCHMARK.parent))  # the scripts import it as a top-level module
    import tracer_overhead

    monkeypatch.setattr(tracer_overhead, "local_device", lambda: ("cpu", "test cpu"))
    monkeypatch.setattr(tracer_overhead, "vllm_version", lambda: "0.32.0")
    args = SimpleNamespace(num_requests=8, max_tokens=64, concurrency=4, rounds=2, prompt_set="code")
    rounds = {"a": [[90.0], [90.0]], "b": [[100.0], [100.0]], "c": [[45.0], [45.0]]}
    labels = {"a": "arm a", "b": "arm b", "c": "arm c"}
    tracer_overhead.report(rounds, labels, "untraced", args, target="tiny float32", drafting="ngram",
                           ratios=[("a", "b"), ("a", "c")])
    out = capsys.readouterr().out
    assert "tiny float32, ngram, untraced, prompt set 'code' cycled to 8 requests, 64 output tokens, " \
           "concurrency 4, cpu (test cpu), vLLM 0.32.0" in out
    assert "ratio a / b: 0.900, 90% interval 0.900-0.900 over 2 rounds" in out
    assert "ratio a / c: 2.000, 90% interval 2.000-2.000 over 2 rounds" in out
    tracer_overhead.report(rounds, labels, "untraced", args)
    out = capsys.readouterr().out
    assert "SmolLM2-135M bf16, ngram k=3 (lookup 2-4), untraced" in out  # the two-server benchmarks' default
    assert "ratio a / b: 0.900" in out and "ratio a / c" not in out


def test_print_arms_reports_one_run_without_a_spread(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARK.parent))
    import tracer_overhead

    tracer_overhead.print_arms({"a": [[90.0]], "b": [[100.0, 104.0]]}, {"a": "arm a", "b": "arm b"})
    assert capsys.readouterr().out.splitlines() == ["arm a: 90.0 tokens/s (n=1)", "arm b: 102.0 tokens/s (sd 2.8, n=2)"]
