"""Issue 43 (1, 2, 6, 7): Ctrl-C keeps what finished, no engine outlives specviz, bars count failures,
refusals come before the heavy imports. Process groups here are plain sleeping Pythons (no vLLM): what is
checked is the killing, not the engine."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from run_builders import FakeServer, stream_result
from tqdm import tqdm

import specviz.__main__ as cli
from specviz.files import REPO_DIR as ROOT
from specviz.metrics import summarize
from specviz.runfile import RequestSpecDecodeMetrics
from specviz.serving import local
from specviz.serving.local import LocalServer, live_group_members, start_watchdog
from specviz.serving.recording import INTERRUPTED, _send_all, build_run, interrupted_reason
from specviz.sweep import SweepError, drafter_label
from specviz.sweep_runner import LOCK_FILE, SERVER_GROUP, measuring_lock

# A stand-in for a vLLM group: 'vllm' on its command line, and it ignores SIGTERM as a stuck server would.
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
            "time.sleep(120)")


def _stubborn_group(ignore_sigterm: bool = True) -> subprocess.Popen:
    code = STUBBORN if ignore_sigterm else STUBBORN.replace("signal.SIG_IGN", "signal.SIG_DFL")
    proc = subprocess.Popen([sys.executable, "-c", code, "vllm.entrypoints.openai.api_server"],
                            stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout.readline() == b"up\n"  # its SIGTERM handler is in place
    return proc


def _gone_within(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while live_group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not live_group_members(pgid)


def _cleanup(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_bad_argument_is_refused_before_vllm_torch_or_pandas_is_imported(tmp_path):
    """Before: SpecConfig.parse imported vllm.config (8-20 s) and sweep imported pandas before refusing."""
    model = tmp_path / "model"
    model.mkdir()
    cases = [
        ["record", "--model", str(model), "--spec", '{"method": "nope", "num_speculative_tokens": 3}',
         "--prompts", "builtin:chat", "--out", str(tmp_path / "r.json")],
        ["record", "--model", str(model), "--spec", '{"method": "ngram", "num_speculative_tokens": 3}',
         "--prompts", "builtin:chat", "--concurrency", "0", "--out", str(tmp_path / "r.json")],
        ["record", "--model", str(model), "--spec", '{"method": "ngram", "num_speculative_tokens": 3}',
         "--prompts", str(tmp_path / "missing.json"), "--out", str(tmp_path / "r.json")],
        ["sweep", "--model", str(model), "--drafter", '{"method": "ngram"}', "--concurrency", "0",
         "--out", str(tmp_path / "sw")],
    ]
    probe = ("import json, sys; import specviz.__main__ as m; code = m.main(json.loads(sys.argv[1])); "
             "print(json.dumps([code, [n for n in ('vllm', 'torch', 'pandas', 'transformers') if n in sys.modules]]))")
    for argv in cases:
        done = subprocess.run([sys.executable, "-c", probe, json.dumps(argv)], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        code, heavy = json.loads(done.stdout.strip().splitlines()[-1])
        assert code == 2, (argv, done.stderr)
        assert heavy == [], (argv, heavy)
        assert "specviz:" in done.stderr


def test_vllms_speculative_methods_and_fields_read_from_its_source_match_an_import():
    from specviz import vllm_methods

    source = vllm_methods._speculative_source()
    if source is None:
        pytest.skip("vLLM is not installed here")
    import dataclasses

    from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod

    assert vllm_methods._literal_from_source(source, "SpeculativeMethod") == tuple(
        dict.fromkeys(vllm_methods._literal_values(SpeculativeMethod)))
    assert vllm_methods._class_fields_from_source(source, "SpeculativeConfig") == frozenset(
        f.name for f in dataclasses.fields(SpeculativeConfig))


def test_the_lookup_label_names_the_bound_vllm_fills_in():
    """vLLM 0.32 gives a missing prompt_lookup bound the other's value; before, the label read 'ngram lookup ?-4'."""
    assert drafter_label({"method": "ngram", "prompt_lookup_max": 4}) == "ngram lookup 4-4"
    assert drafter_label({"method": "ngram", "prompt_lookup_min": 3}) == "ngram lookup 3-3"
    assert drafter_label({"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}) == "ngram lookup 2-4"


def test_an_untraced_run_that_died_reports_the_acceptance_of_the_requests_that_finished():
    """Before: mean_acceptance_length was null (no counters after the death, no steps without the tracer)."""
    class Untraced(FakeServer):
        trace = False

    finished = [stream_result(f"r-{i}", [5, 6, 7, 8]) for i in range(2)]
    for res, hist in zip(finished, ([1, 2, 0, 1], [0, 0, 1, 1])):  # k=3: steps that accepted exactly j drafts
        accepted = sum(j * n for j, n in enumerate(hist))
        res.spec_decode_metrics = RequestSpecDecodeMetrics(
            mean_acceptance_length=1 + accepted / sum(hist), draft_acceptance_rate=accepted / (3 * sum(hist)),
            acceptance_histogram=hist, num_spec_steps=sum(hist), num_accepted_draft_tokens=accepted,
            num_draft_tokens=3 * sum(hist), num_spec_tokens=3).model_dump()
    died = stream_result("r-2", [5], error="RemoteProtocolError: peer closed connection")
    run = build_run(Untraced(), [*finished, died], {}, run_id="r", prompt_set="unit", concurrency=2, max_tokens=4,
                    sampling={}, incomplete_reason="the vLLM server died during the run")
    s = summarize(run)
    assert not s.complete and s.vllm_counters is None
    assert (s.num_drafts, s.num_accepted_tokens, s.num_draft_tokens) == (6, 5 + 5, 18)
    assert s.num_accepted_tokens_per_pos == [2 + 0 + 1 + 1 + 1, 0 + 1 + 1 + 1, 1 + 1]
    assert s.mean_acceptance_length == pytest.approx(1 + 10 / 6)


def test_the_record_bar_counts_a_failed_request_as_a_failure_not_as_done():
    out = io.StringIO()
    bar = tqdm(total=3, file=out)
    done = cli.request_progress(bar)
    done(stream_result("a", [1, 2]))
    done(stream_result("b", [], error="HTTP 400: prompt too long"))
    assert bar.n == 1 and "failed=1" in out.getvalue()


def test_a_sweep_refused_before_measuring_shows_no_progress_bar(capsys, tmp_path):
    """Before: a resume refused for a changed grid drew 'sweep: 100% 6/6' from the folder's earlier runs."""
    def refuse(callbacks):
        raise SweepError("holds a sweep of another grid")

    assert cli._with_progress(refuse, tmp_path, total=6) == 1
    err = capsys.readouterr().err
    assert "another grid" in err and "sweep:" not in err and "%" not in err


def test_a_ctrl_c_while_requests_are_in_flight_stops_sending_and_keeps_what_finished():
    started, finished = [], []
    interrupted = threading.Event()

    def one(i):  # as record's: nothing is sent once interrupted
        if interrupted.is_set():
            return None
        started.append(i)
        if i < 2:
            finished.append(i)
            return stream_result(f"r-{i}", [1, 2, 3])
        while not interrupted.is_set():  # in flight: stops at its next chunk once interrupted
            time.sleep(0.01)
        return stream_result(f"r-{i}", [1], error="cancelled: ...")

    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    sent = _send_all(one, 10, 3, interrupted)
    assert time.monotonic() - t0 < 5
    assert interrupted.is_set()
    assert [r.request_id for r in sent if r is not None and r.error is None] == ["r-0", "r-1"]
    assert sum(r is None for r in sent) == 5  # never sent (3 were in flight)
    reason = interrupted_reason([r for r in sent if r is not None], 10)
    assert reason.startswith(INTERRUPTED) and "2 of 10 requests finished" in reason


def _server_on(proc: subprocess.Popen) -> LocalServer:
    server = LocalServer(model="unused")
    server.proc = proc
    local._live_servers.add(server)
    return server


def test_a_second_ctrl_c_while_stopping_kills_the_group_at_once_and_keeps_it_listed_until_gone():
    """Before: the KeyboardInterrupt from stop()'s wait skipped the SIGKILL, and the server had already left the
    live list, so the exit hook would not retry: a server that ignores SIGTERM was left running."""
    proc = _stubborn_group()
    server = _server_on(proc)
    folder = server.workdir
    try:
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            server.stop(grace_s=30)
        assert time.monotonic() - t0 < 10  # not the 30 s grace
        assert _gone_within(proc.pid, 5)
        assert server not in local.live_servers()
        assert not folder.exists()  # an interrupt is not a failure: its temp folder goes
    finally:
        _cleanup(proc)


def test_a_server_that_died_by_itself_keeps_its_temp_folder_and_says_where(capsys):
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    proc.wait()
    server = _server_on(proc)
    server.log_path.write_text("Traceback ...\n")
    server.stop()
    assert server.workdir.exists() and str(server.log_path) in capsys.readouterr().err
    server.workdir.joinpath("server.log").unlink()
    server.workdir.rmdir()


def test_no_server_outlives_the_process_that_started_it_even_a_sigkilled_one():
    """The watchdog SIGKILLs the server's whole group when its starter dies without stopping it."""
    group = _stubborn_group()
    starter = subprocess.Popen([sys.executable, "-c",
                                "import sys, time; from specviz.serving.local import start_watchdog; "
                                f"start_watchdog({group.pid}); print('armed', flush=True); time.sleep(120)"],
                               cwd=ROOT, stdout=subprocess.PIPE)
    try:
        assert starter.stdout.readline() == b"armed\n"
        starter.kill()  # SIGKILL: no atexit, no finally
        starter.wait()
        assert _gone_within(group.pid, 10)
    finally:
        _cleanup(group)
        starter.kill()


def test_a_stopped_watchdog_leaves_the_group_alone():
    group = _stubborn_group()
    try:
        local.stop_watchdog(start_watchdog(group.pid))
        time.sleep(0.3)
        assert live_group_members(group.pid)
    finally:
        _cleanup(group)


def test_a_resume_stops_the_engine_group_a_dead_holders_lock_names(tmp_path):
    group = _stubborn_group(ignore_sigterm=False)  # one that ignores it takes the 10 s grace, then SIGKILL
    try:
        (tmp_path / LOCK_FILE).write_text(f"specviz pid 999999 on here, since then\n{SERVER_GROUP} {group.pid}\n")
        said = []
        with measuring_lock(tmp_path, on_leftover=said.append):
            assert _gone_within(group.pid, 1)  # before anything is measured
        assert said and str(group.pid) in said[0]
        assert (tmp_path / LOCK_FILE).read_text() == ""  # released
    finally:
        _cleanup(group)


def test_a_lock_names_the_server_being_measured(tmp_path):
    class Started:
        pgid = 4321

    with measuring_lock(tmp_path) as lock:
        lock.note_server(Started())
        text = (tmp_path / LOCK_FILE).read_text()
        assert text.startswith(f"specviz pid {os.getpid()}") and f"{SERVER_GROUP} 4321\n" in text


def test_a_lock_naming_a_group_that_is_not_vllm_stops_nothing(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        (tmp_path / LOCK_FILE).write_text(f"specviz pid 999999\n{SERVER_GROUP} {other.pid}\n")
        with measuring_lock(tmp_path):
            pass
        assert other.poll() is None
    finally:
        _cleanup(other)
