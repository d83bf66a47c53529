"""Unit, fuzz-style: random mutations of real run files (sample_runs/) are refused with a reason or drawn, never a
traceback, by `specviz check` and by the builders the recorded-run view calls (seeded: the same mutants every run).

Half the mutants also claim `meta.invalid_reason`, which once switched every invariant off (issue 43: a step with
more accepted than drafted tokens then crashed check and the app in metrics.count_acceptance). The app's own page
over a few such mutants: tests/app/test_app_recorded_view.py.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import json
import random
from pathlib import Path

import pytest
from run_builders import make_run, make_step

from specviz import showcase
from specviz.__main__ import main
from specviz.charts import timeline
from specviz.charts.acceptance import acceptance_per_position
from specviz.divergence import compare_runs
from specviz.headline import headline
from specviz.metrics import count_acceptance, step_figures, summarize
from specviz.platforms import pitfall_hints
from specviz.race import find_baseline
from specviz.runfile import SAMPLE_RUNS_DIR, Request, Run, RunFileError, draft_batches, load_run
from specviz.textbook import TextbookError, run_vs_formula
from specviz.untraced_steps import has_step_arrays, place_steps
from specviz.view import render

SEED = 43
NUM_MUTANTS = 80
# Small files of each kind: speculative and baseline, code and chat, concurrency 1 and 4; traced and untraced.
SAMPLES = sorted(SAMPLE_RUNS_DIR.glob("smollm2-*-code-c*.json.gz")) + [SAMPLE_RUNS_DIR / "showcase/ngram-k3-edit-c1.json.gz"]
ODD_VALUES = [None, True, -1, 0, 1, 2, 7, 1000, 10**6, 1.5, float("inf"), "", "x", [], [0], {}, {"a": 1}]


def _paths(node, here=()):
    """Every (path, value) in a JSON document, containers included."""
    yield here, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*here, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:40]):  # the first entries of long lists: enough places to break
            yield from _paths(v, (*here, i))


def _mutate(doc: dict, rng: random.Random) -> dict:
    doc = copy.deepcopy(doc)
    places = [p for p, _ in _paths(doc) if p]
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(places)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key, what = path[-1], rng.random()
        try:
            value = parent[key]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation moved it
        if what < 0.45:
            parent[key] = rng.choice(ODD_VALUES)
        elif what < 0.6 and isinstance(value, int) and not isinstance(value, bool):
            parent[key] = value + rng.choice([-2, -1, 1, 2, 5])
        elif what < 0.7 and isinstance(value, list) and value:
            value.pop(rng.randrange(len(value)))
        elif what < 0.8 and isinstance(value, list) and value:
            value.insert(rng.randrange(len(value) + 1), copy.deepcopy(rng.choice(value)))
        elif what < 0.9 and isinstance(parent, dict):
            parent.pop(key)
        elif isinstance(parent, list) and len(parent) > 1:
            j = rng.randrange(len(parent))
            parent[key], parent[j] = parent[j], parent[key]
    if rng.random() < 0.5 and isinstance(doc.get("meta"), dict):
        doc["meta"]["invalid_reason"] = "x"  # the claim that once switched the invariants off
    return doc


def _mutants() -> list[tuple[str, bytes]]:
    rng = random.Random(SEED)
    docs = [(p.name, json.loads(gzip.decompress(p.read_bytes()))) for p in SAMPLES]
    out = []
    for i in range(NUM_MUTANTS):
        name, doc = docs[i % len(docs)]
        out.append((f"{name}#{i}", json.dumps(_mutate(doc, rng)).encode()))
    return out


def draw_everything(run: Run, against: list[tuple[str, Run]]) -> None:
    """What the recorded-run view (ui.recorded_run_view, ui_race.recorded_run_with_race) computes, without Streamlit."""
    summarize(run)
    step_figures(run)
    pitfall_hints(run)
    draft_batches(run.requests)
    pair = find_baseline(run, against) if run.meta.spec is not None and not run.meta.invalid_reason else None
    if pair is not None:
        headline(run, pair.baseline)
        compare_runs(pair.baseline, run)
    with contextlib.suppress(TextbookError):  # a run the formula cannot meet says so
        run_vs_formula(run)
    run.requests and showcase.opening_request(run)
    for i, req in enumerate(run.requests):
        _draw_request(req, run, chart=i == 0)  # plotly takes a while to build a figure: one per run


def _draw_request(req: Request, run: Run, chart: bool) -> None:
    acc = count_acceptance(req.steps)
    if acc.num_drafts and chart:
        acceptance_per_position(acc, "caption")
    if not req.steps and has_step_arrays(req):
        placed = place_steps(req, run.meta.num_speculative_tokens, run.meta.method)
        render.untraced_output_html(placed.steps)
        render.untraced_steps_html(placed.steps)
        return
    render.output_html(req)
    render.output_end(req)
    render.chunks_html(req.stream_chunks)
    if req.steps:
        timeline.timeline_table(req)
        timeline.selected_steps({"selection": {"steps": {"start": [0.2, 3.7]}}}, len(req.steps))
        render.steps_html(req.steps[:20])
        showcase.example_step(req)
        for step in req.steps[:20]:
            render.step_summary(step)
            render.step_html(step, show_k=True, marks={0: "here"})


@pytest.fixture(scope="module")
def samples() -> list[tuple[str, Run]]:
    return [(p.name, load_run(p)) for p in SAMPLES]


def test_the_samples_are_small_and_draw(samples):
    for _, run in samples:
        draw_everything(run, samples)


def test_a_mutated_run_file_is_refused_with_a_reason_or_drawn_never_a_traceback(tmp_path, samples, capsys):
    outcomes = {"refused": 0, "read": 0, "read as invalid": 0}
    for name, data in _mutants():
        try:
            run = load_run(data)
        except RunFileError as e:
            assert str(e).startswith("<uploaded>: "), (name, e)
            outcomes["refused"] += 1
        else:
            outcomes["read as invalid" if run.meta.invalid_reason else "read"] += 1
            draw_everything(run, samples)
        path = tmp_path / "mutant.json"
        path.write_bytes(data)
        assert main(["check", str(path)]) in (0, 1, 2, 3), name
        capsys.readouterr()
    assert all(outcomes.values()), outcomes  # the mutations reach every path: refused, valid and invalid


def test_a_claimed_invalid_reason_does_not_switch_the_invariants_off(tmp_path, capsys):
    # The repro's shape: a step that accepted 7 of its 2 drafts, in a file whose meta says invalid_reason "x".
    step = make_step(2, [80, 288], [80, 288, 2179])
    run = make_run([Request(request_id="r0", prompt="p", output_token_ids=[5, 80, 288, 2179], output_text="x",
                            start_time_s=0.0, finish_reason="length",
                            steps=[make_step(1, [], [5]), step])], k=2)
    doc = json.loads(run.model_dump_json())
    doc["meta"]["invalid_reason"] = "x"
    doc["requests"][0]["steps"][1]["num_accepted"] = 7
    path = tmp_path / "lying.json"
    path.write_text(json.dumps(doc))
    read = load_run(path)
    assert "num_accepted=7 > number of drafts 2" in read.meta.invalid_reason
    assert "the file's own reason: x" in read.meta.invalid_reason
    draw_everything(read, [])
    assert summarize(read).num_accepted_tokens == 2  # a step accepts at most what it drafted
    assert main(["check", str(path)]) == 1
    assert "INVALID run: the reader finds it breaks an invariant at requests.0.steps.1" in capsys.readouterr().err
    # Without the claim the same file is refused, as before.
    doc["meta"]["invalid_reason"] = None
    path.write_text(json.dumps(doc))
    with pytest.raises(RunFileError, match="num_accepted=7 > number of drafts 2"):
        load_run(path)


def test_the_repro_file_reads_as_invalid_with_the_readers_reason_and_check_exits_1(capsys):
    repro = Path(__file__).parent.parent / "fixtures/invalid-reason-bypass.json.gz"  # the file, as filed
    run = load_run(repro)
    assert "num_accepted=7 > number of drafts 2" in run.meta.invalid_reason
    draw_everything(run, [])
    assert main(["check", str(repro)]) == 1
    capsys.readouterr()
