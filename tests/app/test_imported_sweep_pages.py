"""AppTest: a sweep imported from vLLM's own `bench sweep serve` folder (the real fixture) on Throughput and Tuning,
listed like a recorded sweep or opened from its path; the frontier chart on the Throughput page."""

from __future__ import annotations

from pathlib import Path

from page_helpers import chart_figure, open_page

from specviz import sweep_files, ui_imported
from specviz.sweep_files import save_sweep
from specviz.vllm_import import import_into

FIXTURE = Path(__file__).parent.parent / "fixtures" / "vllm_sweep_tiny_ngram"


def _listed(tmp_path, monkeypatch) -> Path:
    out = tmp_path / "sweeps" / "tiny-vllm"
    sweep, _ = import_into([FIXTURE], out)
    path = save_sweep(sweep, out / "sweep.json")
    monkeypatch.setattr(sweep_files, "list_sweep_files", lambda: [path])
    return path


def test_an_imported_sweep_draws_on_throughput_with_its_frontier_and_acceptance_per_position(tmp_path, monkeypatch):
    _listed(tmp_path, monkeypatch)
    at = open_page("app_pages/throughput.py")
    assert at.selectbox(key="tp_sweep").value == "tiny-vllm"
    frontier = chart_figure(at, "tp_chart_frontier_a")
    names = [t["name"] for t in frontier["data"]]
    assert "Pareto frontier" in names and len(names) == 4  # baseline, ngram k=2, k=4, the frontier
    positions = chart_figure(at, "tp_chart_positions_a")
    assert positions["data"] and "vLLM 0.32.0" in positions["layout"]["title"]["text"]
    assert any("Imported from vllm bench sweep serve" in c.value for c in at.caption)


def test_an_imported_sweep_tunes_exports_and_says_what_vllm_did_not_save(tmp_path, monkeypatch):
    _listed(tmp_path, monkeypatch)
    at = open_page("app_pages/tuning.py")
    assert any(c.value.startswith("vllm serve") for c in at.code)  # the per-batch-size export
    infos = [i.value for i in at.info]
    assert any("Imported from vLLM's own benchmark" in i and "engine step time" in i for i in infos)
    assert any("--confirm-prompts" in i for i in infos)  # `specviz tune` needs a specviz prompt set
    best = [d for d in at.dataframe if "best measured k" in d.value.columns]
    assert len(best) == 1 and list(best[0].value["concurrency"]) == [1, 4]


def test_a_vllm_folder_typed_on_the_page_opens_as_an_imported_sweep(tmp_path, monkeypatch):
    monkeypatch.setattr(ui_imported, "IMPORTED_DIR", tmp_path / "imported")
    at = open_page("app_pages/throughput.py")
    at.text_input(key="tp_open").set_value(str(FIXTURE)).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="tp_sweep").value == "opened: vllm_sweep_tiny_ngram"
    assert chart_figure(at, "tp_chart_frontier_a")["data"]
    at.text_input(key="tp_open").set_value(str(tmp_path / "nowhere")).run()
    assert any("no such folder" in e.value for e in at.error)
