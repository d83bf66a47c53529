"""Kill a live vLLM engine mid-run, for the live engine-failure tests; a separate process.

    killer = start_killer(model, kill="engine-core", steps=40, max_tokens=1500, num_requests=1)
    ... run the requests (the page, `specviz record`, record()) ...
    killed = killer_report(killer)       # {"mid_run": True, "tokens": 172, ...} or {"error": ...}
    assert_killed_mid_run(killed)

The killer waits until the measured requests (not the warm-up) of the server serving `model` have
`steps` steps in the tracer file, freezes the EngineCore (SIGSTOP), reads from the trace how far the
run got, then kills: the EngineCore, or the server's whole process group (SIGKILL). Frozen, the
engine can take no further step and hand no further token to the API server (the tracer's writer
thread writes a step right after its outputs leave the EngineCore, so at most the last step or two may
not be in the file yet), so the trace then shows about every token the run will ever get: with the
tiny models every request runs to max_tokens, and the kill is mid-run exactly when
fewer than `num_requests` requests have max_tokens tokens there ("mid_run").

Why a process of its own: a killer thread in the test's process shares its GIL with the page being
drawn and the stream being read (and with imports such as vLLM's, on a first snapshot); it was
measured 1 to 2 s late, while the tiny model generates 1500 tokens in 2 to 4 s. A kill after the end
would test nothing and fail on what the run then rightly shows (a complete run, no error).
It imports only specviz.serving.local's process-group lookup, the one the server's own stop uses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from specviz.serving.local import live_group_members

KILLS = ("engine-core", "group")


def server_of(model: str, deadline_s: float) -> int:
    """The pid of the API server serving `model` (the leader of its process group)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                argv = cmdline.read_bytes().split(b"\0")
            except OSError:
                continue
            if b"vllm.entrypoints.openai.api_server" in argv and model.encode() in argv:
                return int(cmdline.parent.name)
        time.sleep(0.1)
    raise AssertionError(f"no vLLM server for {model} started within {deadline_s:.0f} s")


def trace_file(pid: int) -> Path:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return Path(next(v for v in environ if v.startswith(b"SPECVIZ_TRACE_FILE=")).split(b"=", 1)[1].decode())


def engine_core_of(server_pid: int, deadline_s: float) -> int:
    """The pid of the VLLM::EngineCore process in the process group of the vLLM server `server_pid`, once the
    server has started it (at most `deadline_s`)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for pid in live_group_members(server_pid):
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"VLLM::EngineCore"):
                    return pid
            except OSError:
                continue
        time.sleep(0.1)
    raise AssertionError(f"no VLLM::EngineCore process in the process group of {server_pid} within {deadline_s:.0f} s")


def _is_measured(line: bytes) -> bool:
    return b'"cmpl-warmup' not in line and b"cmpl-" in line


def wait_for_measured_steps(trace: Path, n: int, deadline_s: float) -> int:
    """Wait until the tracer file holds `n` steps of the measured requests (not the warm-up); return how many."""
    end, offset, partial, steps = time.monotonic() + deadline_s, 0, b"", 0
    while steps < n:
        if time.monotonic() > end:
            raise AssertionError(f"{trace} holds only {steps} steps of the measured requests after {deadline_s:.0f} s")
        time.sleep(0.01)
        try:
            with open(trace, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            continue
        offset += len(data)
        *lines, partial = (partial + data).split(b"\n")
        steps += sum(map(_is_measured, lines))
    return steps


def measured_tokens(trace: Path) -> tuple[dict[str, int], list[float]]:
    """({engine request id: tokens committed so far}, step times) of the measured requests in a tracer file."""
    committed: dict[str, int] = {}
    times = []
    for line in trace.read_bytes().split(b"\n"):
        if not _is_measured(line):
            continue
        try:
            record = json.loads(line)
        except ValueError:  # the last line, cut where the writer was stopped
            continue
        times.append(record["t"])
        for req_id, _drafts, _sampled, tokens, *_ in record["reqs"]:
            if not req_id.startswith("cmpl-warmup"):  # the tracer writes how many tokens; earlier ones, the ids
                committed[req_id] = committed.get(req_id, 0) + (tokens if isinstance(tokens, int) else len(tokens))
    return committed, times


def freeze(pid: int, timeout_s: float = 10) -> None:
    """SIGSTOP `pid` and wait until every thread of it has stopped: from then on it runs no instruction."""
    os.kill(pid, signal.SIGSTOP)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        states = []
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            try:
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
            except OSError:
                continue
        if states and all(s in ("T", "Z", "X") for s in states):
            return
        time.sleep(0.002)
    raise AssertionError(f"process {pid} did not stop within {timeout_s:.0f} s of SIGSTOP")


def kill_mid_run(model: str, kill: str, *, steps: int, max_tokens: int, num_requests: int,
                 deadline_s: float = 300) -> dict:
    """Wait for `steps` measured steps, freeze the EngineCore, read the trace, kill; what the trace showed."""
    pid = server_of(model, deadline_s)
    trace = trace_file(pid)
    engine_core = engine_core_of(pid, deadline_s)  # looked up first: between seeing and freezing, one signal
    wait_for_measured_steps(trace, steps, deadline_s)
    seen = time.time()
    freeze(engine_core)
    frozen = time.time()
    try:
        tokens, times = measured_tokens(trace)
        if kill == "engine-core":
            os.kill(engine_core, signal.SIGKILL)
        else:
            os.killpg(pid, signal.SIGKILL)
    except BaseException:
        os.kill(engine_core, signal.SIGKILL)  # never leave a frozen engine behind
        raise
    finished = sum(n >= max_tokens for n in tokens.values())
    return {"pid": pid, "engine_core": engine_core, "mid_run": finished < num_requests,
            "finished_requests": finished, "requests_seen": len(tokens), "tokens": sum(tokens.values()),
            "committed": tokens,  # per engine request id, what the trace held when the engine was frozen
            "steps": len(times), "seconds_of_steps": round(times[-1] - times[0], 3) if times else 0.0,
            # how long after the engine wrote the awaited step the killer saw it (its own lateness)
            "killer_late_s": round(seen - times[steps - 1], 3) if len(times) >= steps else None,
            "freeze_s": round(frozen - seen, 3)}  # from seeing that step to the engine frozen


def start_killer(model: str, *, kill: str, steps: int, max_tokens: int, num_requests: int) -> subprocess.Popen:
    assert kill in KILLS, kill
    return subprocess.Popen([sys.executable, __file__, model, kill, str(steps), str(max_tokens), str(num_requests)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def killer_report(proc: subprocess.Popen, timeout_s: float = 5) -> dict:
    """What the killer did (kill_mid_run's dict), {"error": ...} if it failed, {} if it never got to kill."""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return {} if not out.strip() else {"error": out}
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": out or f"the killer exited with code {proc.returncode} and said nothing"}


def assert_killed_mid_run(killed: dict) -> None:
    """The killer's report: it killed, and the run was not over yet."""
    assert "error" not in killed, f"the killer failed:\n{killed['error']}"
    assert killed, "the killer never got to kill (still waiting for steps?)"
    assert killed["mid_run"], f"the run had ended before the engine was stopped, so nothing died mid-run: {killed}"


if __name__ == "__main__":
    model, kill, steps, max_tokens, num_requests = sys.argv[1:6]
    try:
        report = kill_mid_run(model, kill, steps=int(steps), max_tokens=int(max_tokens),
                              num_requests=int(num_requests))
    except BaseException:
        report = {"error": traceback.format_exc()}
    print(json.dumps(report), flush=True)
