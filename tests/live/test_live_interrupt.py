"""Issue 43 live: a Ctrl-C of `record` keeps the finished requests and stops its engine; a SIGKILLed sweep
leaves no engine behind and its resume finds none. Real `python -m specviz` processes on a tiny model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from specviz.files import REPO_DIR as ROOT
from specviz.serving.local import live_group_members
from specviz.serving.trace_reader import TRACE_FILE_ENV


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    from specviz.demo_model import ensure_demo_model
    from specviz.testing.tiny_models import build_tiny_llama

    return str(build_tiny_llama(tmp_path_factory.mktemp("tiny") / "target", num_hidden_layers=2,
                                tokenizer_from=ensure_demo_model()))


def _engines_of(model: str) -> dict[int, int]:
    """pid -> process group of every running process serving `model` (the API server and its EngineCore)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            cmdline = (stat.parent / "cmdline").read_bytes()
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if model.encode() in cmdline and fields[0] != "Z" and b"specviz" not in cmdline.split(b"\0")[1:3]:
            found[int(stat.parent.name)] = int(fields[2])
    return found


def _groups_of(model: str) -> set[int]:
    return set(_engines_of(model).values())


class Stderr:
    """A child's stderr read by character in a thread (tqdm redraws its line with \\r)."""

    def __init__(self, proc: subprocess.Popen):
        self.text = ""
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc) -> None:
        while char := proc.stderr.read(1):
            self.text += char

    def wait_for(self, pattern: str, timeout_s: float, proc: subprocess.Popen) -> re.Match:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if found := re.search(pattern, self.text):
                return found
            assert proc.poll() is None, f"specviz ended (code {proc.returncode}):\n{self.text[-3000:]}"
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} within {timeout_s} s:\n{self.text[-3000:]}")


def _specviz(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "specviz", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_ctrl_c_of_record_saves_the_finished_requests_marked_interrupted_and_stops_the_engine(tiny, tmp_path):
    from specviz.runfile import load_run

    out = tmp_path / "run.json.gz"
    n = 40
    proc = _specviz("record", "--model", tiny, "--spec", '{"method": "ngram", "num_speculative_tokens": 3}',
                    "--prompts", "builtin:chat", "--num-prompts", str(n), "--concurrency", "2", "--max-tokens", "48",
                    "--out", str(out))
    err = Stderr(proc)
    try:
        err.wait_for(r"vLLM ready", 600, proc)
        err.wait_for(rf"\b([2-9]|[1-3]\d)/{n}\b", 300, proc)  # at least 2 requests finished
        groups = _groups_of(tiny)
        assert groups, "the engine should be running"
        workdirs = set()
        for pid in _engines_of(tiny):
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            workdirs |= {Path(e.decode().split("=", 1)[1]).parent for e in env
                         if e.startswith(TRACE_FILE_ENV.encode() + b"=")}
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal sends SIGINT to the foreground group
        proc.wait(timeout=120)
        err.thread.join(timeout=10)
        stdout = proc.stdout.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err.text[-3000:]
    assert "run saved INCOMPLETE" in err.text and "interrupted" in err.text
    assert json.loads(stdout.strip().splitlines()[-1])["out"] == str(out)
    run = load_run(out)
    assert not run.meta.complete and run.meta.incomplete_reason.startswith("interrupted")
    finished = [r for r in run.requests if r.error is None and r.finish_reason is not None]
    assert len(finished) >= 2 and len(finished) < n
    assert all(r.steps and len(r.output_token_ids) == 48 for r in finished)
    for pgid in groups:
        assert not live_group_members(pgid), "the engine outlived the interrupted record"
    assert workdirs and not any(d.exists() for d in workdirs), "the server's temp folder was left behind"


def test_a_sigkilled_sweep_leaves_no_engine_and_its_resume_finds_none(tiny, tmp_path):
    from specviz.sweep_files import load_sweep
    from specviz.sweep_runner import LOCK_FILE, SERVER_GROUP, measuring_lock

    out = tmp_path / "sweep"
    proc = _specviz("sweep", "--model", tiny, "--drafter", '{"method": "ngram", "prompt_lookup_max": 2}', "--k", "1",
                    "--concurrency", "1", "--num-requests", "2", "--max-tokens", "8", "--out", str(out))
    err = Stderr(proc)
    try:
        # Killed while its second engine runs (named in the lock), after the first cell was saved.
        deadline = time.monotonic() + 900
        first_group = killed_group = None
        while killed_group is None:
            assert time.monotonic() < deadline, err.text[-3000:]
            assert proc.poll() is None, err.text[-3000:]
            lock = (out / LOCK_FILE).read_text() if (out / LOCK_FILE).exists() else ""
            named = [int(line.split()[-1]) for line in lock.splitlines() if line.startswith(SERVER_GROUP)]
            if named and first_group is None:
                first_group = named[0]
            if named and named[0] != first_group and live_group_members(named[0]):
                killed_group = named[0]
            time.sleep(0.2)
        proc.kill()  # SIGKILL: no handler, no finally, no exit hook
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 15
    while live_group_members(killed_group) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not live_group_members(killed_group), "the sweep's engine outlived it"
    assert not _groups_of(tiny)
    assert len(load_sweep(out / "sweep.json").cells) == 1  # the finished cell is kept
    said = []
    with measuring_lock(out, on_leftover=said.append):  # what a resume does first
        pass
    assert said == []
